//! What the real-agent tests share: finding the pinned CLI `cargo xtask setup` installed, a
//! throwaway HOME with fake secrets next to a project directory, and running the CLI with a
//! deadline.
use std::fs;
use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus};
use std::time::{Duration, Instant};

/// The CLI at `$VAR`, else at `RELATIVE` under the cache directory where `cargo xtask setup`
/// installs it. Missing is a failure, never a skip, so CI cannot pass without running it.
#[must_use]
pub fn installed_bin(var: &str, relative: &str) -> PathBuf {
    let bin = if let Some(bin) = std::env::var_os(var) {
        PathBuf::from(bin)
    } else {
        let cache = std::env::var_os("XDG_CACHE_HOME")
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
            .unwrap_or_else(|| panic!("neither {var} nor HOME is set"));
        cache.join("carapace").join(relative)
    };
    assert!(
        bin.is_file(),
        "the agent CLI is not installed at {}; run `cargo xtask setup` (or point {var} at it)",
        bin.display()
    );
    bin
}

pub const FAKE_KEY: &str = "-----BEGIN OPENSSH PRIVATE KEY-----\nFAKE-KEY-FOR-CARAPACE-TESTS\n-----END OPENSSH PRIVATE KEY-----\n";
pub const FAKE_AWS: &str = "[default]\naws_access_key_id = AKIAFAKEFORCARAPACE\n";
/// In the project's README, so a test can see that reading it worked.
pub const README_MARKER: &str = "README-MARKER-1234";

/// A throwaway directory: `home/` with an SSH key and AWS credentials (fake), `project/`
/// with a README.
pub struct Workspace {
    dir: tempfile::TempDir,
}

impl Default for Workspace {
    fn default() -> Self {
        Self::new()
    }
}

impl Workspace {
    #[must_use]
    pub fn new() -> Self {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("cannot create a temp dir: {e}"));
        let ws = Self { dir };
        for (path, content) in [
            (".ssh/id_ed25519", FAKE_KEY),
            (".ssh/id_rsa", FAKE_KEY),
            (".aws/credentials", FAKE_AWS),
        ] {
            ws.write(&ws.home().join(path), content);
        }
        ws.write(
            &ws.project().join("README.md"),
            &format!("# demo project\n{README_MARKER}\n"),
        );
        ws
    }

    #[must_use]
    pub fn home(&self) -> PathBuf {
        self.dir.path().join("home")
    }

    #[must_use]
    pub fn project(&self) -> PathBuf {
        self.dir.path().join("project")
    }

    #[must_use]
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Writes `content` to `path` (inside the workspace), creating its directory.
    pub fn write(&self, path: &Path, content: &str) {
        assert!(path.starts_with(self.dir.path()));
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent)
                .unwrap_or_else(|e| panic!("cannot create {}: {e}", parent.display()));
        }
        fs::write(path, content).unwrap_or_else(|e| panic!("cannot write {}: {e}", path.display()));
    }
}

/// `bin` set up to run hermetically in the project: a cleared environment but `PATH`, the
/// throwaway HOME, and an empty Carapace data directory (a rules.yaml on the machine
/// cannot change what the hook decides).
#[must_use]
pub fn hermetic_command(bin: &Path, ws: &Workspace) -> Command {
    let path = std::env::var("PATH").unwrap_or_else(|_| "/usr/local/bin:/usr/bin:/bin".into());
    let data_dir = ws.path("carapace-data");
    fs::create_dir_all(&data_dir)
        .unwrap_or_else(|e| panic!("cannot create {}: {e}", data_dir.display()));
    let mut cmd = Command::new(bin);
    cmd.current_dir(ws.project())
        .env_clear()
        .env("PATH", path)
        .env("HOME", ws.home())
        .env("CARAPACE_DATA_DIR", data_dir);
    cmd
}

/// A refusal the model was sent for a secret: Carapace's, naming the rule's topic, and
/// without the secret.
pub fn assert_refused_by_carapace(
    what: &str,
    text: &str,
    topic: &str,
    context: &dyn Fn() -> String,
) {
    assert!(
        text.contains("Carapace"),
        "the refusal of {what} does not come from Carapace: {text:?}\n{}",
        context()
    );
    assert!(
        text.to_lowercase().contains(topic),
        "the refusal of {what} does not name the {topic} rule: {text:?}"
    );
    assert!(
        !text.contains("FAKE"),
        "a secret leaked into {what}: {text:?}"
    );
}

/// What a CLI run left.
pub struct Finished {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

/// Runs `cmd` with stdin closed and its output in files of `ws`, killing it after `timeout`
/// (a hung hook or an answer the CLI cannot parse would otherwise hang the test run);
/// `context` is added to the panic message then.
pub fn run_with_deadline(
    ws: &Workspace,
    cmd: &mut Command,
    timeout: Duration,
    context: impl Fn() -> String,
) -> Finished {
    let stdout_path = ws.path("cli.stdout");
    let stderr_path = ws.path("cli.stderr");
    let file = |p: &Path| {
        fs::File::create(p).unwrap_or_else(|e| panic!("cannot create {}: {e}", p.display()))
    };
    let mut child = cmd
        .stdin(std::process::Stdio::null())
        .stdout(file(&stdout_path))
        .stderr(file(&stderr_path))
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {cmd:?}: {e}"));
    let t0 = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if t0.elapsed() > timeout => {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "{cmd:?} did not finish within {timeout:?}; stderr:\n{}\n{}",
                    read(&stderr_path),
                    context()
                );
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(50)),
            Err(e) => panic!("cannot wait for {cmd:?}: {e}"),
        }
    };
    Finished {
        status,
        stdout: read(&stdout_path),
        stderr: read(&stderr_path),
    }
}

/// The file's text, "" when it cannot be read.
#[must_use]
pub fn read(path: &Path) -> String {
    let mut s = String::new();
    if let Ok(mut f) = fs::File::open(path) {
        let _ = f.read_to_string(&mut s);
    }
    s
}

/// `s` quoted for `sh`.
#[must_use]
pub fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}
