//! The audit ledger: every decision of every layer, session change and rule reload, in an
//! append-only, hash-chained log under `DATA_DIR/audit/`.
//!
//! # Layout
//! - `ledger-000001.jsonl`, `ledger-000002.jsonl`, …: segments of one JSON record per line.
//!   A segment is closed when the next record would take it past 64 MiB; the first record of
//!   a new segment chains to the last record of the previous one, so the chain runs through
//!   every segment unbroken.
//! - `head`: the seq and hash of the last record acknowledged (fixed width, rewritten in
//!   place after each commit).
//!
//! # Records
//! `seq` (1, 2, … with no gaps across segments), `ts` (UTC, µs), the [`Event`] fields, `prev`
//! (the previous record's hash; 64 zeros for the first) and `hash`: sha256 over the record's
//! exact bytes without the `hash` member (see [`record`]). Argument values are never written —
//! only the sha256 of the arguments as received; every free-text field (purpose, commands,
//! what a rule matched, paths) goes through [`redact::redact`] first.
//!
//! # Durability (fsync policy)
//! Records are written in batches (group commit: records arriving while a batch is written
//! and synced go out together in the next), each batch followed by one `fdatasync`; then the
//! head is rewritten in place (not synced per commit: it can only lag behind synced records
//! after a power loss, never point past them). Callers wait for the acknowledgement before
//! they answer. When, is config.yaml's `audit: { acknowledge: … }`:
//! - `written` (default): once the batch is written. A crash of carapaced — `kill -9`
//!   included — loses no acknowledged record (the kernel's page cache holds it); a power
//!   loss or kernel crash can lose the one batch written but not yet synced (the sync starts
//!   at once: about a millisecond). The flush's latency (0.2–4 ms by disk) stays out of every
//!   decision. A sync that fails after the acknowledgement cannot be taken back: the ledger
//!   stops and every later decision is refused until restart.
//! - `synced`: only after the `fdatasync`, so not even a power loss loses an acknowledged
//!   record.
//!
//! Either way a crash leaves at worst an unfinished last line, never acknowledged, which the
//! next start cuts off and mentions in its `ledger-opened` record.
//!
//! # Failure policy (fail closed)
//! The daemon does not start when the ledger cannot be opened, or when its end is damaged or
//! was cut off (the error says to run `carapace audit verify` and move the directory aside).
//! When a write fails while running, the decision is not given: `Evaluate` / `ScanHistory`
//! return `UNAVAILABLE` ("the decision could not be recorded"), which hooks treat as a
//! denial. A failed write is undone (the segment cut back) so later records still chain; if
//! that is impossible, every later decision is refused until restart.
//!
//! # What tampering is detectable
//! `carapace audit verify` detects, and names the first bad file, line and seq for: any byte
//! of a record changed; a record deleted, inserted, duplicated, swapped or moved to another
//! segment; a segment deleted or renamed; records deleted from the end (the head points
//! past them) — including the whole newest segment; a head that was edited.
//! Not detectable from the files alone: someone with write access to the directory (root)
//! who recomputes the chain and the head from some record on, who deletes records from the
//! end and sets the head back to the new last record, or who deletes the whole directory. The hashes are not keyed because any key would sit on the same machine
//! for the same root to read. Against that, keep the head elsewhere: the daemon logs the
//! head (seq and hash) when it opens and closes the ledger, and `verify` prints it.
pub mod files;
pub mod ledger;
pub mod record;
pub mod redact;
pub mod verify;

pub use self::ledger::{AuditError, Ledger, Options};
pub use self::record::{Agent, Event, Kind, RuleRef};

#[cfg(test)]
mod tests;
