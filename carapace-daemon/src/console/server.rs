//! The console's HTTP/1.1 server (hyper): the page, its live feed (server-sent events) and
//! the two state-changing requests, answering an approval and changing the rule file
//! ("allow this from now on").
//!
//! Every connection is traced to the processes holding its client socket before anything
//! is read from it ([`super::peer`]); a connection from inside an agent session, or from a
//! process that cannot be found, gets 403 to every request, login token or not.
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use http_body_util::{combinators::BoxBody, BodyExt as _, Full, Limited, StreamBody};
use hyper::body::{Bytes, Frame, Incoming};
use hyper::header::{self, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::{json, Value};
use tokio::net::TcpListener;
use tokio::sync::{broadcast, mpsc};
use tokio_stream::wrappers::ReceiverStream;

use super::auth::{query_param, Access, Refusal, Visit, CSRF_HEADER};
use super::peer::{self, Verdict};
use super::views;
use crate::api::{self, allow, Daemon, SessionEvent};
use crate::audit::record::{Kind, Record};
use crate::session::approvals::Scope;

type Body = BoxBody<Bytes, Infallible>;

const INDEX_HTML: &str = include_str!("assets/index.html");
const CONSOLE_JS: &str = include_str!("assets/console.js");
const CONSOLE_CSS: &str = include_str!("assets/console.css");

/// Records the timeline starts with.
const TAIL_RECORDS: usize = 2000;
/// Largest answer body read.
const MAX_BODY: usize = 4096;
/// How long after a call the sessions panel is refreshed (a burst gets one refresh).
const SESSIONS_DEBOUNCE: Duration = Duration::from_millis(200);
/// A comment on an idle feed, so that a browser that went away is noticed.
const KEEPALIVE: Duration = Duration::from_secs(20);

/// Serves the console on `listener` until the task is dropped.
#[must_use = "the task runs until aborted; keep or detach its handle"]
pub fn spawn(
    listener: TcpListener,
    daemon: Arc<Daemon>,
    access: Arc<Access>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            let (stream, peer_addr) = match listener.accept().await {
                Ok(s) => s,
                Err(e) => {
                    tracing::warn!("console: cannot accept a connection: {e}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            };
            let (daemon, access) = (Arc::clone(&daemon), Arc::clone(&access));
            tokio::spawn(async move {
                let server = access.addr();
                let d = Arc::clone(&daemon);
                let verdict = tokio::task::spawn_blocking(move || {
                    peer::judge(peer_addr, server, |c| d.sessions.root().contains(c))
                })
                .await
                .unwrap_or_else(|e| Verdict::Unknown(format!("the check failed: {e}")));
                let conn = Arc::new(Conn {
                    daemon,
                    access,
                    verdict,
                });
                match &conn.verdict {
                    Verdict::Outside { .. } => {}
                    Verdict::Agent { pid } => tracing::warn!(
                        pid,
                        "console: a process inside an agent session connected; refused"
                    ),
                    Verdict::Unknown(why) => {
                        tracing::warn!("console: cannot tell who connected ({why}); refused");
                    }
                }
                let service = hyper::service::service_fn(move |req| {
                    let conn = Arc::clone(&conn);
                    async move { Ok::<_, Infallible>(conn.respond(req).await) }
                });
                if let Err(e) = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await
                {
                    tracing::debug!(peer = %peer_addr, "console connection ended: {e}");
                }
            });
        }
    })
}

/// One accepted connection and what is known of its client.
struct Conn {
    daemon: Arc<Daemon>,
    access: Arc<Access>,
    verdict: Verdict,
}

fn full(status: StatusCode, content_type: &str, body: impl Into<Bytes>) -> Response<Body> {
    let mut resp = Response::new(Full::new(body.into()).boxed());
    *resp.status_mut() = status;
    let headers = resp.headers_mut();
    if let Ok(v) = HeaderValue::from_str(content_type) {
        headers.insert(header::CONTENT_TYPE, v);
    }
    secure(headers);
    resp
}

/// Headers every answer carries: nothing cached, no framing (an answer is a click: no
/// clickjacking), nothing loaded from elsewhere, no Referer (the login URL holds a token).
fn secure(headers: &mut hyper::HeaderMap) {
    for (name, value) in [
        (header::CACHE_CONTROL, "no-store"),
        (header::X_FRAME_OPTIONS, "DENY"),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::REFERRER_POLICY, "no-referrer"),
        (
            header::CONTENT_SECURITY_POLICY,
            "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; form-action 'none'; base-uri 'none'",
        ),
    ] {
        headers.insert(name, HeaderValue::from_static(value));
    }
}

