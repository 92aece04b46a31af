//! Session limits that `carapace run` applies itself: a wall-clock timeout (every process of
//! the session cgroup is killed when it expires) and network isolation (a new, empty network
//! namespace, with or without loopback). `--memory` and `--pids` are only parsed here: the
//! daemon writes them into the session cgroup's controllers (see `session::resources`).
use std::io;
use std::path::Path;
use std::time::{Duration, Instant};

/// `--network`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Network {
    /// The host's network (no isolation).
    Host,
    /// A new network namespace with no interface up: no connection leaves the session.
    None,
    /// A new network namespace with only `lo` up: local servers the command starts work.
    Loopback,
}

/// A `--timeout`, `--memory`, `--pids` or `--network` value that does not parse; the text
/// is what `carapace run` prints.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BadLimit {
    #[error("unknown network mode `{0}`; use none, loopback or host")]
    NetworkMode(String),
    #[error("`{0}` is not a duration; write e.g. 90, 30s, 5m or 1h")]
    NotADuration(String),
    #[error("`{0}` has an unknown unit; use s, m or h (e.g. 30s, 5m, 1h)")]
    DurationUnit(String),
    #[error("`{0}` is too long")]
    TooLong(String),
    #[error("a timeout of 0 would kill the command at once; give a positive duration")]
    ZeroTimeout,
    #[error("`{0}` is not a size; write e.g. 512M, 2G or 1048576")]
    NotASize(String),
    #[error("`{0}` has an unknown unit; use K, M, G or T (e.g. 512M, 2G)")]
    SizeUnit(String),
    #[error("`{0}` is too large")]
    TooLarge(String),
    #[error("a memory limit of `{0}` is below one page (4K); the command could not even start")]
    BelowOnePage(String),
    #[error("a pids limit of 0 would refuse the command itself; give at least 1")]
    ZeroPids,
    #[error("`{0}` is not a process count; write a whole number, e.g. 200")]
    NotACount(String),
}

impl std::str::FromStr for Network {
    type Err = BadLimit;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "host" => Ok(Self::Host),
            "none" => Ok(Self::None),
            "loopback" => Ok(Self::Loopback),
            other => Err(BadLimit::NetworkMode(other.to_owned())),
        }
    }
}

/// Parses a duration: a number with an optional unit `s`, `m`, `h` (seconds by default),
/// e.g. `90`, `30s`, `5m`, `1h`.
pub fn parse_duration(text: &str) -> Result<Duration, BadLimit> {
    let t = text.trim();
    let (number, unit) = match t.char_indices().find(|(_, c)| !c.is_ascii_digit()) {
        Some((i, _)) => t.split_at(i),
        None => (t, "s"),
    };
    let n: u64 = number
        .parse()
        .map_err(|_| BadLimit::NotADuration(text.to_owned()))?;
    let scale = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        _ => return Err(BadLimit::DurationUnit(text.to_owned())),
    };
    let secs = n
        .checked_mul(scale)
        .ok_or_else(|| BadLimit::TooLong(text.to_owned()))?;
    if secs == 0 {
        return Err(BadLimit::ZeroTimeout);
    }
    Ok(Duration::from_secs(secs))
}

/// Parses a memory size: a whole number of bytes with an optional binary unit `K`, `M`, `G`,
/// `T` (also written `KiB`, `MB`, `m`, …; all mean powers of 1024), e.g. `512M`, `2G`,
/// `1048576`. At least one page (4 KiB): the kernel rounds smaller limits to nothing useful.
pub fn parse_size(text: &str) -> Result<u64, BadLimit> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let n: u64 = number
        .parse()
        .map_err(|_| BadLimit::NotASize(text.to_owned()))?;
    let shift = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        "t" | "tb" | "tib" => 40,
        _ => return Err(BadLimit::SizeUnit(text.to_owned())),
    };
    let bytes = n
        .checked_mul(1 << shift)
        .ok_or_else(|| BadLimit::TooLarge(text.to_owned()))?;
    if bytes < MIN_MEMORY {
        return Err(BadLimit::BelowOnePage(text.to_owned()));
    }
    Ok(bytes)
}

