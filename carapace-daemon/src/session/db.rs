//! Session storage: one `SQLite` database, `$DATA_DIR/carapace.db`, in WAL mode.
//!
//! It holds the `carapace run` sessions (so that a restarted daemon adopts them), the agent
//! sessions named by a harness (Claude Code's `session_id`), and everything a session
//! accumulates: rules its triggers switched on, rules the user switched off, operations the
//! user approved (by signature), the operation history, and approval requests.
//!
//! Durability: every change is one transaction, committed before the request that made it is
//! answered. `synchronous = NORMAL` in WAL mode keeps committed transactions across a crash or
//! `kill -9` of the daemon; only a power loss can drop the last few (which then never happened
//! for the machine either: the operations they recorded ran on the same, lost, state).
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{SystemTime, UNIX_EPOCH};

use rusqlite::{params, Connection, OptionalExtension as _};
use serde::{Deserialize, Serialize};

use crate::io_error::IoError;

/// File name of the database inside the data directory.
pub const FILE_NAME: &str = "carapace.db";
/// The JSON store of earlier versions, imported once.
const LEGACY_JSON: &str = "sessions.json";

/// Schema migrations, applied in order; `PRAGMA user_version` counts the applied ones.
const MIGRATIONS: &[&str] = &[
    // 1: sessions, their rule state, approvals and history.
    "CREATE TABLE sessions (
        id TEXT PRIMARY KEY,
        kind TEXT NOT NULL CHECK (kind IN ('run', 'agent')),
        owner_uid INTEGER NOT NULL,
        created INTEGER NOT NULL,
        command TEXT NOT NULL,
        number INTEGER,
        leader_pid INTEGER,
        leader_origin TEXT,
        cgroup TEXT,
        cgroup_id INTEGER,
        agent TEXT,
        external_id TEXT
    );
    CREATE UNIQUE INDEX agent_session_names ON sessions (owner_uid, agent, external_id)
        WHERE kind = 'agent';
    CREATE TABLE rule_state (
        session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
        rule_id TEXT NOT NULL,
        state TEXT NOT NULL CHECK (state IN ('activated', 'disabled')),
        at INTEGER NOT NULL,
        reason TEXT NOT NULL,
        PRIMARY KEY (session_id, rule_id, state)
    );
    CREATE TABLE approved (
        session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
        signature TEXT NOT NULL,
        at INTEGER NOT NULL,
        approval_id TEXT NOT NULL,
        PRIMARY KEY (session_id, signature)
    );
    CREATE TABLE history (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
        at INTEGER NOT NULL,
        tool TEXT NOT NULL,
        summary TEXT NOT NULL,
        decision TEXT NOT NULL,
        signature TEXT NOT NULL
    );
    CREATE INDEX history_by_session ON history (session_id, seq);
    CREATE TABLE approvals (
        id TEXT PRIMARY KEY,
        session_id TEXT REFERENCES sessions (id) ON DELETE CASCADE,
        kind TEXT NOT NULL CHECK (kind IN ('call', 'plan')),
        created INTEGER NOT NULL,
        status TEXT NOT NULL CHECK (status IN ('pending', 'approved', 'denied', 'expired')),
        request TEXT NOT NULL,
        answer TEXT NOT NULL DEFAULT '',
        decided_at INTEGER,
        decided_by INTEGER
    );
    CREATE INDEX pending_approvals ON approvals (status) WHERE status = 'pending';",
    // 2: approval requests the kernel's refusals file (approve-mode path rules). SQLite
    // cannot change a CHECK in place: the table is copied into one that allows the kind.
    "CREATE TABLE approvals_v2 (
        id TEXT PRIMARY KEY,
        session_id TEXT REFERENCES sessions (id) ON DELETE CASCADE,
        kind TEXT NOT NULL CHECK (kind IN ('call', 'plan', 'kernel')),
        created INTEGER NOT NULL,
        status TEXT NOT NULL CHECK (status IN ('pending', 'approved', 'denied', 'expired')),
        request TEXT NOT NULL,
        answer TEXT NOT NULL DEFAULT '',
        decided_at INTEGER,
        decided_by INTEGER
    );
    INSERT INTO approvals_v2 SELECT id, session_id, kind, created, status, request, answer,
        decided_at, decided_by FROM approvals;
    DROP TABLE approvals;
    ALTER TABLE approvals_v2 RENAME TO approvals;
    CREATE INDEX pending_approvals ON approvals (status) WHERE status = 'pending';",
    // 3: how a `carapace run` session enforces (`carapace_common::SESSION_*` bits: shadow
    // mode), so that a restarted daemon tags it again the same way.
    "ALTER TABLE sessions ADD COLUMN flags INTEGER NOT NULL DEFAULT 0;",
    // 4: the named profile a `carapace run --profile` session runs under ('' for the main
    // rules), so that a restarted daemon gives it the same rules.
    "ALTER TABLE sessions ADD COLUMN profile TEXT NOT NULL DEFAULT '';",
];

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    #[error(transparent)]
    Io(#[from] IoError),
    #[error("session database {path}: {source}")]
    Sql {
        path: PathBuf,
        #[source]
        source: rusqlite::Error,
    },
    #[error("session database {path} has schema version {found}, newer than this carapaced knows ({known}); upgrade carapaced")]
    TooNew {
        path: PathBuf,
        found: i64,
        known: usize,
    },
    #[error("{path} is not a valid session store: {source}")]
    Format {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
}

/// What the daemon remembers about a `carapace run` session across restarts.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionRecord {
    pub id: String,
    /// Number the kernel programs put in events.
    pub number: u32,
    pub owner_uid: u32,
    /// The `carapace run` process that asked for the session (it lives inside the cgroup).
    pub leader_pid: u32,
    /// The leader's cgroup before it joined the session (hierarchy-relative), so that ending
    /// the session can move it back out before killing what remains.
    pub leader_origin: String,
    /// Session cgroup directory.
    pub cgroup: PathBuf,
    pub cgroup_id: u64,
    pub command: Vec<String>,
    /// Seconds since the Unix epoch.
    pub created: u64,
    /// `carapace_common::SESSION_*` bits (shadow mode); absent in earlier stores.
    #[serde(default)]
    pub flags: u32,
    /// The named profile it runs under (`carapace run --profile`); empty: the main rules.
    #[serde(default)]
    pub profile: String,
}