fn text(status: StatusCode, message: &str) -> Response<Body> {
    full(
        status,
        "text/plain; charset=utf-8",
        format!("carapace console: {message}\n"),
    )
}

fn json_response(status: StatusCode, value: &Value) -> Response<Body> {
    full(status, "application/json", value.to_string())
}

fn refused(r: Refusal) -> Response<Body> {
    let status = match r {
        Refusal::NoVisit => StatusCode::UNAUTHORIZED,
        Refusal::NoRandomness => StatusCode::INTERNAL_SERVER_ERROR,
        _ => StatusCode::FORBIDDEN,
    };
    text(status, r.message())
}

fn header<'a>(req: &'a Request<Incoming>, name: &str) -> Option<&'a str> {
    req.headers().get(name).and_then(|v| v.to_str().ok())
}

impl Conn {
    fn pid(&self) -> u32 {
        match &self.verdict {
            Verdict::Outside { pids } => pids.first().copied().unwrap_or(0),
            _ => 0,
        }
    }

    async fn respond(&self, req: Request<Incoming>) -> Response<Body> {
        match &self.verdict {
            Verdict::Outside { .. } => {}
            Verdict::Agent { .. } => {
                return text(
                    StatusCode::FORBIDDEN,
                    "refused: this connection comes from a process inside an agent session; \
                     the console is for the user, outside every session",
                )
            }
            Verdict::Unknown(_) => {
                return text(
                    StatusCode::FORBIDDEN,
                    "refused: cannot tell which process opened this connection",
                )
            }
        }
        if !self.access.host_ok(header(&req, "host")) {
            return refused(Refusal::WrongHost);
        }
        let path = req.uri().path().to_owned();
        if req.method() == Method::GET && path == "/login" {
            return self.login(req.uri().query());
        }
        let visit = match self.access.visit(header(&req, "cookie")) {
            Ok(v) => v,
            Err(r) => return refused(r),
        };
        match (req.method().clone(), path.as_str()) {
            (Method::GET, "/") => full(StatusCode::OK, "text/html; charset=utf-8", INDEX_HTML),
            (Method::GET, "/console.js") => {
                full(StatusCode::OK, "text/javascript; charset=utf-8", CONSOLE_JS)
            }
            (Method::GET, "/console.css") => {
                full(StatusCode::OK, "text/css; charset=utf-8", CONSOLE_CSS)
            }
            (Method::GET, "/api/events") => self.events(visit),
            (Method::GET, "/api/verify") => {
                let dir = self.daemon.audit.ledger().map(|l| l.dir().to_owned());
                let v = tokio::task::spawn_blocking(move || views::verification(dir.as_deref()))
                    .await
                    .unwrap_or_else(|e| json!({"ok": false, "problem": e.to_string()}));
                json_response(StatusCode::OK, &v)
            }
            (Method::POST, "/api/answer") => self.answer(req, &visit).await,
            (Method::POST, "/api/allow") => self.allow(req, &visit).await,
            (Method::POST, "/api/record") => self.record(req, &visit).await,
            (
                _,
                "/" | "/console.js" | "/console.css" | "/api/events" | "/api/verify"
                | "/api/answer" | "/api/allow" | "/api/record",
            ) => text(StatusCode::METHOD_NOT_ALLOWED, "method not allowed"),
            _ => text(StatusCode::NOT_FOUND, "no such page"),
        }
    }