/// Smallest `--memory` accepted.
const MIN_MEMORY: u64 = 4096;

/// Parses `--pids`: how many processes and threads the session may have at once (at least 1).
pub fn parse_pids(text: &str) -> Result<u64, BadLimit> {
    match text.trim().parse::<u64>() {
        Ok(0) => Err(BadLimit::ZeroPids),
        Ok(n) => Ok(n),
        Err(_) => Err(BadLimit::NotACount(text.to_owned())),
    }
}

/// A byte count for people: `512 MiB`, `1.5 GiB`, `4096 bytes`.
#[must_use]
pub fn format_size(bytes: u64) -> String {
    const UNITS: [(u32, &str); 4] = [(40, "TiB"), (30, "GiB"), (20, "MiB"), (10, "KiB")];
    for (shift, unit) in UNITS {
        let size = 1u64 << shift;
        if bytes >= size {
            return if bytes.is_multiple_of(size) {
                format!("{} {unit}", bytes >> shift)
            } else {
                #[expect(clippy::cast_precision_loss, reason = "one decimal is shown")]
                let value = bytes as f64 / size as f64;
                format!("{value:.1} {unit}")
            };
        }
    }
    format!("{bytes} bytes")
}

/// Moves the calling process into an IPC namespace of its own: the System V shared memory,
/// semaphores and message queues and the POSIX message queues of processes outside the
/// session are out of its sight (the kernel layer refuses the host's `/dev/mqueue`, which
/// still shows the host's queues). For `pre_exec` before capabilities are dropped; a
/// `carapace run` not started by root cannot, and keeps the host's.
pub fn isolate_ipc() -> io::Result<()> {
    // SAFETY: plain system call with a constant flag.
    if unsafe { libc::unshare(libc::CLONE_NEWIPC) } == 0 {
        return Ok(());
    }
    let err = io::Error::last_os_error();
    // SAFETY: geteuid has no arguments and cannot fail.
    let root = unsafe { libc::geteuid() } == 0;
    if !root && err.raw_os_error() == Some(libc::EPERM) {
        return Ok(());
    }
    Err(err)
}

/// Gives the calling process a new, empty session keyring (`KEYCTL_JOIN_SESSION_KEYRING`
/// with no name): the agent starts with no key of the user's login session in reach, and
/// the kernel layer refuses it every key its session did not make (the user keyring's
/// included). For `pre_exec`; it only makes a system call.
pub fn own_keyring() -> io::Result<()> {
    const KEYCTL_JOIN_SESSION_KEYRING: libc::c_long = 1;
    // SAFETY: keyctl with a null name pointer, which asks for an anonymous keyring.
    let serial = unsafe {
        libc::syscall(
            libc::SYS_keyctl,
            KEYCTL_JOIN_SESSION_KEYRING,
            std::ptr::null::<libc::c_char>(),
        )
    };
    if serial < 0 {
        let err = io::Error::last_os_error();
        // A kernel built without keys has nothing to keep apart.
        if err.raw_os_error() == Some(libc::ENOSYS) {
            return Ok(());
        }
        return Err(err);
    }
    Ok(())
}

/// Moves the calling process into a new network namespace and, for `Loopback`, brings `lo`
/// up. Meant for `pre_exec` before capabilities are dropped (it needs `CAP_SYS_ADMIN`); it
/// only makes system calls and does not allocate.
pub fn isolate_network(mode: Network) -> io::Result<()> {
    if mode == Network::Host {
        return Ok(());
    }
    // SAFETY: plain system call with a constant flag.
    if unsafe { libc::unshare(libc::CLONE_NEWNET) } != 0 {
        return Err(io::Error::last_os_error());
    }
    if mode == Network::Loopback {
        loopback_up()?;
    }
    Ok(())
}

