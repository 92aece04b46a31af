//! The rule language: parse, validate, compile.