    /// Spends the login token and sets the visit's cookie; the address bar then shows `/`
    /// without the token.
    fn login(&self, query: Option<&str>) -> Response<Body> {
        let token = query_param(query, "token").unwrap_or("");
        match self.access.login(token) {
            Ok((cookie, visit)) => {
                tracing::info!(uid = visit.uid, pid = self.pid(), "console: logged in");
                let mut resp = text(StatusCode::SEE_OTHER, "logged in");
                let headers = resp.headers_mut();
                headers.insert(header::LOCATION, HeaderValue::from_static("/"));
                if let Ok(v) = HeaderValue::from_str(&Access::set_cookie(&cookie)) {
                    headers.insert(header::SET_COOKIE, v);
                }
                resp
            }
            Err(r) => refused(r),
        }
    }

    /// `POST /api/answer` `{"id": "ap-…", "answer": "once" | "session" | "deny"}`.
    async fn answer(&self, req: Request<Incoming>, visit: &Visit) -> Response<Body> {
        if let Err(r) =
            self.access
                .check_write(visit, header(&req, CSRF_HEADER), header(&req, "origin"))
        {
            tracing::warn!(
                uid = visit.uid,
                "console: an answer without the CSRF token or from another origin; refused"
            );
            return refused(r);
        }
        let body = match Limited::new(req.into_body(), MAX_BODY).collect().await {
            Ok(b) => b.to_bytes(),
            Err(_) => return text(StatusCode::PAYLOAD_TOO_LARGE, "the answer is too large"),
        };
        let parsed: Option<(String, String)> =
            serde_json::from_slice::<Value>(&body).ok().and_then(|v| {
                Some((
                    v["id"].as_str()?.to_owned(),
                    v["answer"].as_str()?.to_owned(),
                ))
            });
        let Some((id, answer)) = parsed else {
            return text(
                StatusCode::BAD_REQUEST,
                r#"send {"id": "ap-…", "answer": "once" | "session" | "deny"}"#,
            );
        };
        let (approve, scope) = match answer.as_str() {
            "once" => (true, Scope::Once),
            "session" => (true, Scope::Session),
            "deny" => (false, Scope::Session),
            other => {
                return text(
                    StatusCode::BAD_REQUEST,
                    &format!("unknown answer `{other}`: once, session or deny"),
                )
            }
        };
        let peer = views::peer(visit.uid, self.pid());
        let (daemon, who) = (Arc::clone(&self.daemon), peer.clone());
        let answered = tokio::task::spawn_blocking(move || {
            api::sessions::answer(&daemon, &who, &id, approve, "", scope)
        })
        .await;
        match answered {
            Ok(Ok(a)) => {
                self.daemon
                    .audit
                    .note(api::audit::approval_answered(&peer, &a))
                    .await;
                json_response(StatusCode::OK, &views::approval(&a))
            }
            Ok(Err(status)) => {
                let code = match status.code() {
                    tonic::Code::NotFound => StatusCode::NOT_FOUND,
                    tonic::Code::PermissionDenied => StatusCode::FORBIDDEN,
                    tonic::Code::FailedPrecondition => StatusCode::CONFLICT,
                    _ => StatusCode::INTERNAL_SERVER_ERROR,
                };
                text(code, status.message())
            }
            Err(e) => text(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string()),
        }
    }