fn loopback_up() -> io::Result<()> {
    // SAFETY: plain system call with constant arguments.
    let sock = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if sock < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: an all-zero ifreq is a valid value of this plain C struct.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, src) in req.ifr_name.iter_mut().zip(b"lo\0") {
        *dst = *src as libc::c_char;
    }
    // SAFETY: `req` is a valid ifreq naming `lo`; the ioctls read and write only it.
    let result = unsafe {
        if libc::ioctl(sock, libc::SIOCGIFFLAGS, std::ptr::from_mut(&mut req)) != 0 {
            Err(io::Error::last_os_error())
        } else {
            req.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short;
            if libc::ioctl(sock, libc::SIOCSIFFLAGS, std::ptr::from_mut(&mut req)) != 0 {
                Err(io::Error::last_os_error())
            } else {
                Ok(())
            }
        }
    };
    // SAFETY: closing the socket opened above.
    unsafe {
        libc::close(sock);
    }
    result
}

/// Kills every process of the cgroup directory `dir` except `keep` (the `carapace run` that
/// lives in it), until none is left or `wait` is over; returns how many were signalled.
pub fn kill_cgroup_except(dir: &Path, keep: u32, wait: Duration) -> io::Result<usize> {
    let procs = dir.join("cgroup.procs");
    let deadline = Instant::now() + wait;
    let mut killed = 0;
    loop {
        let pids: Vec<i32> = std::fs::read_to_string(&procs)?
            .lines()
            .filter_map(|l| l.trim().parse::<u32>().ok())
            .filter(|p| *p != keep)
            .filter_map(|p| i32::try_from(p).ok())
            .collect();
        if pids.is_empty() || Instant::now() >= deadline {
            return Ok(killed);
        }
        for pid in pids {
            // SAFETY: kill(2) with a pid read from the session's own cgroup.
            if unsafe { libc::kill(pid, libc::SIGKILL) } == 0 {
                killed += 1;
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("90"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("5m").map(|d| d.as_secs()), Ok(300));
        assert_eq!(parse_duration("1h").map(|d| d.as_secs()), Ok(3600));
        for bad in ["", "0", "s", "5x", "-1", "1.5m", "99999999999999999999h"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("512M"), Ok(512 << 20));
        assert_eq!(parse_size("64m"), Ok(64 << 20));
        assert_eq!(parse_size("2G"), Ok(2 << 30));
        assert_eq!(parse_size("2GiB"), Ok(2 << 30));
        assert_eq!(parse_size("100k"), Ok(100 << 10));
        assert_eq!(parse_size("1048576"), Ok(1 << 20));
        assert_eq!(parse_size("1T"), Ok(1 << 40));
        for bad in [
            "",
            "M",
            "0",
            "100",
            "1.5G",
            "-1M",
            "12Q",
            "99999999999T",
            "5 M B",
        ] {
            assert!(parse_size(bad).is_err(), "{bad}");
        }
        assert_eq!(format_size(512 << 20), "512 MiB");
        assert_eq!(format_size(3 << 29), "1.5 GiB");
        assert_eq!(format_size(100), "100 bytes");
    }

    #[test]
    fn pids() {
        assert_eq!(parse_pids("200"), Ok(200));
        for bad in ["0", "", "-3", "2k", "1e3"] {
            assert!(parse_pids(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn network_modes() {
        assert_eq!("none".parse(), Ok(Network::None));
        assert_eq!("loopback".parse(), Ok(Network::Loopback));
        assert!("bridge".parse::<Network>().is_err());
    }

    proptest::proptest! {
        #[test]
        fn durations_never_panic(text in "\\PC{0,24}") {
            let _ = parse_duration(&text);
        }

        #[test]
        fn sizes_never_panic(text in "\\PC{0,24}") {
            let _ = parse_size(&text);
            let _ = parse_pids(&text);
        }

        #[test]
        fn sizes_round_trip(n in 1u64..1 << 20, unit in 0usize..4) {
            let (suffix, shift) = [("K", 10), ("M", 20), ("G", 30), ("T", 40)][unit];
            let bytes = parse_size(&format!("{n}{suffix}")).map_err(|e| proptest::test_runner::TestCaseError::fail(e.to_string()))?;
            proptest::prop_assert_eq!(bytes, n << shift);
            proptest::prop_assert!(!format_size(bytes).is_empty());
        }
    }
}
