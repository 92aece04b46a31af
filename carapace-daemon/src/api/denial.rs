//! Turns a kernel [`DenyEvent`] into the [`Denial`] message users and agents read: the
//! operation by name, the subject as a path or `address:port`, the rule's id and message.
use std::net::Ipv6Addr;

use carapace_common::{
    mount_kind, op, path_op, subject, DenyEvent, AF_INET, PATH_MAX, RULE_DATAGRAM_BY_NAME,
    RULE_PATH_TOO_LONG, RULE_SELF_PROTECTION, TIOCSTI,
};

use super::proto::Denial;

/// Rule id reported when the kernel denied a path too long to match.
pub const PATH_TOO_LONG_ID: &str = "path-too-long";
/// Rule id reported for the kernel's self-protection guards, which no rule file switches off.
pub const SELF_PROTECTION_ID: &str = "self-protection";
/// Rule id reported for a datagram (QUIC) to an address the session checks by server name.
pub const DATAGRAM_BY_NAME_ID: &str = "server-name-datagram";

/// Name of one `op::*` bit.
#[must_use]
pub fn operation_name(bit: u32) -> String {
    match bit {
        op::READ => "read".into(),
        op::WRITE => "write".into(),
        op::EXEC => "execute".into(),
        op::DELETE => "delete".into(),
        op::NETWORK => "network".into(),
        op::SIGNAL => "kill".into(),
        op::PTRACE => "ptrace".into(),
        op::BPF | op::KEY => "use".into(),
        op::MOUNT => "mount".into(),
        op::UNMOUNT => "unmount".into(),
        op::MODULE => "load".into(),
        op::CLONE_INTO_CGROUP => "clone".into(),
        op::CHROOT => "chroot".into(),
        op::TTY_INPUT => "typing into".into(),
        op::OUTSIDE => "connect".into(),
        op::ROUTE => "source routing".into(),
        op::USERNS => "creation".into(),
        op::TASK_CONTROL => "limits or priority change".into(),
        other => format!("operation {other:#x}"),
    }
}

/// The file operation a path event names (`DenyEvent::detail`), where it is not an open:
/// which rule operation it hit matters less to the reader than what was tried.
fn path_operation(detail: u32) -> Option<&'static str> {
    Some(match detail {
        path_op::UNLINK | path_op::RMDIR => "delete",
        path_op::CREATE | path_op::MKDIR => "create",
        path_op::SYMLINK => "symlink onto",
        path_op::LINK_FROM => "hard link",
        path_op::LINK_ONTO => "hard link onto",
        path_op::RENAME_FROM => "rename",
        path_op::RENAME_ONTO => "rename onto",
        path_op::TRUNCATE => "truncate",
        path_op::CHMOD => "chmod",
        path_op::CHOWN => "chown",
        path_op::CHROOT => "chroot into",
        path_op::UTIMES => "times change",
        path_op::XATTR => "attribute change",
        path_op::INODE_FLAGS => "inode flags change",
        path_op::XATTR_READ => "attribute read",
        _ => return None,
    })
}

/// The operation of `event` by name.
fn event_operation(event: &DenyEvent) -> String {
    match event.subject {
        subject::PATH => {
            path_operation(event.detail).map_or_else(|| operation_name(event.op), str::to_owned)
        }
        _ => operation_name(event.op),
    }
}

/// "read of /x", "rename onto /x": an operation and its subject as a denial line says them.
#[must_use]
pub fn phrase(operation: &str, subject: &str) -> String {
    if operation.ends_with(" onto") || operation.ends_with(" into") {
        format!("{operation} {subject}")
    } else {
        format!("{operation} of {subject}")
    }
}

/// The bytes of a NUL-terminated buffer up to the first NUL.
fn until_nul(bytes: &[u8]) -> &[u8] {
    bytes
        .iter()
        .position(|b| *b == 0)
        .map_or(bytes, |n| &bytes[..n])
}

