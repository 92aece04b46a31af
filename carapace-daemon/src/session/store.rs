//! Session storage: `$DATA_DIR/sessions.json`, written atomically (temporary file, fsync,
//! rename, fsync of the directory) so that a crash leaves either the old or the new file.
use std::fs::{self, File};
use std::io::{self, Write as _};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::io_error::IoError;

/// File name of the session store inside the data directory.
pub const FILE_NAME: &str = "sessions.json";

/// What the daemon remembers about a session across restarts.
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
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct StoreFile {
    version: u32,
    sessions: Vec<SessionRecord>,
}

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    #[error(transparent)]
    Io(#[from] IoError),
    #[error("{path} is not a valid session store: {source}")]
    Format {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
}

/// Reads the store; a missing file is an empty store.
pub fn load(path: &Path) -> Result<Vec<SessionRecord>, StoreError> {
    let text = match fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => return Err(IoError::new("read", path, source).into()),
    };
    let file: StoreFile = serde_json::from_str(&text).map_err(|source| StoreError::Format {
        path: path.into(),
        source,
    })?;
    Ok(file.sessions)
}

/// Replaces the store with `sessions`, atomically.
pub fn save(path: &Path, sessions: &[SessionRecord]) -> Result<(), StoreError> {
    let file = StoreFile {
        version: 1,
        sessions: sessions.to_vec(),
    };
    let mut text = serde_json::to_vec_pretty(&file).map_err(|source| StoreError::Format {
        path: path.into(),
        source,
    })?;
    text.push(b'\n');
    write_atomic(path, &text)
}

fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), StoreError> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    let mut f = File::create(&tmp).map_err(IoError::at("create", &tmp))?;
    f.write_all(bytes).map_err(IoError::at("write", &tmp))?;
    f.sync_all().map_err(IoError::at("fsync", &tmp))?;
    drop(f);
    fs::rename(&tmp, path).map_err(IoError::at("rename into place", path))?;
    if let Some(dir) = path.parent() {
        File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(IoError::at("fsync", dir))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(id: &str, number: u32) -> SessionRecord {
        SessionRecord {
            id: id.into(),
            number,
            owner_uid: 1000,
            leader_pid: 42,
            leader_origin: "/user.slice".into(),
            cgroup: format!("/sys/fs/cgroup/carapace/{id}").into(),
            cgroup_id: 1234,
            command: vec!["sh".into(), "-c".into(), "true".into()],
            created: 1_700_000_000,
        }
    }

    #[test]
    fn round_trip_and_missing_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(FILE_NAME);
        assert_eq!(load(&path).unwrap(), Vec::new());
        let sessions = vec![record("s-1", 1), record("s-2", 2)];
        save(&path, &sessions).unwrap();
        assert_eq!(load(&path).unwrap(), sessions);
        save(&path, &sessions[1..]).unwrap();
        assert_eq!(load(&path).unwrap(), sessions[1..].to_vec());
        assert!(!dir.path().join("sessions.json.tmp").exists());
    }

    #[test]
    fn corrupt_file_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(FILE_NAME);
        fs::write(&path, "{not json").unwrap();
        assert!(matches!(load(&path), Err(StoreError::Format { .. })));
    }
}
