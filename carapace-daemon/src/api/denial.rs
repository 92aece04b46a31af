//! Turns a kernel [`DenyEvent`] into the [`Denial`] message users and agents read: the
//! operation by name, the subject as a path or `address:port`, the rule's id and message.
use std::net::Ipv6Addr;

use carapace_common::{op, subject, DenyEvent, AF_INET, PATH_MAX, RULE_PATH_TOO_LONG};

use super::proto::Denial;

/// Rule id reported when the kernel denied a path too long to match.
pub const PATH_TOO_LONG_ID: &str = "path-too-long";

/// Name of one `op::*` bit.
#[must_use]
pub fn operation_name(bit: u32) -> String {
    match bit {
        op::READ => "read".into(),
        op::WRITE => "write".into(),
        op::EXEC => "execute".into(),
        op::DELETE => "delete".into(),
        op::NETWORK => "network".into(),
        other => format!("operation {other:#x}"),
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
        _ => String::from_utf8_lossy(until_nul(&event.path)).into_owned(),
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
        operation: operation_name(event.op),
        subject: format_subject(event),
        rule_id,
        message,
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
            pad: 0,
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
            1 << 9,
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
                "operation 0x200"
            ]
        );
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
