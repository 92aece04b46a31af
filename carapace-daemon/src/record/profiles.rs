//! How a proposal is saved as a named profile (`$CARAPACE_DATA_DIR/profiles/NAME.yaml`,
//! where `carapace run --profile NAME` reads it: `crate::profiles` says where and which
//! names are allowed).

use std::fs::{self, OpenOptions};
use std::io::Write as _;
use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};

use crate::profiles::dir;

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProfileError {
    #[error(transparent)]
    BadName(crate::profiles::ProfileError),
    #[error("profile {0} exists; add --force to replace it")]
    Exists(PathBuf),
    #[error("cannot write profile {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// The file of profile `name`, if `name` is one (named as `carapace run --profile` reads it).
pub fn path(data_dir: &Path, name: &str) -> Result<PathBuf, ProfileError> {
    crate::profiles::check_name(name).map_err(ProfileError::BadName)?;
    Ok(dir(data_dir).join(format!("{name}.yaml")))
}

/// Writes `text` as profile `name`; an existing profile is replaced only with `force` (in
/// one rename, so a reader sees the old file or the new one).
pub fn write(
    data_dir: &Path,
    name: &str,
    text: &str,
    force: bool,
) -> Result<PathBuf, ProfileError> {
    let file = path(data_dir, name)?;
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| ProfileError::Io { path, source }
    };
    let profiles = dir(data_dir);
    match fs::DirBuilder::new().mode(0o755).create(&profiles) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(io(&profiles)(e)),
    }
    if !force {
        let mut f = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o644)
            .open(&file)
            .map_err(|e| {
                if e.kind() == std::io::ErrorKind::AlreadyExists {
                    ProfileError::Exists(file.clone())
                } else {
                    io(&file)(e)
                }
            })?;
        f.write_all(text.as_bytes()).map_err(io(&file))?;
        f.sync_all().map_err(io(&file))?;
        return Ok(file);
    }
    let tmp = profiles.join(format!(".{name}.yaml.tmp"));
    let written = (|| {
        let mut f = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o644)
            .open(&tmp)?;
        f.write_all(text.as_bytes())?;
        f.sync_all()?;
        fs::rename(&tmp, &file)
    })();
    if let Err(e) = written {
        let _ = fs::remove_file(&tmp);
        return Err(io(&file)(e));
    }
    Ok(file)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn never_overwrites_without_force() {
        let d = tempfile::tempdir().unwrap();
        let p = write(d.path(), "web-agent", "version: 1\n", false).unwrap();
        assert_eq!(p, d.path().join("profiles/web-agent.yaml"));
        assert!(matches!(
            write(d.path(), "web-agent", "version: 1\n# new\n", false),
            Err(ProfileError::Exists(_))
        ));
        assert_eq!(fs::read_to_string(&p).unwrap(), "version: 1\n");
        write(d.path(), "web-agent", "version: 1\n# new\n", true).unwrap();
        assert_eq!(fs::read_to_string(&p).unwrap(), "version: 1\n# new\n");
    }

    #[test]
    fn a_name_cannot_leave_the_directory() {
        let d = tempfile::tempdir().unwrap();
        for bad in ["../rules", "a/b", "", "-x", ".hidden"] {
            assert!(
                matches!(path(d.path(), bad), Err(ProfileError::BadName(_))),
                "{bad}"
            );
        }
    }
}
