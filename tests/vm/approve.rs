//! Approve mode in the kernel (issue 20): the fixture's `approve-drafts` rule refuses every
//! operation on /srv/drafts in the kernel and files an approval request for the exact
//! operation; the agent's message says a human is asked and to retry. An approval lets the
//! retry in the same session through (that operation only, that session only); a denial
//! keeps it refused; an expired request refuses as a denial does.
use std::{
    fs,
    io::Read as _,
    os::unix::fs::PermissionsExt as _,
    path::Path,
    process::{Child, Command, Output, Stdio},
    thread,
    time::{Duration, Instant},
};

use super::{agent, guard, restart_daemon, session_command, stderr, stdout};

const CONFIG: &str = "/var/lib/carapace/config.yaml";
const DRAFTS: &str = "/srv/drafts";
/// Long enough for the test to find and answer a request under TCG, short enough to wait
/// out once.
const TIMEOUT_SECS: u64 = 20;

/// A short approval timeout in config.yaml for the test, taken out again afterwards (the
/// daemon restarted both times), so other tests keep the daemon they expect.
struct WithTimeout;

impl WithTimeout {
    fn start() -> Self {
        assert!(!Path::new(CONFIG).exists(), "{CONFIG} exists already");
        fs::write(
            CONFIG,
            format!("approvals:\n  timeout_seconds: {TIMEOUT_SECS}\n"),
        )
        .expect("write config");
        restart_daemon(false);
        Self
    }
}

impl Drop for WithTimeout {
    fn drop(&mut self) {
        let _ = fs::remove_file(CONFIG);
        restart_daemon(false);
    }
}

fn draft(name: &str) -> String {
    let path = format!("{DRAFTS}/{name}");
    fs::create_dir_all(DRAFTS).expect("create drafts");
    fs::set_permissions(DRAFTS, fs::Permissions::from_mode(0o777)).expect("chmod drafts");
    fs::write(&path, format!("draft {name}\n")).expect("write draft");
    fs::set_permissions(&path, fs::Permissions::from_mode(0o666)).expect("chmod draft");
    path
}

/// An agent session that reads `path`, waits for `go` to exist (made by the test once it
/// has answered), and reads it again: the retry, in the same session.
fn read_twice(path: &str, go: &str) -> Child {
    let _ = fs::remove_file(go);
    let script = format!(
        "cat {path}; echo first=$?; \
         for _ in $(seq 1200); do [ -e {go} ] && break; sleep 0.1; done; \
         cat {path}; echo second=$?; \
         echo more >> {path}; echo write=$?"
    );
    session_command(&["bash", "-c", &script], Some(1000))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start agent")
}

fn finish(mut child: Child) -> Output {
    let mut out = String::new();
    let mut err = String::new();
    child
        .stdout
        .take()
        .expect("stdout")
        .read_to_string(&mut out)
        .expect("read stdout");
    child
        .stderr
        .take()
        .expect("stderr")
        .read_to_string(&mut err)
        .expect("read stderr");
    let status = child.wait().expect("agent exits");
    eprintln!("agent → {status:?}\nstdout: {out}\nstderr: {err}");
    Output {
        status,
        stdout: out.into_bytes(),
        stderr: err.into_bytes(),
    }
}

/// The pending approval requests, as `carapace approvals --json` lists them.
fn pending() -> Vec<serde_json::Value> {
    let out = Command::new("carapace")
        .args(["approvals", "--json"])
        .output()
        .expect("carapace approvals");
    assert!(out.status.success(), "approvals: {}", stderr(&out));
    stdout(&out)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// The id of the pending kernel request for `phrase` (e.g. `read of /srv/drafts/a`), once
/// the kernel's refusal has filed it.
fn request_for(phrase: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(a) = pending().into_iter().find(|a| {
            a["kind"] == "kernel" && a["summary"].as_str().is_some_and(|s| s.starts_with(phrase))
        }) {
            assert_eq!(a["rules"][0]["id"], "approve-drafts", "{a}");
            return a["id"].as_str().expect("id").to_owned();
        }
        assert!(
            Instant::now() < deadline,
            "no kernel request for `{phrase}`: {:?}",
            pending()
        );
        thread::sleep(Duration::from_millis(200));
    }
}