    /// `POST /api/allow` `{"record": SEQ | "approval": "ap-…", "rule"?: ID, "write": bool,
    /// "confirm"?: bool}`: the rule change that allows a refusal from now on, with its
    /// safety check; written and reloaded with `write` (see `api::allow`). The rule file is
    /// root's: only root (or the daemon's own user) may ask, as for `ReloadRules`.
    async fn allow(&self, req: Request<Incoming>, visit: &Visit) -> Response<Body> {
        if let Err(r) =
            self.access
                .check_write(visit, header(&req, CSRF_HEADER), header(&req, "origin"))
        {
            tracing::warn!(
                uid = visit.uid,
                "console: a rule change without the CSRF token or from another origin; refused"
            );
            return refused(r);
        }
        // SAFETY: geteuid has no preconditions and cannot fail.
        let own = unsafe { libc::geteuid() };
        if visit.uid != 0 && visit.uid != own {
            return text(
                StatusCode::FORBIDDEN,
                "only root can change the rules (open the console with `sudo carapace console`)",
            );
        }
        let body = match Limited::new(req.into_body(), MAX_BODY).collect().await {
            Ok(b) => b.to_bytes(),
            Err(_) => return text(StatusCode::PAYLOAD_TOO_LARGE, "the request is too large"),
        };
        let Ok(v) = serde_json::from_slice::<Value>(&body) else {
            return text(StatusCode::BAD_REQUEST, "send JSON");
        };
        let from = match (v["record"].as_u64(), v["approval"].as_str()) {
            (Some(seq), _) => allow::Origin::Record(seq),
            (None, Some(id)) => allow::Origin::Approval(id.to_owned()),
            (None, None) => {
                return text(
                    StatusCode::BAD_REQUEST,
                    r#"send {"record": SEQ} or {"approval": "ap-…"}, with "write": true to write"#,
                )
            }
        };
        let rule = v["rule"].as_str().map(str::to_owned);
        let write = v["write"].as_bool().unwrap_or(false);
        let confirm = v["confirm"].as_bool().unwrap_or(false);
        let status = |e: &allow::AllowError| match e {
            allow::AllowError::NotFound(_) => StatusCode::NOT_FOUND,
            allow::AllowError::NeedsConfirmation(_) => StatusCode::PRECONDITION_REQUIRED,
            allow::AllowError::Write { .. }
            | allow::AllowError::Read { .. }
            | allow::AllowError::Task(_) => StatusCode::INTERNAL_SERVER_ERROR,
            _ => StatusCode::CONFLICT,
        };
        if write {
            let who = format!("console uid {} (pid {})", visit.uid, self.pid());
            return match allow::apply(&self.daemon, from, rule, confirm, &who).await {
                Ok((offer, outcome)) => {
                    let mut value = offer.to_json();
                    value["written"] = json!(true);
                    value["reload"] = json!({
                        "ok": outcome.ok, "rules": outcome.rules, "kernel_rules": outcome.kernel_rules,
                    });
                    json_response(StatusCode::OK, &value)
                }
                Err(e) => text(status(&e), &e.to_string()),
            };
        }
        let d = Arc::clone(&self.daemon);
        match tokio::task::spawn_blocking(move || allow::offer(&d, &from, rule.as_deref())).await {
            Ok(Ok(offer)) => json_response(StatusCode::OK, &offer.to_json()),
            Ok(Err(e)) => text(status(&e), &e.to_string()),
            Err(e) => text(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string()),
        }
    }

    /// `POST /api/record` `{"session": ID, "write"?: NAME, "force"?: bool}`: the allow-list
    /// proposed from a record session (`api::record::propose`), saved as profile NAME with
    /// `write`. CSRF and origin checked like every answer; this connection is already known
    /// to come from outside every session (`Verdict::Outside`), and saving needs root, as
    /// the profiles are root's.
    async fn record(&self, req: Request<Incoming>, visit: &Visit) -> Response<Body> {
        if let Err(r) =
            self.access
                .check_write(visit, header(&req, CSRF_HEADER), header(&req, "origin"))
        {
            tracing::warn!(
                uid = visit.uid,
                "console: a record request without the CSRF token or from another origin; refused"
            );
            return refused(r);
        }
        let body = match Limited::new(req.into_body(), MAX_BODY).collect().await {
            Ok(b) => b.to_bytes(),
            Err(_) => return text(StatusCode::PAYLOAD_TOO_LARGE, "the request is too large"),
        };
        let Some(request) = serde_json::from_slice::<Value>(&body).ok().and_then(|v| {
            Some(api::proto::RecordProposeRequest {
                session_id: v["session"].as_str()?.to_owned(),
                write_name: v["write"].as_str().unwrap_or_default().to_owned(),
                force: v["force"].as_bool().unwrap_or(false),
            })
        }) else {
            return text(
                StatusCode::BAD_REQUEST,
                r#"send {"session": "s-…"}, with "write": NAME to save it"#,
            );
        };
        let name = request.write_name.clone();
        let (daemon, peer) = (Arc::clone(&self.daemon), views::peer(visit.uid, self.pid()));
        match tokio::task::spawn_blocking(move || api::record::propose(&daemon, &peer, &request))
            .await
        {
            Ok(Ok(reply)) => json_response(
                StatusCode::OK,
                &json!({
                    "text": reply.text,
                    "written": reply.written,
                    "fixtures_checked": reply.fixtures_checked,
                    "roots": reply.roots,
                }),
            ),
            // The page's words for the CLI's `--force`.
            Ok(Err(status)) if status.code() == tonic::Code::AlreadyExists => text(
                StatusCode::CONFLICT,
                &format!(
                    "a profile named {name} exists; tick \"replace an existing profile\" to \
                     replace it"
                ),
            ),
            Ok(Err(status)) => {
                let code = match status.code() {
                    tonic::Code::NotFound => StatusCode::NOT_FOUND,
                    tonic::Code::PermissionDenied => StatusCode::FORBIDDEN,
                    tonic::Code::InvalidArgument => StatusCode::BAD_REQUEST,
                    tonic::Code::FailedPrecondition => StatusCode::CONFLICT,
                    _ => StatusCode::INTERNAL_SERVER_ERROR,
                };
                text(code, status.message())
            }
            Err(e) => text(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string()),
        }
    }