impl SessionRecord {
    /// Whether the session runs in shadow mode (`carapace run --shadow`).
    #[must_use]
    pub fn shadow(&self) -> bool {
        self.flags & carapace_common::SESSION_SHADOW != 0
    }

    /// Whether the session records what it touches (`carapace run --record`).
    #[must_use]
    pub fn records(&self) -> bool {
        self.flags & carapace_common::SESSION_RECORD != 0
    }
}

/// A session named by an agent harness rather than created by `carapace run`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AgentSession {
    pub id: String,
    pub owner_uid: u32,
    /// e.g. `claude-code`.
    pub agent: String,
    /// The harness's own session id.
    pub external_id: String,
    pub created: u64,
}

/// A session's rule state entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RuleState {
    /// Its trigger fired.
    Activated,
    /// The user switched it off.
    Disabled,
}

impl RuleState {
    fn name(self) -> &'static str {
        match self {
            Self::Activated => "activated",
            Self::Disabled => "disabled",
        }
    }
}

/// One operation of a session's history.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct HistoryEntry {
    pub seq: i64,
    pub at: u64,
    pub tool: String,
    pub summary: String,
    pub decision: String,
    pub signature: String,
}

/// Where an approval request stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ApprovalStatus {
    Pending,
    Approved,
    Denied,
    Expired,
}

impl ApprovalStatus {
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Approved => "approved",
            Self::Denied => "denied",
            Self::Expired => "expired",
        }
    }

    fn parse(s: &str) -> Self {
        match s {
            "pending" => Self::Pending,
            "approved" => Self::Approved,
            "expired" => Self::Expired,
            // Anything unexpected reads as a refusal.
            _ => Self::Denied,
        }
    }
}

/// An approval request as stored. `request` and `answer` are JSON documents owned by the
/// approvals module.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApprovalRow {
    pub id: String,
    pub session_id: Option<String>,
    pub kind: String,
    pub created: u64,
    pub status: ApprovalStatus,
    pub request: String,
    pub answer: String,
    pub decided_at: Option<u64>,
    pub decided_by: Option<u32>,
}