fn answer(verb: &str, id: &str) {
    let out = Command::new("carapace")
        .args([verb, id])
        .output()
        .expect("carapace approve/deny");
    assert!(
        out.status.success(),
        "carapace {verb} {id}: {}{}",
        stdout(&out),
        stderr(&out)
    );
}

#[test]
fn approve_mode_refuses_until_a_human_approves_the_retry() {
    let _g = guard();
    let _timeout = WithTimeout::start();

    // Approved: the retry in the same session reads the file; a write is another operation.
    let path = draft("approved.txt");
    let go = "/tmp/approve-go-1";
    let child = read_twice(&path, go);
    let id = request_for(&format!("read of {path}"));
    answer("approve", &id);
    fs::write(go, "").expect("go");
    let out = finish(child);
    let text = stdout(&out);
    assert!(text.contains("first=1"), "first read refused:\n{text}");
    assert!(
        text.contains("draft approved.txt") && text.contains("second=0"),
        "the approved retry reads the file:\n{text}"
    );
    assert!(
        text.contains("write=1"),
        "a write was not approved:\n{text}"
    );
    let err = stderr(&out);
    assert!(err.contains("Permission denied"), "EACCES:\n{err}");
    assert!(
        err.contains(&format!(
            "carapace: blocked read of {path} (rule approve-drafts: Drafts need a human's approval. Waiting for a human to approve it (request {id}"
        )),
        "the message says a human is asked:\n{err}"
    );
    assert!(err.contains("retry the same operation"), "{err}");
    // Another session has no such approval.
    let out = agent(&format!("cat {path}; echo status=$?"));
    assert!(stdout(&out).contains("status=1"), "{}", stdout(&out));

    // Denied: the retry stays refused and is told not to retry.
    let path = draft("denied.txt");
    let go = "/tmp/approve-go-2";
    let child = read_twice(&path, go);
    let id = request_for(&format!("read of {path}"));
    answer("deny", &id);
    fs::write(go, "").expect("go");
    let out = finish(child);
    let text = stdout(&out);
    assert!(
        text.contains("first=1") && text.contains("second=1"),
        "denied: both reads refused:\n{text}"
    );
    assert!(!text.contains("draft denied.txt"), "{text}");
    assert!(
        stderr(&out).contains("denied this operation earlier"),
        "the retry is answered by the denial:\n{}",
        stderr(&out)
    );

    // Expired: nobody answers within the timeout; the retry is refused.
    let path = draft("expired.txt");
    let go = "/tmp/approve-go-3";
    let child = read_twice(&path, go);
    let id = request_for(&format!("read of {path}"));
    let deadline = Instant::now() + Duration::from_secs(TIMEOUT_SECS * 4);
    while pending().iter().any(|a| a["id"] == id.as_str()) {
        assert!(Instant::now() < deadline, "request {id} never expired");
        thread::sleep(Duration::from_millis(500));
    }
    fs::write(go, "").expect("go");
    let out = finish(child);
    let text = stdout(&out);
    assert!(
        text.contains("first=1") && text.contains("second=1"),
        "expired: both reads refused:\n{text}"
    );
    assert!(!text.contains("draft expired.txt"), "{text}");
    let answered = Command::new("carapace")
        .args(["approve", &id])
        .output()
        .expect("carapace approve");
    assert!(
        !answered.status.success(),
        "an expired request cannot be approved any more"
    );
}

/// The pending request of `kind` whose summary names `path`, once filed.
fn request_naming(kind: &str, path: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(a) = pending()
            .into_iter()
            .find(|a| a["kind"] == kind && a["summary"].as_str().is_some_and(|s| s.contains(path)))
        {
            return a["id"].as_str().expect("id").to_owned();
        }
        assert!(
            Instant::now() < deadline,
            "no {kind} request naming {path}: {:?}",
            pending()
        );
        thread::sleep(Duration::from_millis(200));
    }
}

