//! The approval request a held open files: the `kernel` request the refusal would file for
//! the same rule, path and file, saying that the program waits instead of retrying.
use carapace_common::{op, InodeKey};
use carapace_policy::host::kernel_dev;
use carapace_policy::rules::Rule;

use crate::session::approvals::{GateRule, KernelOperation, Request};

/// The operations a held open stands for: fanotify says a file is opened, not whether for
/// reading, writing or executing, so every one of them the rule covers (an execute rule
/// covers reads too, as in the kernel).
#[must_use]
pub fn held_ops(rule: &Rule) -> u32 {
    rule.ops() & (op::READ | op::WRITE | op::EXEC)
}

/// The request for a held open of `path` (the file `file`) under `rule`, filed for
/// `owner_uid`. Its signature names the operations and the file as the refusal's does, so
/// identical opens join one request, and an approval of it is the session's exception.
#[must_use]
pub fn request(rule: &Rule, path: &str, ops: u32, file: InodeKey, owner_uid: u32) -> Request {
    let operation = match ops {
        op::READ => "read",
        op::WRITE => "write",
        _ => "open",
    };
    Request {
        requester_uid: owner_uid,
        summary: format!(
            "{} (held: the program is waiting; a denial fails the open with EPERM)",
            crate::api::denial::phrase(operation, path)
        ),
        signature: format!("kernel {ops:#x} {path} {}:{}", file.dev, file.ino),
        rules: vec![GateRule {
            id: rule.id.clone(),
            mode: "approve".into(),
            message: rule.message.clone(),
            matched: String::new(),
        }],
        kernel: Some(KernelOperation {
            path: path.to_owned(),
            ops,
            file: Some([file.dev, file.ino]),
            ..KernelOperation::default()
        }),
        ..Request::default()
    }
}

/// The file `path` names (following a `/proc/self/fd` link to the open file), keyed as
/// the kernel keys inodes.
pub fn file_key(path: &str) -> std::io::Result<InodeKey> {
    use std::os::unix::fs::MetadataExt as _;
    let m = std::fs::metadata(path)?;
    Ok(InodeKey {
        dev: kernel_dev(m.dev()),
        ino: m.ino(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::kernel_approval::KIND;

    fn rule(yaml_rule: &str) -> Rule {
        let set = carapace_policy::rules::RuleSet::parse_with(
            "rules.yaml",
            &format!("version: 1\nbuiltin: none\nrules:\n{yaml_rule}"),
            &crate::policy_host::options(),
        )
        .expect("valid rules");
        set.rules()[0].clone()
    }

    #[test]
    fn a_held_open_files_the_kernel_request_saying_the_program_waits() {
        let r = rule(
            "  - id: drafts\n    approve: \"/srv/drafts/**\"\n    actions: [read]\n    message: Drafts need a human\n    hold: true\n",
        );
        assert_eq!(held_ops(&r), op::READ);
        let file = InodeKey { dev: 8, ino: 42 };
        let req = request(&r, "/srv/drafts/a.txt", held_ops(&r), file, 1000);
        assert!(
            req.summary
                .starts_with("read of /srv/drafts/a.txt (held: the program is waiting"),
            "{}",
            req.summary
        );
        assert!(req.summary.contains("EPERM"), "{}", req.summary);
        assert_eq!(req.requester_uid, 1000);
        assert_eq!(req.rules[0].id, "drafts");
        assert_eq!(req.rules[0].message, "Drafts need a human");
        let k = req.kernel.as_ref().expect("kernel operation");
        assert_eq!(
            (k.path.as_str(), k.ops, k.file),
            ("/srv/drafts/a.txt", op::READ, Some([8, 42]))
        );
        // Another file at the path is another request; the same file the same one.
        let other = request(
            &r,
            "/srv/drafts/a.txt",
            op::READ,
            InodeKey { dev: 8, ino: 43 },
            1000,
        );
        assert_ne!(other.identity(KIND), req.identity(KIND));
        let again = request(&r, "/srv/drafts/a.txt", op::READ, file, 1000);
        assert_eq!(again.identity(KIND), req.identity(KIND));
    }

    #[test]
    fn an_open_of_a_rule_on_every_action_is_asked_as_an_open() {
        let r = rule("  - id: drafts\n    approve: \"/srv/drafts/**\"\n    hold: true\n");
        assert_eq!(held_ops(&r), op::READ | op::WRITE | op::EXEC);
        let req = request(&r, "/srv/drafts/a", held_ops(&r), InodeKey::default(), 0);
        assert!(
            req.summary.starts_with("open of /srv/drafts/a"),
            "{}",
            req.summary
        );
        let exec = rule("  - id: tools\n    approve: \"/srv/tools/**\"\n    actions: [execute]\n    hold: true\n");
        assert_eq!(held_ops(&exec), op::EXEC | op::READ);
    }
}
