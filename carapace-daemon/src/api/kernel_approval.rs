//! Approve mode in the kernel: an approve-mode path rule refuses in the kernel (EACCES), and
//! the refusal files an approval request for the exact operation (path and action). When a
//! human approves it — `carapace approve`, the console, the slash command: all answer
//! through `sessions::answer` — the operation becomes an exception for that session in the
//! kernel's `APPROVED_PATHS` map, so the agent's retry passes. A denial or an expiry writes
//! nothing: the retry is refused again (and, denied, answered at once by the fatigue rule).
//!
//! A tool call approved at Layer 1 (hook, `check --wait`, console) is the same human
//! answer: the call's operations that approve-mode kernel rules cover are written as the
//! session's exceptions too ([`call_operations`]), so the command the agent then runs is
//! not refused by the kernel and asked about a second time.
//!
//! In the kernel an approval stands for the rest of the session even when given "once": the
//! kernel cannot tell the retry from the next identical open. It stands for the file the
//! path named when the human answered (its inode), not for the name: a file renamed or
//! hard-linked onto the path later is refused again.
use std::sync::Arc;

use carapace_common::{op, subject, DenyEvent, InodeKey};
use carapace_policy::engine::{Decision, Extracted};
use carapace_policy::host::kernel_dev;
use carapace_policy::rules::compile::kernel::{self, Plan};
use carapace_policy::rules::{Mode, Rule, RuleSet};

use super::proto::Denial;
use super::Daemon;
use crate::session::approvals::{Approval, GateRule, KernelOperation, Request};
use crate::session::db::ApprovalStatus;

/// The kind of the approval requests the kernel's refusals file.
pub const KIND: &str = "kernel";

/// The request a refusal by `rule` stands for, if the rule is an approve-mode rule and the
/// event names a path that can be written as a map key again (UTF-8, no NUL), or an
/// address and port.
#[must_use]
pub fn request_of(event: &DenyEvent, rule: &Rule, d: &Denial, owner_uid: u32) -> Option<Request> {
    if rule.mode != Mode::Approve {
        return None;
    }
    let gate = vec![GateRule {
        id: rule.id.clone(),
        mode: "approve".into(),
        message: rule.message.clone(),
        matched: String::new(),
    }];
    if event.subject == subject::INET {
        let addr = super::denial::inet_addr(event)?;
        // `d.subject` names the address as the denial line does, with the host name the
        // session's resolver handed it out for when it did.
        let phrase = super::denial::phrase(&d.operation, &d.subject);
        return Some(Request {
            requester_uid: owner_uid,
            summary: format!("{phrase} (refused by the kernel until approved; the agent retries)"),
            signature: format!("kernel connect {addr} {}", event.port),
            rules: gate,
            kernel: Some(KernelOperation {
                addr: Some(addr),
                port: event.port,
                ops: op::NETWORK,
                ..KernelOperation::default()
            }),
            ..Request::default()
        });
    }
    if event.subject != subject::PATH {
        return None;
    }
    let end = event.path.iter().position(|b| *b == 0)?;
    let path = std::str::from_utf8(&event.path[..end]).ok()?;
    if path.is_empty() {
        return None;
    }
    // Executing a file reads it too (the exec open, the loader): an approved exec is both.
    let ops = if event.op & op::EXEC != 0 {
        event.op | op::READ
    } else {
        event.op
    };
    let phrase = super::denial::phrase(&d.operation, path);
    // The file refused, read now: the human approves that file. Once another file is moved
    // onto the path, before or after the answer, the approval does not cover it, and its
    // request is another one (fatigue does not answer it).
    let file = file_at(path);
    Some(Request {
        requester_uid: owner_uid,
        summary: format!("{phrase} (refused by the kernel until approved; the agent retries)"),
        signature: format!("kernel {ops:#x} {path} {}:{}", file.dev, file.ino),
        rules: gate,
        kernel: Some(KernelOperation {
            path: path.to_owned(),
            ops,
            file: Some([file.dev, file.ino]),
            ..KernelOperation::default()
        }),
        ..Request::default()
    })
}