/// A tool call checked at Layer 1 from inside the session (`carapace check --wait`, as the
/// hook does; the daemon knows the session by the caller's cgroup) and approved by a human
/// is the kernel's exception too: the command then opens the file without a second
/// request. A denied call leaves the kernel refusing.
#[test]
fn an_approved_tool_call_is_the_kernel_exception() {
    let _g = guard();
    let (yes, no) = (draft("call-approved.txt"), draft("call-denied.txt"));
    let call = |path: &str| {
        format!(
            "carapace check --wait 120 --json '{{\"tool\":\"Bash\",\"input\":{{\"command\":\"cat {path}\"}}}}' >/dev/null"
        )
    };
    let script = format!(
        "{}; echo check-yes=$?; cat {yes}; echo read-yes=$?; \
         {}; echo check-no=$?; cat {no}; echo read-no=$?",
        call(&yes),
        call(&no)
    );
    let child = session_command(&["bash", "-c", &script], Some(1000))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start agent");
    answer("approve", &request_naming("call", &yes));
    answer("deny", &request_naming("call", &no));
    let out = finish(child);
    let (text, err) = (stdout(&out), stderr(&out));
    assert!(
        text.contains("check-yes=0") && text.contains("draft call-approved.txt"),
        "the approved call's command reads the file:\n{text}"
    );
    assert!(text.contains("read-yes=0"), "{text}");
    assert!(
        !err.contains(&format!("blocked read of {yes}")),
        "the kernel did not refuse the approved call's read:\n{err}"
    );
    assert!(
        !pending()
            .iter()
            .any(|a| a["summary"].as_str().is_some_and(|s| s.contains(&yes))),
        "no second request for the approved call"
    );
    assert!(
        text.contains("check-no=2") && text.contains("read-no=1"),
        "the denied call stays refused in the kernel:\n{text}"
    );
    assert!(!text.contains("draft call-denied.txt"), "{text}");
    assert!(err.contains(&format!("blocked read of {no}")), "{err}");
}

/// Waits for the file `path` (a step the agent's script reached).
fn reached(path: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !Path::new(path).exists() {
        assert!(Instant::now() < deadline, "the agent never reached {path}");
        thread::sleep(Duration::from_millis(100));
    }
}

/// An approval is for the file the path named, not for the name: the agent cannot link or
/// move another draft onto the approved path, and a file moved there later (from outside
/// the session) is refused again and asked about anew.
#[test]
fn an_approval_does_not_cover_another_file_put_at_its_path() {
    let _g = guard();
    let path = draft("keyed.txt");
    let other = draft("keyed-other.txt");
    let swapped = draft("keyed-swapped.txt");
    let (go, ready, go2) = ("/tmp/keyed-go", "/tmp/keyed-ready", "/tmp/keyed-go2");
    for f in [go, ready, go2] {
        let _ = fs::remove_file(f);
    }
    let wait = |f: &str| format!("for _ in $(seq 1200); do [ -e {f} ] && break; sleep 0.1; done");
    let script = format!(
        "cat {path}; echo first=$?; {}; cat {path}; echo second=$?; \
         ln -f {other} {path}; echo ln=$?; mv -f {other} {path}; echo mv=$?; \
         touch {ready}; {}; cat {path}; echo third=$?",
        wait(go),
        wait(go2)
    );
    let child = session_command(&["bash", "-c", &script], Some(1000))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start agent");
    let id = request_for(&format!("read of {path}"));
    answer("approve", &id);
    fs::write(go, "").expect("go");
    reached(ready);
    // Another file takes the path (as an editor's save or another program would).
    fs::rename(&swapped, &path).expect("swap the file");
    fs::write(go2, "").expect("go2");
    let out = finish(child);
    let text = stdout(&out);
    assert!(
        text.contains("first=1") && text.contains("draft keyed.txt") && text.contains("second=0"),
        "the approved retry reads the file:\n{text}"
    );
    assert!(
        text.contains("ln=1") && text.contains("mv=1"),
        "another draft cannot be linked or moved onto the approved path:\n{text}"
    );
    assert!(
        !text.contains("draft keyed-other.txt") && !text.contains("draft keyed-swapped.txt"),
        "no other file is read through the approval:\n{text}"
    );
    assert!(
        text.contains("third=1"),
        "the swapped file is refused:\n{text}"
    );
    // Asked anew, about the file now there (the request goes with the session).
    let err = stderr(&out);
    let asked = err
        .lines()
        .rfind(|l| l.contains(&format!("blocked read of {path}")))
        .unwrap_or_default();
    assert!(
        asked.contains("Waiting for a human") && !asked.contains(&id),
        "a new request for the new file:\n{err}"
    );
}