/// `1.2.3.4:443` for IPv4 and IPv4-mapped addresses, `[::1]:22` for IPv6.
#[must_use]
pub fn format_inet(family: u16, addr: [u8; 16], port: u16) -> String {
    let v6 = Ipv6Addr::from(addr);
    match v6.to_ipv4_mapped() {
        Some(v4) => format!("{v4}:{port}"),
        None if family == AF_INET => {
            // An IPv4 event that was not stored mapped: the address is in the first 4 bytes.
            let v4 = std::net::Ipv4Addr::new(addr[0], addr[1], addr[2], addr[3]);
            format!("{v4}:{port}")
        }
        None => format!("[{v6}]:{port}"),
    }
}

/// The address a network event names (IPv4-mapped as IPv4), to find the host name a
/// session's resolver handed it out for.
#[must_use]
pub fn inet_addr(event: &DenyEvent) -> Option<std::net::IpAddr> {
    use std::net::{IpAddr, Ipv4Addr};
    if event.subject != subject::INET {
        return None;
    }
    let v6 = Ipv6Addr::from(event.addr);
    Some(match v6.to_ipv4_mapped() {
        Some(v4) => IpAddr::V4(v4),
        None if event.family == AF_INET => {
            let [a, b, c, d, ..] = event.addr;
            IpAddr::V4(Ipv4Addr::new(a, b, c, d))
        }
        None => IpAddr::V6(v6),
    })
}

/// The event's subject as text.
#[must_use]
pub fn format_subject(event: &DenyEvent) -> String {
    match event.subject {
        subject::INET => format_inet(event.family, event.addr, event.port),
        subject::UNIX => {
            // An abstract socket name starts with a NUL; show it as `@name`, as ss(8) does.
            match event.path.split_first() {
                Some((0, rest)) => format!("@{}", String::from_utf8_lossy(until_nul(rest))),
                _ => String::from_utf8_lossy(until_nul(&event.path)).into_owned(),
            }
        }
        subject::TASK => format!("carapaced (pid {})", event.detail),
        subject::PROCESS => format!("process {} outside the session", event.detail),
        subject::SOCKOPT => format!("a socket ({})", socket_option(event.detail)),
        subject::KEY => format!(
            "kernel key {} outside the session",
            event.detail.cast_signed()
        ),
        subject::TTY => match event.detail {
            TIOCSTI => "a terminal (TIOCSTI)".to_owned(),
            _ => "a terminal (TIOCLINUX)".to_owned(),
        },
        subject::BPF_CMD => format!("bpf({})", bpf_command(event.detail)),
        subject::MOUNT => match event.detail {
            mount_kind::UNMOUNT => "a mounted file system".to_owned(),
            mount_kind::MOVE_MOUNT => "a mount tree (move_mount)".to_owned(),
            mount_kind::PIVOT_ROOT => "a new root file system (pivot_root)".to_owned(),
            _ => match until_nul(&event.path) {
                [] => "a file system".to_owned(),
                source => String::from_utf8_lossy(source).into_owned(),
            },
        },
        subject::NONE => match event.op {
            op::MODULE => "a kernel module".to_owned(),
            op::CLONE_INTO_CGROUP => "a process into another cgroup (CLONE_INTO_CGROUP)".to_owned(),
            op::USERNS => "a user namespace".to_owned(),
            _ => "a protected object".to_owned(),
        },
        _ => String::from_utf8_lossy(until_nul(&event.path)).into_owned(),
    }
}

