//! `openclose N PATH`: opens and closes PATH N times a round and prints the cost per
//! open+close in nanoseconds: the median of five rounds, or with `OPENCLOSE_ROUNDS` and
//! `OPENCLOSE_STAT=min` the fastest of that many (under QEMU's TCG, noise only ever adds
//! time, so the minimum is the steadiest figure). The kernel-overhead benchmark (`cargo xtask
//! bench`) runs it in the VM without programs, outside a session and inside one.

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
    let mut rounds = Vec::new();
    for _ in 0..count {
        let start = Instant::now();
        for _ in 0..n {
            // SAFETY: a valid NUL-terminated path; the fd is closed right away.
            let fd = unsafe { libc::open(cpath.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
            if fd < 0 {
                eprintln!(
                    "openclose: open {path}: {}",
                    std::io::Error::last_os_error()
                );
                std::process::exit(1);
            }
            // SAFETY: fd was just returned by open.
            unsafe { libc::close(fd) };
        }
        rounds.push(start.elapsed().as_secs_f64() * 1e9 / f64::from(n));
    }
    rounds.sort_by(f64::total_cmp);
    let pick = if min { 0 } else { rounds.len() / 2 };
    println!("{:.1}", rounds[pick]);
}