/// The database. One connection behind a mutex: every statement is short, and `SQLite`
/// serialises writers anyway.
pub struct Db {
    path: PathBuf,
    conn: Mutex<Connection>,
}

#[must_use]
pub fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

impl Db {
    /// Opens (creating if needed) `$DATA_DIR/carapace.db`, applies migrations, and imports
    /// the JSON store of earlier versions if one is there.
    pub fn open(data_dir: &Path) -> Result<Self, StoreError> {
        let path = data_dir.join(FILE_NAME);
        let conn = Connection::open(&path).map_err(|source| StoreError::Sql {
            path: path.clone(),
            source,
        })?;
        // Room for every statement `run` and `row` cache, with some to spare.
        conn.set_prepared_statement_cache_capacity(32);
        let db = Self {
            path,
            conn: Mutex::new(conn),
        };
        db.prepare()?;
        db.import_legacy(&data_dir.join(LEGACY_JSON))?;
        Ok(db)
    }

    fn lock(&self) -> MutexGuard<'_, Connection> {
        // A statement that panicked leaves no half transaction behind (rusqlite rolls back
        // on drop), so the connection stays usable.
        self.conn.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn sql<T>(&self, r: rusqlite::Result<T>) -> Result<T, StoreError> {
        r.map_err(|source| StoreError::Sql {
            path: self.path.clone(),
            source,
        })
    }

    fn prepare(&self) -> Result<(), StoreError> {
        let mut conn = self.lock();
        let setup = conn.execute_batch(
            "PRAGMA journal_mode = WAL;
             PRAGMA synchronous = NORMAL;
             PRAGMA foreign_keys = ON;
             PRAGMA busy_timeout = 5000;",
        );
        self.sql(setup)?;
        let version: i64 = self.sql(conn.query_row("PRAGMA user_version", [], |r| r.get(0)))?;
        let applied = usize::try_from(version).unwrap_or(usize::MAX);
        if applied > MIGRATIONS.len() {
            return Err(StoreError::TooNew {
                path: self.path.clone(),
                found: version,
                known: MIGRATIONS.len(),
            });
        }
        for (i, migration) in MIGRATIONS.iter().enumerate().skip(applied) {
            let tx = self.sql(conn.transaction())?;
            self.sql(tx.execute_batch(migration))?;
            self.sql(tx.execute_batch(&format!("PRAGMA user_version = {}", i + 1)))?;
            self.sql(tx.commit())?;
            tracing::info!(path = %self.path.display(), version = i + 1, "session database migrated");
        }
        Ok(())
    }