/// The name of a route-setting option (`route_opt`), `level << 16 | name`.
fn socket_option(detail: u32) -> String {
    use carapace_common::route_opt as r;
    let (level, name) = (detail >> 16, detail & 0xffff);
    match (level, name) {
        (r::SOL_IP, r::IP_OPTIONS) => "IP_OPTIONS".into(),
        (r::SOL_IP, r::IP_RETOPTS) => "IP_RETOPTS".into(),
        (r::SOL_IPV6, r::IPV6_RTHDR) => "IPV6_RTHDR".into(),
        (r::SOL_IPV6, r::IPV6_2292RTHDR) => "IPV6_2292RTHDR".into(),
        (r::SOL_IPV6, r::IPV6_2292PKTOPTIONS) => "IPV6_2292PKTOPTIONS".into(),
        _ if detail == u32::MAX => "ancillary data too long to read".into(),
        _ => format!("option {level}/{name}"),
    }
}

/// The name of a `bpf()` command (include/uapi/linux/bpf.h), or its number.
fn bpf_command(cmd: u32) -> String {
    const NAMES: [&str; 37] = [
        "BPF_MAP_CREATE",
        "BPF_MAP_LOOKUP_ELEM",
        "BPF_MAP_UPDATE_ELEM",
        "BPF_MAP_DELETE_ELEM",
        "BPF_MAP_GET_NEXT_KEY",
        "BPF_PROG_LOAD",
        "BPF_OBJ_PIN",
        "BPF_OBJ_GET",
        "BPF_PROG_ATTACH",
        "BPF_PROG_DETACH",
        "BPF_PROG_TEST_RUN",
        "BPF_PROG_GET_NEXT_ID",
        "BPF_MAP_GET_NEXT_ID",
        "BPF_PROG_GET_FD_BY_ID",
        "BPF_MAP_GET_FD_BY_ID",
        "BPF_OBJ_GET_INFO_BY_FD",
        "BPF_PROG_QUERY",
        "BPF_RAW_TRACEPOINT_OPEN",
        "BPF_BTF_LOAD",
        "BPF_BTF_GET_FD_BY_ID",
        "BPF_TASK_FD_QUERY",
        "BPF_MAP_LOOKUP_AND_DELETE_ELEM",
        "BPF_MAP_FREEZE",
        "BPF_BTF_GET_NEXT_ID",
        "BPF_MAP_LOOKUP_BATCH",
        "BPF_MAP_LOOKUP_AND_DELETE_BATCH",
        "BPF_MAP_UPDATE_BATCH",
        "BPF_MAP_DELETE_BATCH",
        "BPF_LINK_CREATE",
        "BPF_LINK_UPDATE",
        "BPF_LINK_GET_FD_BY_ID",
        "BPF_LINK_GET_NEXT_ID",
        "BPF_ENABLE_STATS",
        "BPF_ITER_CREATE",
        "BPF_LINK_DETACH",
        "BPF_PROG_BIND_MAP",
        "BPF_TOKEN_CREATE",
    ];
    NAMES
        .get(cmd as usize)
        .map_or_else(|| format!("command {cmd}"), |n| (*n).to_owned())
}