/// The operations of a tool call that the approve-mode kernel rules among `decision`'s
/// matches cover: each path the call acts on, with the `op::*` bits of its actions that
/// those rules refuse. Approving the call approves exactly these in the kernel; paths no
/// approve-mode path rule reaches are left out (the kernel never asks about them, and the
/// exception map's slots are few). Targets the analysis could not determine are left out
/// too: the kernel sees the real path, and a guess must not become an exception.
#[must_use]
pub fn call_operations(
    rules: &RuleSet,
    decision: &Decision,
    ext: &Extracted,
) -> Vec<KernelOperation> {
    let gates: Vec<&Rule> = decision
        .matches
        .iter()
        .filter(|m| m.mode == Mode::Approve && m.kernel)
        .filter_map(|m| rules.by_id(&m.id))
        .filter(|r| matches!(kernel::plan(r), Ok(Plan::Path { .. })))
        .collect();
    let mut out: Vec<KernelOperation> = Vec::new();
    for o in ext.ops.iter().filter(|o| !o.unknown && !gates.is_empty()) {
        let (Some(action), Some(path)) = (o.action, o.path.as_deref()) else {
            continue;
        };
        // `dir/**` is the extractor's "everything under dir" (a recursive copy): the kernel
        // sees each file's own path, which no single exception names.
        if path.is_empty() || path.contains('\0') || path.ends_with("/**") {
            continue;
        }
        // Running a file reads it too (the exec open, the loader), as in `request_of`.
        let mut asked = action.ops();
        if asked & op::EXEC != 0 {
            asked |= op::READ;
        }
        let ops = gates
            .iter()
            .filter(|r| r.matches_path(path, asked))
            .fold(0, |acc, r| acc | (asked & r.ops()));
        if ops == 0 {
            continue;
        }
        match out.iter_mut().find(|k| k.path == path) {
            Some(k) => k.ops |= ops,
            None => out.push(KernelOperation {
                path: path.to_owned(),
                ops,
                ..KernelOperation::default()
            }),
        }
    }
    out
}

/// What the agent reads after the rule's message: that a human is asked and to retry, or
/// that a human already said no.
#[must_use]
pub fn advice(approval: &Approval) -> String {
    let id = &approval.row.id;
    match approval.row.status {
        ApprovalStatus::Denied => {
            "A human denied this operation earlier in this session; do not retry it.".into()
        }
        ApprovalStatus::Approved => {
            format!("Request {id} was approved; retry the operation.")
        }
        _ => format!(
            "Waiting for a human to approve it (request {id}: `carapace approve {id}`); \
             retry the same operation once it is approved."
        ),
    }
}

/// Files the request for `event` (see [`request_of`]) and adds what to do to `d`'s
/// message. A new request expires after the daemon's approval timeout, which counts as a
/// denial; an identical pending one is joined (fatigue), a denied one answers at once.
pub async fn file(daemon: &Arc<Daemon>, event: &DenyEvent, rule: &Rule, d: &mut Denial) {
    let Some(record) = daemon.sessions.get(&d.session_id) else {
        return;
    };
    let Some(request) = request_of(event, rule, d, record.owner_uid) else {
        return;
    };
    let (approvals, session) = (Arc::clone(&daemon.approvals), d.session_id.clone());
    let filed =
        tokio::task::spawn_blocking(move || approvals.request(Some(&session), KIND, &request))
            .await;
    let approval = match filed {
        Ok(Ok(a)) => a,
        Ok(Err(e)) => {
            tracing::warn!(session = %d.session_id, "cannot file the approval request: {e}");
            return;
        }
        Err(e) => {
            tracing::warn!(session = %d.session_id, "cannot file the approval request: {e}");
            return;
        }
    };
    d.message = format!("{} {}", with_stop(&d.message), advice(&approval));
    // Nobody waits on it in a call: expire it after the timeout, as a waiting call would.
    if approval.row.status == ApprovalStatus::Pending && approval.request.asked <= 1 {
        let (approvals, timeout) = (Arc::clone(&daemon.approvals), daemon.approval_timeout);
        let id = approval.row.id.clone();
        tokio::spawn(async move {
            if let Err(e) = approvals.wait(&id, timeout).await {
                tracing::warn!(approval = %id, "cannot expire the approval request: {e}");
            }
        });
    }
}

/// `message` ending in a full stop, so that the advice reads as a sentence after it.
fn with_stop(message: &str) -> String {
    let m = message.trim_end();
    if m.ends_with(['.', '!', '?']) {
        m.to_owned()
    } else {
        format!("{m}.")
    }
}