    fn import_legacy(&self, json: &Path) -> Result<(), StoreError> {
        #[derive(Deserialize)]
        struct Legacy {
            sessions: Vec<SessionRecord>,
        }
        let text = match std::fs::read_to_string(json) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(source) => return Err(IoError::new("read", json, source).into()),
        };
        let legacy: Legacy = serde_json::from_str(&text).map_err(|source| StoreError::Format {
            path: json.into(),
            source,
        })?;
        for record in &legacy.sessions {
            if self.run_session(&record.id)?.is_none() {
                self.insert_run_session(record)?;
            }
        }
        let done = json.with_extension("json.imported");
        std::fs::rename(json, &done).map_err(IoError::at("rename", json))?;
        tracing::info!(from = %json.display(), sessions = legacy.sessions.len(), "imported the JSON session store");
        Ok(())
    }

    // ---- run sessions ------------------------------------------------------------------

    pub fn insert_run_session(&self, r: &SessionRecord) -> Result<(), StoreError> {
        let command = serde_json::to_string(&r.command).unwrap_or_else(|_| "[]".into());
        let conn = self.lock();
        self.sql(run(
            &conn,
            "INSERT INTO sessions (id, kind, owner_uid, created, command, number, leader_pid,
                                   leader_origin, cgroup, cgroup_id, flags, profile)
             VALUES (?1, 'run', ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
            params![
                r.id,
                r.owner_uid,
                r.created,
                command,
                r.number,
                r.leader_pid,
                r.leader_origin,
                r.cgroup.to_string_lossy(),
                r.cgroup_id.cast_signed(),
                r.flags,
                r.profile,
            ],
        ))?;
        Ok(())
    }

    fn run_session(&self, id: &str) -> Result<Option<SessionRecord>, StoreError> {
        Ok(self
            .run_sessions()?
            .into_iter()
            .find(|record| record.id == id))
    }

    pub fn run_sessions(&self) -> Result<Vec<SessionRecord>, StoreError> {
        let conn = self.lock();
        let mut stmt = self.sql(conn.prepare_cached(
            "SELECT id, number, owner_uid, leader_pid, leader_origin, cgroup, cgroup_id,
                    command, created, flags, profile
             FROM sessions WHERE kind = 'run' ORDER BY id",
        ))?;
        let rows = stmt.query_map([], |row| {
            let command: String = row.get(7)?;
            let cgroup: String = row.get(5)?;
            let cgroup_id: i64 = row.get(6)?;
            Ok(SessionRecord {
                id: row.get(0)?,
                number: row.get(1)?,
                owner_uid: row.get(2)?,
                leader_pid: row.get(3)?,
                leader_origin: row.get(4)?,
                cgroup: PathBuf::from(cgroup),
                cgroup_id: cgroup_id.cast_unsigned(),
                command: serde_json::from_str(&command).unwrap_or_default(),
                created: row.get(8)?,
                flags: row.get(9)?,
                profile: row.get(10)?,
            })
        });
        let rows = self.sql(rows)?;
        self.sql(rows.collect())
    }

    /// Forgets a session and everything it accumulated.
    pub fn remove_session(&self, id: &str) -> Result<(), StoreError> {
        let conn = self.lock();
        self.sql(run(&conn, "DELETE FROM sessions WHERE id = ?1", [id]))?;
        Ok(())
    }

    // ---- agent sessions ----------------------------------------------------------------

    /// The agent session `(owner, agent, external_id)`, created with `id` if it is new.
    pub fn agent_session(
        &self,
        id: &str,
        owner_uid: u32,
        agent: &str,
        external_id: &str,
    ) -> Result<AgentSession, StoreError> {
        let conn = self.lock();
        self.sql(run(
            &conn,
            "INSERT INTO sessions (id, kind, owner_uid, created, command, agent, external_id)
             VALUES (?1, 'agent', ?2, ?3, '[]', ?4, ?5)
             ON CONFLICT DO NOTHING",
            params![id, owner_uid, now(), agent, external_id],
        ))?;
        self.sql(row(
            &conn,
            "SELECT id, owner_uid, agent, external_id, created FROM sessions
             WHERE kind = 'agent' AND owner_uid = ?1 AND agent = ?2 AND external_id = ?3",
            params![owner_uid, agent, external_id],
            agent_row,
        ))
    }

    pub fn agent_sessions(&self) -> Result<Vec<AgentSession>, StoreError> {
        let conn = self.lock();
        let mut stmt = self.sql(conn.prepare_cached(
            "SELECT id, owner_uid, agent, external_id, created FROM sessions
             WHERE kind = 'agent' ORDER BY created, id",
        ))?;
        let rows = self.sql(stmt.query_map([], agent_row))?;
        self.sql(rows.collect())
    }

    /// Owner of any session, if it exists.
    pub fn owner_of(&self, id: &str) -> Result<Option<u32>, StoreError> {
        let conn = self.lock();
        self.sql(
            row(
                &conn,
                "SELECT owner_uid FROM sessions WHERE id = ?1",
                [id],
                |r| r.get(0),
            )
            .optional(),
        )
    }

    // ---- rule state --------------------------------------------------------------------

    /// Turns a rule state on or off; returns whether anything changed.
    pub fn set_rule_state(
        &self,
        session: &str,
        rule: &str,
        state: RuleState,
        on: bool,
        reason: &str,
    ) -> Result<bool, StoreError> {
        let conn = self.lock();
        let changed = if on {
            run(
                &conn,
                "INSERT INTO rule_state (session_id, rule_id, state, at, reason)
                 VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT DO NOTHING",
                params![session, rule, state.name(), now(), reason],
            )
        } else {
            run(
                &conn,
                "DELETE FROM rule_state WHERE session_id = ?1 AND rule_id = ?2 AND state = ?3",
                params![session, rule, state.name()],
            )
        };
        Ok(self.sql(changed)? > 0)
    }

    /// `(rule id, state, since, reason)` of a session, in rule-id order.
    pub fn rule_states(
        &self,
        session: &str,
    ) -> Result<Vec<(String, RuleState, u64, String)>, StoreError> {
        let conn = self.lock();
        let mut stmt = self.sql(conn.prepare_cached(
            "SELECT rule_id, state, at, reason FROM rule_state WHERE session_id = ?1
             ORDER BY rule_id, state",
        ))?;
        let rows = self.sql(stmt.query_map([session], |row| {
            let state: String = row.get(1)?;
            let state = if state == "disabled" {
                RuleState::Disabled
            } else {
                RuleState::Activated
            };
            Ok((row.get(0)?, state, row.get(2)?, row.get(3)?))
        }))?;
        self.sql(rows.collect())
    }

    // ---- approved operations and history -----------------------------------------------

    pub fn approve_signature(
        &self,
        session: &str,
        signature: &str,
        approval: &str,
    ) -> Result<(), StoreError> {
        let conn = self.lock();
        self.sql(run(
            &conn,
            "INSERT INTO approved (session_id, signature, at, approval_id) VALUES (?1, ?2, ?3, ?4)
             ON CONFLICT DO NOTHING",
            params![session, signature, now(), approval],
        ))?;
        Ok(())
    }

    pub fn is_approved(&self, session: &str, signature: &str) -> Result<bool, StoreError> {
        let conn = self.lock();
        let found = conn
            .query_row(
                "SELECT 1 FROM approved WHERE session_id = ?1 AND signature = ?2",
                params![session, signature],
                |_| Ok(()),
            )
            .optional();
        Ok(self.sql(found)?.is_some())
    }

    pub fn approved_count(&self, session: &str) -> Result<u64, StoreError> {
        let conn = self.lock();
        self.sql(row(
            &conn,
            "SELECT COUNT(*) FROM approved WHERE session_id = ?1",
            [session],
            |r| r.get(0),
        ))
    }

    pub fn push_history(&self, session: &str, e: &HistoryEntry) -> Result<(), StoreError> {
        let conn = self.lock();
        self.sql(run(
            &conn,
            "INSERT INTO history (session_id, at, tool, summary, decision, signature)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            params![session, e.at, e.tool, e.summary, e.decision, e.signature],
        ))?;
        Ok(())
    }

    /// The last `limit` operations of a session, oldest first.
    pub fn history(&self, session: &str, limit: u32) -> Result<Vec<HistoryEntry>, StoreError> {
        let conn = self.lock();
        let mut stmt = self.sql(conn.prepare_cached(
            "SELECT seq, at, tool, summary, decision, signature FROM
               (SELECT * FROM history WHERE session_id = ?1 ORDER BY seq DESC LIMIT ?2)
             ORDER BY seq",
        ))?;
        let rows = self.sql(stmt.query_map(params![session, limit], |row| {
            Ok(HistoryEntry {
                seq: row.get(0)?,
                at: row.get(1)?,
                tool: row.get(2)?,
                summary: row.get(3)?,
                decision: row.get(4)?,
                signature: row.get(5)?,
            })
        }))?;
        self.sql(rows.collect())
    }

    /// Clears what a session accumulated (rule state, approvals, history) but keeps the
    /// session itself. Pending approvals are denied.
    pub fn reset(&self, session: &str, by: u32) -> Result<(), StoreError> {
        let mut conn = self.lock();
        let tx = self.sql(conn.transaction())?;
        for stmt in [
            "DELETE FROM rule_state WHERE session_id = ?1",
            "DELETE FROM approved WHERE session_id = ?1",
            "DELETE FROM history WHERE session_id = ?1",
            // Earlier answers no longer stand for identical requests (see
            // `approvals::Request::key`).
            "UPDATE approvals SET request = json_set(request, '$.key', '') WHERE session_id = ?1",
        ] {
            self.sql(tx.execute(stmt, [session]))?;
        }
        self.sql(tx.execute(
            "UPDATE approvals SET status = 'denied', answer = '{\"reason\":\"session reset\"}',
                    decided_at = ?2, decided_by = ?3
             WHERE session_id = ?1 AND status = 'pending'",
            params![session, now(), by],
        ))?;
        self.sql(tx.commit())
    }

    // ---- approvals ---------------------------------------------------------------------

    pub fn insert_approval(&self, a: &ApprovalRow) -> Result<(), StoreError> {
        let conn = self.lock();
        self.sql(run(
            &conn,
            "INSERT INTO approvals (id, session_id, kind, created, status, request, answer)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            params![
                a.id,
                a.session_id,
                a.kind,
                a.created,
                a.status.name(),
                a.request,
                a.answer
            ],
        ))?;
        Ok(())
    }

    /// Rewrites the request of a pending approval (how many times it was asked); `false`
    /// when it is no longer pending.
    pub fn update_pending_request(&self, id: &str, request: &str) -> Result<bool, StoreError> {
        let conn = self.lock();
        let changed = self.sql(conn.execute(
            "UPDATE approvals SET request = ?2 WHERE id = ?1 AND status = 'pending'",
            params![id, request],
        ))?;
        Ok(changed > 0)
    }

    /// Answers a pending approval; `false` when it is not pending (answered, expired or
    /// unknown). The approved signatures are recorded in the same transaction.
    pub fn answer_approval(
        &self,
        id: &str,
        status: ApprovalStatus,
        answer: &str,
        by: u32,
        approve: &[(String, String)],
    ) -> Result<bool, StoreError> {
        let mut conn = self.lock();
        let tx = self.sql(conn.transaction())?;
        let changed = self.sql(tx.execute(
            "UPDATE approvals SET status = ?2, answer = ?3, decided_at = ?4, decided_by = ?5
             WHERE id = ?1 AND status = 'pending'",
            params![id, status.name(), answer, now(), by],
        ))?;
        if changed == 0 {
            return Ok(false);
        }
        for (session, signature) in approve {
            self.sql(tx.execute(
                "INSERT INTO approved (session_id, signature, at, approval_id)
                 VALUES (?1, ?2, ?3, ?4) ON CONFLICT DO NOTHING",
                params![session, signature, now(), id],
            ))?;
        }
        self.sql(tx.commit())?;
        Ok(true)
    }

    pub fn approval(&self, id: &str) -> Result<Option<ApprovalRow>, StoreError> {
        Ok(self.approvals_where("id = ?1", id)?.into_iter().next())
    }

    pub fn pending_approvals(&self) -> Result<Vec<ApprovalRow>, StoreError> {
        self.approvals_where("status = ?1", "pending")
    }

    pub fn session_approvals(&self, session: &str) -> Result<Vec<ApprovalRow>, StoreError> {
        self.approvals_where("session_id = ?1", session)
    }

    fn approvals_where(&self, filter: &str, arg: &str) -> Result<Vec<ApprovalRow>, StoreError> {
        let conn = self.lock();
        let mut stmt = self.sql(conn.prepare(&format!(
            "SELECT id, session_id, kind, created, status, request, answer, decided_at, decided_by
             FROM approvals WHERE {filter} ORDER BY created, id"
        )))?;
        let rows = self.sql(stmt.query_map([arg], |row| {
            let status: String = row.get(4)?;
            Ok(ApprovalRow {
                id: row.get(0)?,
                session_id: row.get(1)?,
                kind: row.get(2)?,
                created: row.get(3)?,
                status: ApprovalStatus::parse(&status),
                request: row.get(5)?,
                answer: row.get(6)?,
                decided_at: row.get(7)?,
                decided_by: row.get(8)?,
            })
        }))?;
        self.sql(rows.collect())
    }
}