/// The message of a self-protection denial, by what was refused.
fn self_protection_message(event: &DenyEvent) -> &'static str {
    if event.subject == subject::PATH {
        match event.detail {
            path_op::OUTSIDE_PROCESS => {
                return "agents may not read or change the files of processes outside their \
                        session in /proc (command lines, limits, OOM scores): those processes \
                        are the user's";
            }
            path_op::OUTSIDE_TERMINAL => {
                return "agents may not open a terminal outside their session (the user's \
                        shell, a console): they could read what the user types or fake \
                        prompts on it";
            }
            path_op::OUTSIDE_IPC => {
                return "agents may not use message queues outside their session's own IPC \
                        namespace: the processes reading them are the user's";
            }
            _ => {}
        }
    }
    match event.op {
        op::SIGNAL if event.subject == subject::TASK => "agents may not signal the Carapace daemon",
        op::SIGNAL => {
            "agents may not signal processes outside their session (the user's shell, editor \
             or servers)"
        }
        op::KEY => {
            "agents may use only the kernel keys their session made: the user keyring holds \
             the user's own tokens and passwords"
        }
        op::TASK_CONTROL => {
            "agents may not change the resource limits, priority or scheduling of processes \
             outside their session (the user's, or Carapace)"
        }
        op::PTRACE => {
            "agents may not trace, read the memory of, or take the descriptors of processes \
             outside their session (the user's shell, editor or Carapace): those act with the \
             user's authority"
        }
        op::ROUTE => {
            "agents may not route packets by hand (IPv4 source routes, IPv6 routing headers) \
             while network rules are in force: the rules judge the address a packet is sent to"
        }
        op::TTY_INPUT => {
            "agents may not type into a terminal (TIOCSTI, TIOCLINUX): the shell reading it would \
             run the input as the user's own"
        }
        op::BPF => "agents may not use bpf(); it could switch Carapace's kernel layer off",
        op::MOUNT | op::UNMOUNT => {
            "agents may not mount or unmount file systems; they could hide or uncover protected files"
        }
        op::MODULE => "agents may not load kernel modules",
        op::CHROOT => {
            "agents may not change their root directory; paths seen from a private root would \
             slip past the rules"
        }
        _ => "agents may not move processes out of their Carapace session's cgroup",
    }
}