/// Writes the exception an approved kernel request stands for. Called after the answer is
/// stored; a failure is logged, and the operation then stays refused (fail closed).
pub fn apply(daemon: &Daemon, approval: &Approval) {
    if approval.row.status != ApprovalStatus::Approved {
        return;
    }
    let Some(session) = &approval.row.session_id else {
        return;
    };
    // A kernel request carries its one operation, an approved call those its rules cover.
    let ops = approval
        .request
        .kernel
        .iter()
        .chain(&approval.request.kernel_ops);
    for k in ops {
        write(daemon, approval, session, k);
    }
}

/// The file `path` names now, as the kernel keys inodes: the exception covers that file
/// only, so that another file renamed or hard-linked onto the path afterwards is refused
/// again. Zero (any file) when nothing is there yet — an approved write that creates it —
/// or for a socket, whose connect the kernel judges by path alone.
fn file_at(path: &str) -> InodeKey {
    use std::os::unix::fs::{FileTypeExt as _, MetadataExt as _};
    // Not followed: the kernel judges the name itself (an unlinked symlink is the link).
    match std::fs::symlink_metadata(path) {
        Ok(m) if !m.file_type().is_socket() => InodeKey {
            dev: kernel_dev(m.dev()),
            ino: m.ino(),
        },
        _ => InodeKey::default(),
    }
}