    /// The live feed: a `snapshot` event, then `record`, `approval`, `sessions`,
    /// `recordings` and `rules` events as they happen.
    fn events(&self, visit: Visit) -> Response<Body> {
        let (tx, rx) = mpsc::channel::<Result<Frame<Bytes>, Infallible>>(256);
        tokio::spawn(feed(Arc::clone(&self.daemon), visit, self.pid(), tx));
        let mut resp = Response::new(StreamBody::new(ReceiverStream::new(rx)).boxed());
        let headers = resp.headers_mut();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/event-stream"),
        );
        secure(headers);
        resp
    }
}

async fn sleep_until(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// One server-sent event's text (`data` is compact JSON: one line).
fn event_text(event: &str, data: &Value) -> String {
    format!("event: {event}\ndata: {data}\n\n")
}

/// One server-sent event.
fn frame(event: &str, data: &Value) -> Frame<Bytes> {
    Frame::data(Bytes::from(event_text(event, data)))
}

/// Whether a record changes what the sessions panel shows.
fn touches_sessions(r: &Record, known: &std::collections::BTreeSet<String>) -> bool {
    matches!(
        r.event.kind,
        Kind::SessionCreated
            | Kind::SessionEnded
            | Kind::SessionRulesChanged
            | Kind::ApprovalAnswered
    ) || r.event.session.as_ref().is_some_and(|s| !known.contains(s))
        || (r.event.kind == Kind::Evaluate && r.event.decision.as_deref() != Some("block"))
}

/// Whether a record starts or ends a session, which changes the list of records.
fn touches_recordings(r: &Record) -> bool {
    matches!(r.event.kind, Kind::SessionCreated | Kind::SessionEnded)
}

struct Snapshot {
    sessions: Value,
    visible: std::collections::BTreeSet<String>,
    /// The record sessions, when asked for (they are read from disk).
    recordings: Option<Value>,
}

/// The `sessions` event, after the `recordings` event when they were read.
fn sessions_frame(snap: &Snapshot) -> Frame<Bytes> {
    let mut text = snap
        .recordings
        .as_ref()
        .map(|r| event_text("recordings", r))
        .unwrap_or_default();
    text.push_str(&event_text("sessions", &snap.sessions));
    Frame::data(Bytes::from(text))
}

fn sessions_now(daemon: &Daemon, uid: u32, pid: u32, recordings: bool) -> Snapshot {
    let peer = views::peer(uid, pid);
    Snapshot {
        sessions: views::sessions(daemon, &peer).unwrap_or_else(|_| json!([])),
        visible: views::session_ids(daemon, &peer),
        recordings: recordings.then(|| views::recordings(daemon, uid)),
    }
}

/// Sends one browser its feed until it goes away or the daemon stops. Subscribes before
/// the snapshot is taken, so nothing falls in between (the page drops records it already
/// has, by seq).
async fn feed(
    daemon: Arc<Daemon>,
    visit: Visit,
    pid: u32,
    tx: mpsc::Sender<Result<Frame<Bytes>, Infallible>>,
) {
    let uid = visit.uid;
    let mut records = daemon.audit.ledger().map(|l| l.subscribe());
    let mut approvals = daemon.approvals.subscribe();
    let mut stops = daemon.events.subscribe();
    let d = Arc::clone(&daemon);
    let snapshot = tokio::task::spawn_blocking(move || {
        let snap = sessions_now(&d, uid, pid, true);
        let tail: Vec<Record> = d
            .audit
            .ledger()
            .map(|l| views::tail(l.dir(), TAIL_RECORDS))
            .unwrap_or_default()
            .into_iter()
            .filter(|r| views::may_see_record(uid, &snap.visible, r))
            .collect();
        let value = json!({
            "uid": uid,
            "csrf": visit.csrf,
            "sessions": snap.sessions,
            "recordings": snap.recordings,
            "approvals": views::approvals(&d, uid).unwrap_or_else(|_| json!([])),
            "rules": views::rules(&d.rules()),
            "records": tail,
            "kernel": d.sessions.kernel_status().unwrap_or_else(|| d.kernel_unavailable.clone().unwrap_or_default()),
        });
        (value, snap.visible)
    })
    .await;
    let Ok((value, mut visible)) = snapshot else {
        return;
    };
    if tx.send(Ok(frame("snapshot", &value))).await.is_err() {
        return;
    }
    let mut keepalive = tokio::time::interval(KEEPALIVE);
    keepalive.tick().await;
    // Calls switch session rules on as they pass: the sessions panel is refreshed once a
    // burst of them is over rather than once per call.
    let mut refresh_at: Option<tokio::time::Instant> = None;
    // Whether that refresh lists the record sessions again (a session started or ended).
    let mut recordings_due = false;
    loop {
        let next_record = async {
            match records.as_mut() {
                Some(r) => r.recv().await,
                None => std::future::pending().await,
            }
        };
        let out = tokio::select! {
            () = tx.closed() => return,
            () = sleep_until(refresh_at), if refresh_at.is_some() => {
                refresh_at = None;
                let (d, with_recordings) = (Arc::clone(&daemon), std::mem::take(&mut recordings_due));
                let Ok(snap) = tokio::task::spawn_blocking(move || sessions_now(&d, uid, pid, with_recordings)).await else {
                    continue;
                };
                let out = sessions_frame(&snap);
                visible = snap.visible;
                out
            }
            _ = keepalive.tick() => Frame::data(Bytes::from_static(b": keepalive\n\n")),
            e = stops.recv() => match e {
                Ok(SessionEvent::Shutdown) | Err(broadcast::error::RecvError::Closed) => return,
                _ => continue,
            },
            a = approvals.recv() => match a {
                Ok(a) if views::may_see(uid, &a) => frame("approval", &views::approval(&a)),
                Ok(_) => continue,
                Err(broadcast::error::RecvError::Lagged(_)) => frame("approvals", &views::approvals(&daemon, uid).unwrap_or_else(|_| json!([]))),
                Err(broadcast::error::RecvError::Closed) => return,
            },
            r = next_record => match r {
                Ok(r) => {
                    if touches_sessions(&r, &visible) && refresh_at.is_none() {
                        refresh_at = Some(tokio::time::Instant::now() + SESSIONS_DEBOUNCE);
                    }
                    recordings_due |= touches_recordings(&r);
                    // A record of a session the page does not know yet: its owner is
                    // learnt with the refresh; until then only root sees it.
                    if r.event.kind == Kind::RulesReload
                        && tx.send(Ok(frame("rules", &views::rules(&daemon.rules())))).await.is_err()
                    {
                        return;
                    }
                    if !views::may_see_record(uid, &visible, &r) {
                        continue;
                    }
                    frame("record", &serde_json::to_value(&*r).unwrap_or(Value::Null))
                }
                Err(broadcast::error::RecvError::Lagged(n)) => frame("lagged", &json!({"missed": n})),
                Err(broadcast::error::RecvError::Closed) => {
                    records = None;
                    continue;
                }
            },
        };
        if tx.send(Ok(out)).await.is_err() {
            return;
        }
    }
}

/// The console's address in `SocketAddr` form, for logs.
#[must_use]
pub fn url(addr: SocketAddr) -> String {
    format!("http://{addr}/")
}