/// Builds the denial message of `event`.
///
/// `rule` is the (id, message) of the rule with the event's kernel index
/// (`RuleSet::by_kernel_index`), if known.
#[must_use]
pub fn denial_from_event(
    event: &DenyEvent,
    session_id: &str,
    rule: Option<(&str, &str)>,
) -> Denial {
    let (rule_id, message) = if event.rule == RULE_PATH_TOO_LONG {
        (
            PATH_TOO_LONG_ID.to_owned(),
            format!(
                "the path is longer than the {} bytes the kernel layer can match, so it is \
                 denied for operations that a path rule covers; use a shorter path",
                PATH_MAX - 1
            ),
        )
    } else if event.rule == RULE_SELF_PROTECTION {
        (
            SELF_PROTECTION_ID.to_owned(),
            self_protection_message(event).to_owned(),
        )
    } else if event.rule == RULE_DATAGRAM_BY_NAME {
        (
            DATAGRAM_BY_NAME_ID.to_owned(),
            "this session's rules check the server name of connections to this address, which \
             only TCP shows; UDP (QUIC) to it is refused, so clients fall back to TCP"
                .to_owned(),
        )
    } else if let Some((id, message)) = rule {
        (id.to_owned(), message.to_owned())
    } else {
        (
            format!("kernel-rule-{}", event.rule),
            "denied by a kernel rule this daemon no longer knows (rules were reloaded)".to_owned(),
        )
    };
    Denial {
        session_id: session_id.to_owned(),
        pid: event.tgid,
        comm: String::from_utf8_lossy(until_nul(&event.comm)).into_owned(),
        operation: event_operation(event),
        subject: format_subject(event),
        rule_id,
        message,
        would_deny: false,
        layer: "kernel".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use carapace_common::{AF_INET6, AF_UNIX};

    use super::*;

    fn event() -> DenyEvent {
        DenyEvent {
            session_cgroup: 99,
            session: 3,
            pid: 1001,
            tgid: 1000,
            rule: 7,
            op: op::READ,
            subject: subject::PATH,
            port: 0,
            family: 0,
            detail: 0,
            addr: [0; 16],
            comm: [0; 16],
            path: [0; PATH_MAX],
        }
    }

    fn with_path(mut e: DenyEvent, path: &[u8]) -> DenyEvent {
        e.path[..path.len()].copy_from_slice(path);
        e
    }

    const RULE: Option<(&str, &str)> = Some(("protect-ssh-keys", "SSH keys are off limits"));

    #[test]
    fn a_refused_datagram_says_why_without_a_rule_of_the_file() {
        let mut e = event();
        e.rule = RULE_DATAGRAM_BY_NAME;
        e.op = op::NETWORK;
        e.subject = subject::INET;
        e.family = AF_INET;
        e.port = 443;
        e.addr[10..].copy_from_slice(&[0xff, 0xff, 192, 0, 2, 20]);
        let d = denial_from_event(&e, "s-1", None);
        assert_eq!(d.rule_id, DATAGRAM_BY_NAME_ID);
        assert_eq!(d.subject, "192.0.2.20:443");
        assert!(d.message.contains("QUIC"), "{}", d.message);
    }

    #[test]
    fn path_denial() {
        let mut e = with_path(event(), b"/home/u/.ssh/id_ed25519");
        // Garbage after the NUL must not show.
        e.path[40] = b'X';
        e.comm[..3].copy_from_slice(b"cat");
        let d = denial_from_event(&e, "s-1", RULE);
        assert_eq!(d.operation, "read");
        assert_eq!(d.subject, "/home/u/.ssh/id_ed25519");
        assert_eq!(d.rule_id, "protect-ssh-keys");
        assert_eq!(d.message, "SSH keys are off limits");
        assert_eq!(d.comm, "cat");
        assert_eq!(d.pid, 1000);
        assert_eq!(d.session_id, "s-1");
        assert_eq!(d.layer, "kernel");
    }

    #[test]
    fn operation_names() {
        let names: Vec<String> = [
            op::READ,
            op::WRITE,
            op::EXEC,
            op::DELETE,
            op::NETWORK,
            1 << 20,
        ]
        .into_iter()
        .map(operation_name)
        .collect();
        assert_eq!(
            names,
            [
                "read",
                "write",
                "execute",
                "delete",
                "network",
                "operation 0x100000"
            ]
        );
    }

    #[test]
    fn name_operations_say_what_was_tried() {
        let line = |op_bit, detail| {
            let mut e = with_path(event(), b"/home/u/.bashrc");
            e.op = op_bit;
            e.detail = detail;
            let d = denial_from_event(&e, "s-1", RULE);
            phrase(&d.operation, &d.subject)
        };
        assert_eq!(line(op::READ, path_op::OPEN), "read of /home/u/.bashrc");
        // A removal hits a write-and-delete rule on its write bit; the line says delete.
        assert_eq!(
            line(op::WRITE, path_op::UNLINK),
            "delete of /home/u/.bashrc"
        );
        assert_eq!(line(op::WRITE, path_op::RMDIR), "delete of /home/u/.bashrc");
        assert_eq!(
            line(op::WRITE, path_op::RENAME_ONTO),
            "rename onto /home/u/.bashrc"
        );
        assert_eq!(
            line(op::READ, path_op::RENAME_FROM),
            "rename of /home/u/.bashrc"
        );
        assert_eq!(
            line(op::READ, path_op::LINK_FROM),
            "hard link of /home/u/.bashrc"
        );
        assert_eq!(
            line(op::WRITE, path_op::LINK_ONTO),
            "hard link onto /home/u/.bashrc"
        );
        assert_eq!(
            line(op::WRITE, path_op::SYMLINK),
            "symlink onto /home/u/.bashrc"
        );
        assert_eq!(
            line(op::WRITE, path_op::CREATE),
            "create of /home/u/.bashrc"
        );
        assert_eq!(
            line(op::WRITE, path_op::TRUNCATE),
            "truncate of /home/u/.bashrc"
        );
        assert_eq!(line(op::WRITE, path_op::CHMOD), "chmod of /home/u/.bashrc");
        assert_eq!(line(op::WRITE, path_op::CHOWN), "chown of /home/u/.bashrc");
        assert_eq!(
            line(op::CHROOT, path_op::CHROOT),
            "chroot into /home/u/.bashrc"
        );
        assert_eq!(
            line(op::WRITE, path_op::UTIMES),
            "times change of /home/u/.bashrc"
        );
        assert_eq!(
            line(op::WRITE, path_op::XATTR),
            "attribute change of /home/u/.bashrc"
        );
        // An unknown detail falls back to the operation bit.
        assert_eq!(line(op::WRITE, 99), "write of /home/u/.bashrc");
    }

    #[test]
    fn inet_subjects() {
        let mut mapped = [0u8; 16];
        mapped[10] = 0xff;
        mapped[11] = 0xff;
        mapped[12..].copy_from_slice(&[1, 2, 3, 4]);
        assert_eq!(format_inet(AF_INET, mapped, 443), "1.2.3.4:443");
        // An IPv6 socket connecting to an IPv4-mapped address is shown as IPv4 too.
        assert_eq!(format_inet(AF_INET6, mapped, 80), "1.2.3.4:80");
        let loopback = Ipv6Addr::LOCALHOST.octets();
        assert_eq!(format_inet(AF_INET6, loopback, 22), "[::1]:22");
        let mut raw4 = [0u8; 16];
        raw4[..4].copy_from_slice(&[169, 254, 169, 254]);
        assert_eq!(format_inet(AF_INET, raw4, 80), "169.254.169.254:80");

        let mut e = event();
        e.subject = subject::INET;
        e.op = op::NETWORK;
        e.family = AF_INET6;
        e.addr = loopback;
        e.port = 22;
        let d = denial_from_event(&e, "s-1", RULE);
        assert_eq!(
            (d.operation.as_str(), d.subject.as_str()),
            ("network", "[::1]:22")
        );
        assert_eq!(
            inet_addr(&e),
            Some(std::net::IpAddr::V6(Ipv6Addr::LOCALHOST))
        );
        (e.family, e.addr) = (AF_INET, mapped);
        assert_eq!(inet_addr(&e), Some([1, 2, 3, 4].into()));
        e.addr = raw4;
        assert_eq!(inet_addr(&e), Some([169, 254, 169, 254].into()));
        e.subject = subject::PATH;
        assert_eq!(inet_addr(&e), None);
    }

    #[test]
    fn unix_subjects() {
        let mut e = with_path(event(), b"/run/docker.sock");
        e.subject = subject::UNIX;
        e.family = AF_UNIX;
        assert_eq!(format_subject(&e), "/run/docker.sock");
        let mut e = with_path(event(), b"\0abstract-name");
        e.subject = subject::UNIX;
        assert_eq!(format_subject(&e), "@abstract-name");
    }

    fn guard_line(op: u32, subject: u32, detail: u32, path: &[u8]) -> String {
        let mut e = with_path(event(), path);
        (e.rule, e.op, e.subject, e.detail) = (RULE_SELF_PROTECTION, op, subject, detail);
        let d = denial_from_event(&e, "s-1", None);
        assert_eq!(d.rule_id, SELF_PROTECTION_ID);
        format!("blocked {} of {} ({})", d.operation, d.subject, d.message)
    }

    #[test]
    fn self_protection_denials() {
        assert_eq!(
            guard_line(op::SIGNAL, subject::TASK, 812, b""),
            "blocked kill of carapaced (pid 812) (agents may not signal the Carapace daemon)"
        );
        assert!(guard_line(op::PTRACE, subject::TASK, 812, b"")
            .starts_with("blocked ptrace of carapaced (pid 812) (agents may not trace"));
        assert!(guard_line(op::SIGNAL, subject::PROCESS, 640, b"")
            .starts_with("blocked kill of process 640 outside the session (agents may not signal processes outside"));
        assert_eq!(
            guard_line(op::KEY, subject::KEY, 912_345_678, b""),
            "blocked use of kernel key 912345678 outside the session (agents may use only the \
             kernel keys their session made: the user keyring holds the user's own tokens and \
             passwords)"
        );
        assert!(guard_line(op::TASK_CONTROL, subject::TASK, 812, b"")
            .starts_with("blocked limits or priority change of carapaced (pid 812) (agents may not change the resource limits"));
        assert!(
            guard_line(op::READ, subject::PATH, path_op::OUTSIDE_PROCESS, b"/proc/640/environ")
                .starts_with("blocked read of /proc/640/environ (agents may not read or change the files of processes outside")
        );
        assert!(guard_line(
            op::WRITE,
            subject::PATH,
            path_op::OUTSIDE_TERMINAL,
            b"/dev/pts/0"
        )
        .starts_with("blocked write of /dev/pts/0 (agents may not open a terminal outside"));
        assert!(guard_line(
            op::WRITE,
            subject::PATH,
            path_op::OUTSIDE_IPC,
            b"/dev/mqueue/q"
        )
        .contains("message queues outside their session's own IPC namespace"));
        assert!(guard_line(op::PTRACE, subject::PROCESS, 640, b"")
            .starts_with("blocked ptrace of process 640 outside the session (agents may not"));
        let mut e = event();
        (e.rule, e.op, e.subject, e.detail) = (
            RULE_SELF_PROTECTION,
            op::TTY_INPUT,
            subject::TTY,
            carapace_common::TIOCSTI,
        );
        let d = denial_from_event(&e, "s-1", None);
        assert_eq!(
            phrase(&d.operation, &d.subject),
            "typing into a terminal (TIOCSTI)"
        );
        assert!(d.message.starts_with("agents may not type into a terminal"));
        assert!(guard_line(op::BPF, subject::BPF_CMD, 5, b"")
            .starts_with("blocked use of bpf(BPF_PROG_LOAD) (agents may not use bpf()"));
        assert!(guard_line(op::BPF, subject::BPF_CMD, 999, b"")
            .starts_with("blocked use of bpf(command 999)"));
        assert!(
            guard_line(op::MOUNT, subject::MOUNT, mount_kind::MOUNT, b"tmpfs")
                .starts_with("blocked mount of tmpfs (agents may not mount")
        );
        assert!(
            guard_line(op::MOUNT, subject::MOUNT, mount_kind::MOUNT, b"")
                .starts_with("blocked mount of a file system")
        );
        assert!(
            guard_line(op::UNMOUNT, subject::MOUNT, mount_kind::UNMOUNT, b"")
                .starts_with("blocked unmount of a mounted file system")
        );
        assert!(
            guard_line(op::MOUNT, subject::MOUNT, mount_kind::MOVE_MOUNT, b"")
                .contains("(move_mount)")
        );
        assert!(
            guard_line(op::MOUNT, subject::MOUNT, mount_kind::PIVOT_ROOT, b"")
                .contains("(pivot_root)")
        );
        assert!(guard_line(op::MODULE, subject::NONE, 0, b"")
            .starts_with("blocked load of a kernel module (agents may not load kernel modules)"));
        assert!(guard_line(op::CLONE_INTO_CGROUP, subject::NONE, 0, b"")
            .starts_with("blocked clone of a process into another cgroup"));
        assert!(guard_line(op::USERNS, subject::NONE, 0, b"")
            .starts_with("blocked creation of a user namespace"));
        assert_eq!(
            guard_line(op::WRITE, subject::PATH, 0, b"/sys/fs/cgroup/cgroup.procs"),
            "blocked write of /sys/fs/cgroup/cgroup.procs (agents may not move processes out \
             of their Carapace session's cgroup)"
        );
    }

    #[test]
    fn path_too_long_and_unknown_rule() {
        let mut e = with_path(event(), b"/very/long");
        e.rule = RULE_PATH_TOO_LONG;
        let d = denial_from_event(&e, "s-1", None);
        assert_eq!(d.rule_id, PATH_TOO_LONG_ID);
        assert!(d.message.contains("255 bytes"), "{}", d.message);

        e.rule = 12;
        let d = denial_from_event(&e, "s-1", None);
        assert_eq!(d.rule_id, "kernel-rule-12");
    }
}
