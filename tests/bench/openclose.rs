//! `openclose N PATH`: opens and closes PATH N times a round and prints the cost per
//! open+close in nanoseconds: the median of five rounds, or with `OPENCLOSE_ROUNDS` and
//! `OPENCLOSE_STAT=min` the fastest of that many (under QEMU's TCG, noise only ever adds
//! time, so the minimum is the steadiest figure). The kernel-overhead benchmark (`cargo xtask
//! bench`) runs it in the VM without programs, outside a session and inside one.
//!
//! With `OPENCLOSE_OPS=names`, PATH is a directory and each iteration makes a file in it
//! (`open(O_CREAT)` + close), renames it and unlinks it: the name hooks' cost (`path_mknod`,
//! `path_rename`, `path_unlink`, each spelling the path), per create+rename+unlink.
//!
//! With `OPENCLOSE_OPS=connect`, PATH is `ADDRESS:PORT` (IPv4) and each iteration makes a UDP
//! socket, connects it there and closes it: the network hooks' cost (`socket_connect` and the
//! `connect4` program, each looking the address up among the session's learned ones), per
//! socket+connect+close. `OPENCLOSE_LEARN=N` first looks up `b0.bench.test` …
//! `b{N-1}.bench.test` (through the system's resolver, in a session its resolver), so the
//! session has N learned addresses when the loop runs. `OPENCLOSE_SETTLE=S` waits S
//! seconds before measuring (after the lookups, if any): under QEMU's `-icount` every guest
//! instruction counts, and the daemon is still at work on the session's start (its
//! resolver, its proxy) and on the last lookups (answers, ledger) when the loop would run.

use std::net::{SocketAddrV4, ToSocketAddrs as _};

use std::{ffi::CString, time::Instant};

fn main() {
    let mut args = std::env::args().skip(1);
    let n: u32 = args.next().and_then(|a| a.parse().ok()).unwrap_or(100_000);
    let path = args.next().unwrap_or_else(|| "/etc/hostname".into());
    let Ok(cpath) = CString::new(path.clone()) else {
        eprintln!("openclose: path contains a NUL byte");
        std::process::exit(2);
    };
    let count: usize = std::env::var("OPENCLOSE_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .filter(|&r| r > 0)
        .unwrap_or(5);
    let min = std::env::var("OPENCLOSE_STAT").is_ok_and(|s| s == "min");
    let ops = std::env::var("OPENCLOSE_OPS").unwrap_or_default();
    let names = ops == "names";
    let connect_to = if ops == "connect" {
        match path.parse::<SocketAddrV4>() {
            Ok(to) => Some(to),
            Err(e) => {
                eprintln!("openclose: {path}: not ADDRESS:PORT: {e}");
                std::process::exit(2);
            }
        }
    } else {
        None
    };
    let learn: u32 = std::env::var("OPENCLOSE_LEARN")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    for i in 0..learn {
        if let Err(e) = format!("b{i}.bench.test:9").to_socket_addrs() {
            eprintln!("openclose: cannot look b{i}.bench.test up: {e}");
            std::process::exit(1);
        }
    }
    let settle: u64 = std::env::var("OPENCLOSE_SETTLE")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    if settle > 0 {
        std::thread::sleep(std::time::Duration::from_secs(settle));
    }
    let (Ok(made), Ok(moved)) = (
        CString::new(format!("{path}/made-{}", std::process::id())),
        CString::new(format!("{path}/moved-{}", std::process::id())),
    ) else {
        eprintln!("openclose: path contains a NUL byte");
        std::process::exit(2);
    };
    let mut rounds = Vec::new();
    for _ in 0..count {
        let start = Instant::now();
        for _ in 0..n {
            let done = if let Some(to) = connect_to {
                socket_connect_close(to)
            } else if names {
                create_rename_unlink(&made, &moved)
            } else {
                open_close(&cpath)
            };
            if let Err(e) = done {
                eprintln!("openclose: {path}: {e}");
                std::process::exit(1);
            }
        }
        rounds.push(start.elapsed().as_secs_f64() * 1e9 / f64::from(n));
    }
    rounds.sort_by(f64::total_cmp);
    let pick = if min { 0 } else { rounds.len() / 2 };
    println!("{:.1}", rounds[pick]);
}

fn check(r: libc::c_int) -> std::io::Result<libc::c_int> {
    if r < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

fn open_close(path: &CString) -> std::io::Result<()> {
    // SAFETY: a valid NUL-terminated path; the fd is closed right away.
    let fd = check(unsafe { libc::open(path.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) })?;
    // SAFETY: fd was just returned by open.
    unsafe { libc::close(fd) };
    Ok(())
}

fn create_rename_unlink(made: &CString, moved: &CString) -> std::io::Result<()> {
    // SAFETY: valid NUL-terminated paths; the fd is closed right away.
    unsafe {
        let fd = check(libc::open(
            made.as_ptr(),
            libc::O_CREAT | libc::O_WRONLY | libc::O_CLOEXEC,
            0o644,
        ))?;
        libc::close(fd);
        check(libc::rename(made.as_ptr(), moved.as_ptr()))?;
        check(libc::unlink(moved.as_ptr()))?;
    }
    Ok(())
}

fn socket_connect_close(to: SocketAddrV4) -> std::io::Result<()> {
    let addr = libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: to.port().to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from(*to.ip()).to_be(),
        },
        sin_zero: [0; 8],
    };
    // SAFETY: a socket made here and closed before returning; `addr` is a valid
    // `sockaddr_in` of the size passed.
    unsafe {
        let fd = check(libc::socket(
            libc::AF_INET,
            libc::SOCK_DGRAM | libc::SOCK_CLOEXEC,
            0,
        ))?;
        let connected = check(libc::connect(
            fd,
            (&raw const addr).cast(),
            std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
        ));
        libc::close(fd);
        connected?;
    }
    Ok(())
}
