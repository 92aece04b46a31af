//! Session limits that `carapace run` applies itself: a wall-clock timeout (every process of
//! the session cgroup is killed when it expires) and network isolation (a new, empty network
//! namespace, with or without loopback). Memory and process-count limits need cgroup
//! controllers written by the daemon and are not here yet.
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

impl std::str::FromStr for Network {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "host" => Ok(Self::Host),
            "none" => Ok(Self::None),
            "loopback" => Ok(Self::Loopback),
            other => Err(format!(
                "unknown network mode `{other}`; use none, loopback or host"
            )),
        }
    }
}

/// Parses a duration: a number with an optional unit `s`, `m`, `h` (seconds by default),
/// e.g. `90`, `30s`, `5m`, `1h`.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    let (number, unit) = match t.char_indices().find(|(_, c)| !c.is_ascii_digit()) {
        Some((i, _)) => t.split_at(i),
        None => (t, "s"),
    };
    let n: u64 = number
        .parse()
        .map_err(|_| format!("`{text}` is not a duration; write e.g. 90, 30s, 5m or 1h"))?;
    let scale = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        _ => {
            return Err(format!(
                "`{text}` has an unknown unit; use s, m or h (e.g. 30s, 5m, 1h)"
            ))
        }
    };
    let secs = n
        .checked_mul(scale)
        .ok_or_else(|| format!("`{text}` is too long"))?;
    if secs == 0 {
        return Err(
            "a timeout of 0 would kill the command at once; give a positive duration".into(),
        );
    }
    Ok(Duration::from_secs(secs))
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
    }
}