/// Writes one approved operation as the session's kernel exception, logging the outcome.
fn write(daemon: &Daemon, approval: &Approval, session: &str, k: &KernelOperation) {
    let (written, what) = match k.addr {
        Some(addr) => (
            daemon.sessions.approve_kernel_addr(session, addr, k.port),
            std::net::SocketAddr::new(addr, k.port).to_string(),
        ),
        None => (
            daemon.sessions.approve_kernel_path(
                session,
                k.path.as_bytes(),
                k.ops,
                // The file refused when the request was filed; a call's paths are read now.
                k.file
                    .map_or_else(|| file_at(&k.path), |[dev, ino]| InodeKey { dev, ino }),
            ),
            crate::audit::redact::redact(&k.path).to_string(),
        ),
    };
    match written {
        Ok(true) => tracing::info!(
            approval = %approval.row.id,
            session = %session,
            "kernel exception written: {:#x} on {what}",
            k.ops,
        ),
        Ok(false) => tracing::warn!(
            approval = %approval.row.id,
            session = %session,
            "approved, but the session or the kernel layer is gone: nothing to write"
        ),
        Err(e) => tracing::warn!(
            approval = %approval.row.id,
            session = %session,
            "approved, but the kernel exception cannot be written (the operation stays refused): {e}"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use carapace_common::PATH_MAX;

    fn event(path: &[u8], bit: u32) -> DenyEvent {
        let mut e = DenyEvent {
            session_cgroup: 99,
            session: 1,
            pid: 10,
            tgid: 10,
            rule: 0,
            op: bit,
            subject: subject::PATH,
            port: 0,
            family: 0,
            detail: 0,
            addr: [0; 16],
            comm: [0; 16],
            path: [0; PATH_MAX],
        };
        e.path[..path.len()].copy_from_slice(path);
        e
    }

    fn rules(yaml: &str) -> carapace_policy::rules::RuleSet {
        carapace_policy::rules::RuleSet::parse_with(
            "rules.yaml",
            yaml,
            &crate::policy_host::options(),
        )
        .expect("valid rules")
    }

    #[test]
    fn approve_rules_file_the_exact_operation() {
        let set = rules(
            "version: 1\nbuiltin: none\nrules:\n  - id: drafts\n    approve: \"/srv/drafts/**\"\n    message: Drafts need a human\n  - id: secret\n    block: \"/srv/secret/**\"\n",
        );
        let drafts = set.by_id("drafts").expect("drafts");
        let e = event(b"/srv/drafts/a.txt", op::READ);
        let d = super::super::denial::denial_from_event(&e, "s-1", Some(("drafts", "m")));
        let r = request_of(&e, drafts, &d, 1000).expect("a request");
        let asked = r.kernel.as_ref().expect("kernel operation");
        assert_eq!(
            (asked.path.as_str(), asked.ops),
            ("/srv/drafts/a.txt", op::READ)
        );
        assert_eq!(r.requester_uid, 1000);
        assert!(
            r.summary.starts_with("read of /srv/drafts/a.txt"),
            "{}",
            r.summary
        );
        assert_eq!(r.rules[0].id, "drafts");
        // Another path or action is another request.
        let write = request_of(&event(b"/srv/drafts/a.txt", op::WRITE), drafts, &d, 1000)
            .expect("a request");
        assert_ne!(write.identity(KIND), r.identity(KIND));
        // An exec approval covers the reads an exec makes.
        let exec =
            request_of(&event(b"/srv/drafts/run", op::EXEC), drafts, &d, 1000).expect("a request");
        assert_eq!(exec.kernel.map(|k| k.ops), Some(op::EXEC | op::READ));
        // A block rule files nothing; nor does a path that is not UTF-8.
        let secret = set.by_id("secret").expect("secret");
        assert!(request_of(&event(b"/srv/secret/a", op::READ), secret, &d, 1000).is_none());
        assert!(request_of(&event(b"/srv/drafts/\xff", op::READ), drafts, &d, 1000).is_none());
    }

    #[test]
    fn approve_rules_on_addresses_file_the_address_and_port() {
        let set = rules(
            "version: 1\nbuiltin: none\nrules:\n  - id: api\n    approve: { host: \"127.0.0.9\", port: 8080 }\n",
        );
        let api = set.by_id("api").expect("api");
        let mut e = event(b"", op::NETWORK);
        e.subject = subject::INET;
        e.family = carapace_common::AF_INET;
        e.addr = std::net::Ipv4Addr::new(127, 0, 0, 9)
            .to_ipv6_mapped()
            .octets();
        e.port = 8080;
        let mut d = super::super::denial::denial_from_event(&e, "s-1", Some(("api", "m")));
        d.subject = format!("{} (api.example)", d.subject);
        let r = request_of(&e, api, &d, 1000).expect("a request");
        let k = r.kernel.as_ref().expect("kernel operation");
        assert_eq!(k.addr, Some("127.0.0.9".parse().expect("addr")));
        assert_eq!((k.port, k.ops, k.path.as_str()), (8080, op::NETWORK, ""));
        assert!(
            r.summary.contains("127.0.0.9:8080 (api.example)"),
            "the summary names the address, port and name: {}",
            r.summary
        );
        // Another port is another request; the name does not make one.
        let mut other = e;
        other.port = 8081;
        let r2 = request_of(&other, api, &d, 1000).expect("a request");
        assert_ne!(r2.identity(KIND), r.identity(KIND));
        let mut plain = d.clone();
        plain.subject = "127.0.0.9:8080".into();
        let r3 = request_of(&e, api, &plain, 1000).expect("a request");
        assert_eq!(r3.identity(KIND), r.identity(KIND));
        // Stored as JSON, and read back; older rows without an address still read.
        let json = serde_json::to_string(k).expect("json");
        let back: KernelOperation = serde_json::from_str(&json).expect("read back");
        assert_eq!(&back, k);
        let old: KernelOperation =
            serde_json::from_str(r#"{"path":"/srv/a","ops":1}"#).expect("an old row");
        assert_eq!((old.addr, old.port), (None, 0));
    }

    /// The operations an approved call writes as kernel exceptions, for a Bash call.
    fn call_ops(set: &carapace_policy::rules::RuleSet, command: &str) -> Vec<(String, u32)> {
        use carapace_policy::engine::{self, Activation, Context, Layer, ToolCall};
        let call = ToolCall::from_json(&serde_json::json!({
            "tool_name": "Bash",
            "tool_input": {"command": command}
        }))
        .expect("a call");
        let ctx = Context {
            cwd: "/srv".into(),
            home: "/home/u".into(),
            env: Vec::new(),
            host: None,
        };
        let ext = call.extract(&ctx);
        let d = engine::evaluate(set, &ext, &Activation::default(), Layer::ToolCall);
        call_operations(set, &d, &ext)
            .into_iter()
            .map(|k| (k.path, k.ops))
            .collect()
    }

    #[test]
    fn an_approved_call_covers_what_its_approve_kernel_rules_refuse() {
        let set = rules(
            "version: 1\nbuiltin: none\nrules:\n  - id: drafts\n    approve: \"/srv/drafts/**\"\n    actions: [read, write]\n  - id: ask\n    approve: {command: \"deploy *\"}\n",
        );
        // The approve rule's path and the call's action on it, nothing else of the call.
        assert_eq!(
            call_ops(&set, "cat /srv/drafts/a.txt /srv/other.txt"),
            vec![("/srv/drafts/a.txt".to_owned(), op::READ)]
        );
        // Read and write of one path are one exception.
        assert_eq!(
            call_ops(&set, "cp /srv/drafts/a /srv/drafts/b && cat /srv/drafts/b"),
            vec![
                ("/srv/drafts/a".to_owned(), op::READ),
                ("/srv/drafts/b".to_owned(), op::READ | op::WRITE)
            ]
        );
        // An action the rule does not refuse is not an exception.
        assert!(call_ops(&set, "rm /srv/drafts/a").is_empty());
        // A call approved for a rule the kernel does not hold writes nothing.
        assert!(call_ops(&set, "deploy prod").is_empty());
    }

    #[test]
    fn a_request_holds_the_file_refused_not_the_one_at_the_path_later() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (draft, swapped) = (dir.path().join("a"), dir.path().join("b"));
        std::fs::write(&draft, "draft").expect("write a");
        std::fs::write(&swapped, "secret").expect("write b");
        let path = draft.to_str().expect("utf-8");
        let set = rules(&format!(
            "version: 1\nbuiltin: none\nrules:\n  - id: drafts\n    approve: \"{}/**\"\n",
            dir.path().display()
        ));
        let drafts = set.by_id("drafts").expect("drafts");
        let refusal = event(path.as_bytes(), op::READ);
        let d = super::super::denial::denial_from_event(&refusal, "s-1", Some(("drafts", "m")));
        let refused = file_at(path);
        let r = request_of(&refusal, drafts, &d, 1000).expect("a request");
        let k = r.kernel.expect("kernel operation");
        assert_eq!(k.file, Some([refused.dev, refused.ino]));
        // The agent puts another file at the path before the human answers: the stored
        // request still names the one refused, not what is there now.
        std::fs::rename(&swapped, &draft).expect("rename");
        assert_ne!(file_at(path), refused);
        assert_eq!(k.file, Some([refused.dev, refused.ino]));
    }

    #[test]
    fn an_exception_names_the_file_the_path_names_now() {
        use std::os::unix::fs::MetadataExt as _;
        let dir = tempfile::tempdir().expect("tempdir");
        let (a, b) = (dir.path().join("a"), dir.path().join("b"));
        std::fs::write(&a, "a").expect("write a");
        std::fs::write(&b, "b").expect("write b");
        let path = a.to_str().expect("utf-8");
        let approved = file_at(path);
        let meta = std::fs::metadata(&a).expect("stat a");
        assert_eq!(approved.ino, meta.ino());
        assert_eq!(approved.dev, kernel_dev(meta.dev()));
        assert_ne!(approved, InodeKey::default());
        // Another file moved onto the path is another key.
        std::fs::rename(&b, &a).expect("rename");
        assert_ne!(file_at(path), approved);
        // Nothing there yet (a write that creates it), or a socket: any file.
        let missing = dir.path().join("missing");
        assert_eq!(
            file_at(missing.to_str().expect("utf-8")),
            InodeKey::default()
        );
        let sock = dir.path().join("sock");
        let _listener = std::os::unix::net::UnixListener::bind(&sock).expect("bind");
        assert_eq!(file_at(sock.to_str().expect("utf-8")), InodeKey::default());
    }

    #[test]
    fn advice_says_to_wait_and_retry_or_not() {
        let mut a = Approval {
            row: crate::session::db::ApprovalRow {
                id: "ap-1".into(),
                session_id: Some("s-1".into()),
                kind: KIND.into(),
                created: 0,
                status: ApprovalStatus::Pending,
                request: String::new(),
                answer: String::new(),
                decided_at: None,
                decided_by: None,
            },
            request: Request::default(),
            answer: crate::session::approvals::Answer::default(),
        };
        let pending = advice(&a);
        assert!(pending.contains("Waiting for a human"), "{pending}");
        assert!(pending.contains("carapace approve ap-1"), "{pending}");
        assert!(pending.contains("retry"), "{pending}");
        a.row.status = ApprovalStatus::Denied;
        assert!(advice(&a).contains("do not retry"));
        assert_eq!(with_stop("Drafts need a human"), "Drafts need a human.");
        assert_eq!(with_stop("Done!"), "Done!");
    }
}
