//! What a kernel touched event or a tool call that ran says a session touched.

use std::net::IpAddr;

use carapace_common::{op, subject, DenyEvent};
use carapace_policy::engine::Extracted;
use carapace_policy::rules::Action;

use super::{FileAction, Touched};

/// The things a kernel touched event (`TOUCHED` ring buffer) reports; `name` is the name
/// the session's resolver handed the address out for, when it did.
#[must_use]
pub fn from_event(event: &DenyEvent, name: Option<String>) -> Vec<Touched> {
    match event.subject {
        subject::PATH => {
            let path = String::from_utf8_lossy(until_nul(&event.path)).into_owned();
            if !path.starts_with('/') {
                return Vec::new();
            }
            // A name removed or renamed away also comes with `op::DELETE` (`name_ops`).
            [
                (op::READ, FileAction::Read),
                (op::WRITE, FileAction::Write),
                (op::EXEC, FileAction::Execute),
                (op::DELETE, FileAction::Delete),
            ]
            .into_iter()
            .filter(|(bit, _)| event.op & bit != 0)
            .map(|(_, action)| Touched::File {
                action,
                path: path.clone(),
            })
            .collect()
        }
        subject::INET => vec![Touched::Address {
            addr: inet_addr(event),
            port: event.port,
            name,
        }],
        _ => Vec::new(),
    }
}

/// The things a tool call that runs touches, as Layer 1 read it: paths by action and the
/// hosts it reaches. Targets the analysis could not determine (`unknown`) say nothing
/// exact, and are left out (what they reach stays blocked by the proposal).
#[must_use]
pub fn from_call(ext: &Extracted) -> Vec<Touched> {
    let mut out = Vec::new();
    for o in &ext.ops {
        if o.unknown {
            continue;
        }
        match (o.action, &o.path, &o.host) {
            (Some(Action::Network), _, Some(host)) => out.push(match host.parse::<IpAddr>() {
                Ok(addr) => Touched::Address {
                    addr,
                    port: o.port.unwrap_or(0),
                    name: None,
                },
                Err(_) => Touched::Host {
                    name: host.clone(),
                    port: o.port,
                },
            }),
            (Some(action), Some(path), _) if path.starts_with('/') => {
                let action = match action {
                    Action::Read => FileAction::Read,
                    Action::Execute => FileAction::Execute,
                    Action::Delete => FileAction::Delete,
                    // A copy or move writes its destination (the path Layer 1 names).
                    Action::Write | Action::Copy | Action::Move => FileAction::Write,
                    Action::Network => continue,
                };
                out.push(Touched::File {
                    action,
                    path: path.clone(),
                });
            }
            _ => {}
        }
    }
    out
}

/// The event's address: IPv4 for an IPv4-mapped one.
#[must_use]
pub fn inet_addr(event: &DenyEvent) -> IpAddr {
    let v6 = std::net::Ipv6Addr::from(event.addr);
    v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4)
}

fn until_nul(bytes: &[u8]) -> &[u8] {
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    &bytes[..end]
}

#[cfg(test)]
mod tests {
    use super::*;
    use carapace_common::PATH_MAX;
    use carapace_policy::engine::Operation;

    fn path_event(op: u32, path: &str) -> DenyEvent {
        let mut e = DenyEvent {
            session_cgroup: 1,
            session: 1,
            pid: 1,
            tgid: 1,
            rule: carapace_common::TOUCHED_RULE,
            op,
            subject: subject::PATH,
            port: 0,
            family: 0,
            detail: 0,
            addr: [0; 16],
            comm: [0; 16],
            path: [0; PATH_MAX],
        };
        e.path[..path.len()].copy_from_slice(path.as_bytes());
        e
    }

    #[test]
    fn an_open_for_several_actions_is_one_thing_per_action() {
        let got = from_event(&path_event(op::READ | op::EXEC, "/usr/bin/git"), None);
        assert_eq!(
            got,
            vec![
                Touched::File {
                    action: FileAction::Read,
                    path: "/usr/bin/git".into()
                },
                Touched::File {
                    action: FileAction::Execute,
                    path: "/usr/bin/git".into()
                },
            ]
        );
        assert!(from_event(&path_event(op::READ, ""), None).is_empty());
    }

    /// What the `path_*` hooks report: an unlink is judged as delete and write, so a
    /// proposal that lets it through again allows both at that name.
    #[test]
    fn a_name_removed_is_a_delete_and_a_write() {
        let got = from_event(&path_event(op::REMOVE, "/srv/rec/gone"), None);
        let actions: Vec<FileAction> = got
            .iter()
            .filter_map(|t| match t {
                Touched::File { action, .. } => Some(*action),
                _ => None,
            })
            .collect();
        assert_eq!(actions, [FileAction::Write, FileAction::Delete]);
    }

    #[test]
    fn a_connect_carries_the_name_the_resolver_gave() {
        let mut e = path_event(op::NETWORK, "");
        e.subject = subject::INET;
        e.family = carapace_common::AF_INET;
        e.port = 443;
        e.addr[10] = 0xff;
        e.addr[11] = 0xff;
        e.addr[12..].copy_from_slice(&[192, 0, 2, 7]);
        assert_eq!(
            from_event(&e, Some("example.com".into())),
            vec![Touched::Address {
                addr: "192.0.2.7".parse().unwrap(),
                port: 443,
                name: Some("example.com".into()),
            }]
        );
    }

    #[test]
    fn a_call_touches_its_known_paths_and_hosts() {
        let mut ext = Extracted::new("Bash");
        ext.op(Operation::path(Action::Read, "/home/u/a"));
        ext.op(Operation::path(Action::Move, "/home/u/b"));
        ext.op(Operation::network("pypi.org", Some(443)));
        let mut unknown = Operation::path(Action::Read, "/home/u/**");
        unknown.unknown = true;
        ext.op(unknown);
        assert_eq!(
            from_call(&ext),
            vec![
                Touched::File {
                    action: FileAction::Read,
                    path: "/home/u/a".into()
                },
                Touched::File {
                    action: FileAction::Write,
                    path: "/home/u/b".into()
                },
                Touched::Host {
                    name: "pypi.org".into(),
                    port: Some(443)
                },
            ]
        );
    }
}
