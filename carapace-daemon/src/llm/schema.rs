//! The structured answers Carapace asks models for, as JSON Schemas sent with each request,
//! and the check every answer passes on receipt. Servers do not all enforce `strict`
//! schemas (local ones often ignore them), so the daemon never trusts an answer's shape.
use serde_json::{json, Value};

/// One expected answer: its name (the `OpenAI` `json_schema.name`, the Anthropic tool name)
/// and schema.
#[derive(Clone, Debug)]
pub struct Schema {
    pub name: &'static str,
    pub description: &'static str,
    pub schema: Value,
}

/// "Does this rule apply to this operation?"
#[must_use]
pub fn verdict() -> Schema {
    Schema {
        name: "rule_verdict",
        description: "Whether the rule applies to the operation, and why",
        schema: json!({
            "type": "object",
            "properties": {
                "applies": {"type": "boolean"},
                "reason": {"type": "string"}
            },
            "required": ["applies", "reason"],
            "additionalProperties": false
        }),
    }
}

/// The operation types of the classifier (the reference personal-agent design).
pub const OPERATION_TYPES: &[&str] = &[
    "read_local",
    "write_local",
    "read_external",
    "write_external",
    "read_sensitive",
    "write_sensitive",
    "execute",
    "credential_access",
    "memory_read",
    "memory_write",
    "skill_modify",
];

/// What an operation does.
#[must_use]
pub fn classification() -> Schema {
    Schema {
        name: "operation_classification",
        description: "What the operation does",
        schema: json!({
            "type": "object",
            "properties": {
                "operation_type": {"type": "string", "enum": OPERATION_TYPES},
                "categories": {"type": "array", "items": {"type": "string"}},
                "description": {"type": "string"},
                "confidence": {"type": "number", "minimum": 0, "maximum": 1}
            },
            "required": ["operation_type", "categories", "description", "confidence"],
            "additionalProperties": false
        }),
    }
}

/// Rules proposed from a transcript's corrections (`carapace learn`).
#[must_use]
pub fn proposals() -> Schema {
    Schema {
        name: "proposed_rules",
        description: "Rules that would have prevented what the user corrected",
        schema: json!({
            "type": "object",
            "properties": {
                "rules": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {
                            "id": {"type": "string"},
                            "description": {"type": "string"},
                            "mode": {"type": "string", "enum": ["block", "approve", "warn", "log"]},
                            "tool": {"type": "array", "items": {"type": "string"}},
                            "path": {"type": "array", "items": {"type": "string"}},
                            "command": {"type": "array", "items": {"type": "string"}},
                            "content": {"type": "array", "items": {"type": "string"}},
                            "llm_review": {"type": "boolean"},
                            "prompt": {"type": "string"}
                        },
                        "required": ["id", "description", "mode", "tool", "path", "command",
                                     "content", "llm_review", "prompt"],
                        "additionalProperties": false
                    }
                }
            },
            "required": ["rules"],
            "additionalProperties": false
        }),
    }
}

/// Checks `value` against `schema` (the subset of JSON Schema the schemas above use:
/// `type`, `properties`, `required`, `additionalProperties: false`, `items`, `enum`,
/// `minimum`, `maximum`). Returns what is wrong, with its JSON path.
pub fn check(schema: &Value, value: &Value) -> Result<(), Mismatch> {
    check_at(schema, value, "$")
}

/// Where (a JSON path such as `$.categories[1]`) and how an answer differs from its schema.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{at}: {how}")]
pub struct Mismatch {
    pub at: String,
    pub how: How,
}

/// How a value differs from its schema.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum How {
    #[error("{value} is not one of {allowed}")]
    NotAllowed { value: Value, allowed: Value },
    #[error("expected {expected}, found {found}")]
    Type {
        expected: String,
        found: &'static str,
    },
    #[error("{0} is out of range")]
    OutOfRange(f64),
    #[error("missing `{0}`")]
    Missing(String),
    #[error("unexpected `{0}`")]
    Unexpected(String),
}