/// The approval is for the file the kernel refused: a file moved onto the path while the
/// request waits is not what the human approved, and stays refused after the approval.
#[test]
fn an_approval_covers_the_refused_file_not_one_swapped_in_while_it_waits() {
    let _g = guard();
    let path = draft("waiting.txt");
    let swapped = draft("waiting-swapped.txt");
    let (go, ready) = ("/tmp/waiting-go", "/tmp/waiting-ready");
    for f in [go, ready] {
        let _ = fs::remove_file(f);
    }
    let script = format!(
        "cat {path}; echo first=$?; touch {ready}; \
         for _ in $(seq 1200); do [ -e {go} ] && break; sleep 0.1; done; \
         cat {path}; echo second=$?"
    );
    let child = session_command(&["bash", "-c", &script], Some(1000))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start agent");
    let id = request_for(&format!("read of {path}"));
    reached(ready);
    // While the request waits, another file takes the path; then the human approves.
    fs::rename(&swapped, &path).expect("swap the file");
    answer("approve", &id);
    fs::write(go, "").expect("go");
    let out = finish(child);
    let text = stdout(&out);
    assert!(
        text.contains("first=1") && text.contains("second=1"),
        "the swapped-in file is refused after the approval:\n{text}\n{}",
        stderr(&out)
    );
    assert!(
        !text.contains("draft waiting-swapped.txt"),
        "the swapped-in file is not read through the approval:\n{text}"
    );
}

/// Approve mode on an address: a connect is refused and files a request naming the address
/// and port; approving it lets the session's retry connect; a denied port stays refused,
/// and another session has no such approval.
#[test]
fn approve_mode_on_an_address_lets_the_approved_connect_through() {
    let _g = guard();
    let _a = super::listen("127.0.0.77:7777");
    let _b = super::listen("127.0.0.77:7778");
    let go = "/tmp/approve-addr-go";
    let _ = fs::remove_file(go);
    let script = format!(
        "import os, socket, time\n\
         def c(port):\n    s = socket.socket()\n    try:\n        s.connect(('127.0.0.77', port))\n        return 0\n    except OSError as e:\n        return e.errno\n    finally:\n        s.close()\n\
         print('first=%d' % c(7777)); print('other=%d' % c(7778), flush=True)\n\
         for _ in range(1200):\n    if os.path.exists('{go}'): break\n    time.sleep(0.1)\n\
         print('second=%d' % c(7777)); print('denied=%d' % c(7778))\n"
    );
    let child = session_command(&["python3", "-c", &script], Some(1000))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start agent");
    let yes = request_naming("kernel", "127.0.0.77:7777");
    let no = request_naming("kernel", "127.0.0.77:7778");
    answer("approve", &yes);
    answer("deny", &no);
    fs::write(go, "").expect("go");
    let out = finish(child);
    let text = stdout(&out);
    assert!(
        text.contains("first=13") && text.contains("other=13"),
        "refused until approved:\n{text}"
    );
    assert!(
        text.contains("second=0"),
        "the approved retry connects:\n{text}"
    );
    assert!(
        text.contains("denied=13"),
        "the denied port stays refused:\n{text}"
    );
    let err = stderr(&out);
    assert!(
        err.contains(&format!(
            "carapace: blocked network of 127.0.0.77:7777 (rule approve-api: That service needs a human's approval. Waiting for a human to approve it (request {yes}"
        )),
        "the message says a human is asked:\n{err}"
    );
    // Another session has no such approval.
    let out = agent(&super::py_connect("AF_INET", "127.0.0.77", 7777));
    assert_eq!(stdout(&out).trim(), "13", "another session is refused");
}