/// An `agent` session from `SELECT id, owner_uid, agent, external_id, created`.
fn agent_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<AgentSession> {
    Ok(AgentSession {
        id: row.get(0)?,
        owner_uid: row.get(1)?,
        agent: row.get(2)?,
        external_id: row.get(3)?,
        created: row.get(4)?,
    })
}

/// A statement compiled once per connection (rusqlite's statement cache): every tool call
/// runs the same few, and compiling one costs more than running it.
fn run(conn: &Connection, sql: &str, params: impl rusqlite::Params) -> rusqlite::Result<usize> {
    conn.prepare_cached(sql)?.execute(params)
}

/// One row of a cached statement (see [`run`]).
fn row<T>(
    conn: &Connection,
    sql: &str,
    params: impl rusqlite::Params,
    f: impl FnOnce(&rusqlite::Row<'_>) -> rusqlite::Result<T>,
) -> rusqlite::Result<T> {
    conn.prepare_cached(sql)?.query_row(params, f)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(id: &str) -> SessionRecord {
        SessionRecord {
            id: id.into(),
            number: 3,
            owner_uid: 1000,
            leader_pid: 42,
            leader_origin: "/user.slice".into(),
            cgroup: "/sys/fs/cgroup/carapace/s-1".into(),
            cgroup_id: u64::MAX - 5,
            command: vec!["claude".into(), "--x".into()],
            created: 1_700_000_000,
            flags: 0,
            profile: String::new(),
        }
    }

    #[test]
    fn a_shadow_session_with_a_profile_is_still_one_after_reopening() {
        let dir = tempfile::tempdir().unwrap();
        let mut shadow = record("s-2");
        shadow.flags = carapace_common::SESSION_SHADOW;
        shadow.profile = "ci".to_owned();
        {
            let db = Db::open(dir.path()).unwrap();
            db.insert_run_session(&record("s-1")).unwrap();
            db.insert_run_session(&shadow).unwrap();
        }
        let db = Db::open(dir.path()).unwrap();
        let got = db.run_sessions().unwrap();
        assert_eq!(got.len(), 2);
        assert!(!got[0].shadow(), "{:?}", got[0]);
        assert!(got[1].shadow(), "{:?}", got[1]);
        assert_eq!(got[1], shadow);
    }

    #[test]
    fn everything_survives_reopening() {
        let dir = tempfile::tempdir().unwrap();
        {
            let db = Db::open(dir.path()).unwrap();
            db.insert_run_session(&record("s-1")).unwrap();
            let a = db.agent_session("a-1", 1000, "claude-code", "abc").unwrap();
            assert_eq!(a.id, "a-1");
            // Same name, other id: the existing session is returned.
            assert_eq!(
                db.agent_session("a-2", 1000, "claude-code", "abc")
                    .unwrap()
                    .id,
                "a-1"
            );
            assert!(db
                .set_rule_state(
                    "s-1",
                    "no-write",
                    RuleState::Activated,
                    true,
                    "after WebFetch"
                )
                .unwrap());
            assert!(!db
                .set_rule_state("s-1", "no-write", RuleState::Activated, true, "again")
                .unwrap());
            db.set_rule_state("a-1", "memory", RuleState::Disabled, true, "by uid 1000")
                .unwrap();
            db.approve_signature("s-1", "sha256:1", "ap-1").unwrap();
            db.insert_approval(&ApprovalRow {
                id: "ap-2".into(),
                session_id: Some("s-1".into()),
                kind: "call".into(),
                created: 5,
                status: ApprovalStatus::Pending,
                request: "{}".into(),
                answer: String::new(),
                decided_at: None,
                decided_by: None,
            })
            .unwrap();
        }
        let db = Db::open(dir.path()).unwrap();
        assert_eq!(db.run_sessions().unwrap(), vec![record("s-1")]);
        assert_eq!(db.agent_sessions().unwrap().len(), 1);
        let states = db.rule_states("s-1").unwrap();
        assert_eq!(states.len(), 1);
        assert_eq!(states[0].0, "no-write");
        assert!(db.is_approved("s-1", "sha256:1").unwrap());
        assert!(!db.is_approved("a-1", "sha256:1").unwrap());
        assert_eq!(db.pending_approvals().unwrap().len(), 1);
        // Answering twice: only the first counts.
        let sig = [("s-1".to_owned(), "sha256:2".to_owned())];
        assert!(db
            .answer_approval("ap-2", ApprovalStatus::Approved, "{}", 0, &sig)
            .unwrap());
        assert!(!db
            .answer_approval("ap-2", ApprovalStatus::Denied, "{}", 0, &[])
            .unwrap());
        assert!(db.is_approved("s-1", "sha256:2").unwrap());
        // Removing a session removes what it accumulated.
        db.remove_session("s-1").unwrap();
        assert!(db.rule_states("s-1").unwrap().is_empty());
        assert!(!db.is_approved("s-1", "sha256:1").unwrap());
    }

    #[test]
    fn reset_clears_state_and_denies_pending_approvals() {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(dir.path()).unwrap();
        db.agent_session("a-1", 7, "claude-code", "x").unwrap();
        db.set_rule_state("a-1", "r", RuleState::Activated, true, "t")
            .unwrap();
        db.approve_signature("a-1", "sig", "ap").unwrap();
        db.push_history(
            "a-1",
            &HistoryEntry {
                seq: 0,
                at: 1,
                tool: "Bash".into(),
                summary: "ls".into(),
                decision: "allow".into(),
                signature: "sig".into(),
            },
        )
        .unwrap();
        db.insert_approval(&ApprovalRow {
            id: "ap-1".into(),
            session_id: Some("a-1".into()),
            kind: "call".into(),
            created: 1,
            status: ApprovalStatus::Pending,
            request: "{}".into(),
            answer: String::new(),
            decided_at: None,
            decided_by: None,
        })
        .unwrap();
        assert_eq!(db.history("a-1", 10).unwrap().len(), 1);
        db.reset("a-1", 7).unwrap();
        assert!(db.rule_states("a-1").unwrap().is_empty());
        assert!(!db.is_approved("a-1", "sig").unwrap());
        assert!(db.history("a-1", 10).unwrap().is_empty());
        let ap = db.approval("ap-1").unwrap().unwrap();
        assert_eq!(ap.status, ApprovalStatus::Denied);
        assert_eq!(ap.decided_by, Some(7));
        assert_eq!(db.owner_of("a-1").unwrap(), Some(7));
    }

    #[test]
    fn the_json_store_of_earlier_versions_is_imported_once() {
        let dir = tempfile::tempdir().unwrap();
        let json = serde_json::json!({"version": 1, "sessions": [record("s-9")]});
        std::fs::write(dir.path().join(LEGACY_JSON), json.to_string()).unwrap();
        let db = Db::open(dir.path()).unwrap();
        assert_eq!(db.run_sessions().unwrap(), vec![record("s-9")]);
        assert!(!dir.path().join(LEGACY_JSON).exists());
        drop(db);
        let db = Db::open(dir.path()).unwrap();
        assert_eq!(db.run_sessions().unwrap().len(), 1);
    }

    #[test]
    fn a_version_1_store_takes_kernel_requests_and_keeps_its_approvals() {
        let dir = tempfile::tempdir().unwrap();
        let conn = Connection::open(dir.path().join(FILE_NAME)).unwrap();
        conn.execute_batch(MIGRATIONS[0]).unwrap();
        conn.execute_batch(
            "PRAGMA user_version = 1;
             INSERT INTO approvals (id, session_id, kind, created, status, request)
             VALUES ('ap-old', NULL, 'call', 1, 'pending', '{}');",
        )
        .unwrap();
        drop(conn);
        let db = Db::open(dir.path()).unwrap();
        assert!(db.approval("ap-old").unwrap().is_some(), "kept");
        let row = ApprovalRow {
            id: "ap-k".into(),
            session_id: None,
            kind: "kernel".into(),
            created: 2,
            status: ApprovalStatus::Pending,
            request: "{}".into(),
            answer: String::new(),
            decided_at: None,
            decided_by: None,
        };
        db.insert_approval(&row).unwrap();
        let pending: Vec<String> = db
            .pending_approvals()
            .unwrap()
            .into_iter()
            .map(|a| a.id)
            .collect();
        assert_eq!(pending.len(), 2, "{pending:?}");
        let bad = ApprovalRow {
            id: "ap-x".into(),
            kind: "other".into(),
            ..row
        };
        assert!(db.insert_approval(&bad).is_err(), "kinds are still checked");
    }

    #[test]
    fn a_newer_schema_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        drop(Db::open(dir.path()).unwrap());
        let conn = Connection::open(dir.path().join(FILE_NAME)).unwrap();
        conn.execute_batch("PRAGMA user_version = 99").unwrap();
        drop(conn);
        let err = Db::open(dir.path()).err().unwrap();
        assert!(err.to_string().contains("upgrade carapaced"), "{err}");
    }
}