fn check_at(schema: &Value, value: &Value, at: &str) -> Result<(), Mismatch> {
    let mismatch = |how| Mismatch {
        at: at.to_owned(),
        how,
    };
    if let Some(allowed) = schema.get("enum").and_then(Value::as_array) {
        if !allowed.contains(value) {
            return Err(mismatch(How::NotAllowed {
                value: value.clone(),
                allowed: Value::from(allowed.clone()),
            }));
        }
    }
    let ty = schema.get("type").and_then(Value::as_str).unwrap_or("");
    let ok = match ty {
        "object" => value.is_object(),
        "array" => value.is_array(),
        "string" => value.is_string(),
        "boolean" => value.is_boolean(),
        "number" => value.is_number(),
        "integer" => value.is_i64() || value.is_u64(),
        _ => true,
    };
    if !ok {
        return Err(mismatch(How::Type {
            expected: ty.to_owned(),
            found: kind(value),
        }));
    }
    if let Some(n) = value.as_f64() {
        if schema
            .get("minimum")
            .and_then(Value::as_f64)
            .is_some_and(|m| n < m)
            || schema
                .get("maximum")
                .and_then(Value::as_f64)
                .is_some_and(|m| n > m)
        {
            return Err(mismatch(How::OutOfRange(n)));
        }
    }
    if let Some(obj) = value.as_object() {
        let props = schema.get("properties").and_then(Value::as_object);
        for req in schema
            .get("required")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if let Some(name) = req.as_str() {
                if !obj.contains_key(name) {
                    return Err(mismatch(How::Missing(name.to_owned())));
                }
            }
        }
        for (k, v) in obj {
            match props.and_then(|p| p.get(k)) {
                Some(sub) => check_at(sub, v, &format!("{at}.{k}"))?,
                None if schema.get("additionalProperties") == Some(&Value::Bool(false)) => {
                    return Err(mismatch(How::Unexpected(k.clone())));
                }
                None => {}
            }
        }
    }
    if let (Some(items), Some(arr)) = (schema.get("items"), value.as_array()) {
        for (i, v) in arr.iter().enumerate() {
            check_at(items, v, &format!("{at}[{i}]"))?;
        }
    }
    Ok(())
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn verdicts_are_checked() {
        let s = verdict().schema;
        assert!(check(&s, &json!({"applies": true, "reason": "r"})).is_ok());
        assert_eq!(
            check(&s, &json!({"applies": "yes", "reason": "r"}))
                .unwrap_err()
                .to_string(),
            "$.applies: expected boolean, found string"
        );
        assert!(check(&s, &json!({"applies": true}))
            .unwrap_err()
            .to_string()
            .contains("missing `reason`"));
        assert!(check(&s, &json!({"applies": true, "reason": "", "x": 1}))
            .unwrap_err()
            .to_string()
            .contains("unexpected `x`"));
        assert!(check(&s, &json!([true])).is_err());
    }

    #[test]
    fn classifications_are_checked() {
        let s = classification().schema;
        let good = json!({"operation_type": "execute", "categories": ["shell"],
                          "description": "d", "confidence": 0.9});
        assert!(check(&s, &good).is_ok());
        let mut bad = good.clone();
        bad["operation_type"] = json!("launch_missiles");
        assert!(check(&s, &bad)
            .unwrap_err()
            .to_string()
            .contains("is not one of"));
        let mut bad = good.clone();
        bad["confidence"] = json!(7);
        assert!(check(&s, &bad)
            .unwrap_err()
            .to_string()
            .contains("out of range"));
        let mut bad = good;
        bad["categories"] = json!(["a", 1]);
        assert!(check(&s, &bad)
            .unwrap_err()
            .to_string()
            .contains("$.categories[1]"));
    }

    fn arb_json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<f64>().prop_map(|f| json!(f)),
            "[a-z_]{0,8}".prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 32, 6, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                prop::collection::btree_map("[a-z_]{0,10}", inner, 0..6)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest! {
        /// Whatever a model sends back, checking it never panics.
        #[test]
        fn any_answer_is_checked_without_panicking(v in arb_json()) {
            for s in [verdict(), classification(), proposals()] {
                let _ = check(&s.schema, &v);
            }
        }
    }
}
