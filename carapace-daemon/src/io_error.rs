//! An I/O failure that says what was being done to which path — the one shape every module
//! that touches files reports them in.
use std::io;
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
#[error("cannot {action} {}: {source}", path.display())]
pub struct IoError {
    pub action: &'static str,
    pub path: PathBuf,
    #[source]
    pub source: io::Error,
}

impl IoError {
    #[must_use]
    pub fn new(action: &'static str, path: impl Into<PathBuf>, source: io::Error) -> Self {
        Self {
            action,
            path: path.into(),
            source,
        }
    }

    /// For `map_err`: `fs::read(p).map_err(IoError::at("read", p))?`.
    pub fn at<'a>(action: &'static str, path: &'a Path) -> impl FnOnce(io::Error) -> Self + 'a {
        move |source| Self::new(action, path, source)
    }
}
