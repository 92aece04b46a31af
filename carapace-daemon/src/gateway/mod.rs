//! The model-API gateway (`carapaced --gateway 127.0.0.1:PORT`): an HTTP proxy between an
//! agent and its model provider that gives any agent Layers 0 and 1 with no hook.
//!
//! - Layer 0: a request whose conversation holds a call the rules block is answered with the
//!   API's own error shape ("bad agent detected: …") and never reaches the provider.
//! - Layer 1: each tool call in the answer is checked before the agent sees it; a refused
//!   one becomes a text block saying why (in streams too, with a valid event sequence).
//!
//! Requests are forwarded with the client's headers (credentials included) untouched, except
//! hop-by-hop headers, `Host`, and `Accept-Encoding` on checked routes (the answer must be
//! readable to be checked). Nothing logged holds a header or a body: method, path, status
//! and decision only.
pub mod anthropic;
pub mod gemini;
pub mod history;
pub mod openai;
pub mod peer;
pub mod refusal;
pub mod seen;
pub mod sse;

use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;

use futures_util::FutureExt as _;

use http_body_util::{combinators::UnsyncBoxBody, BodyExt as _, Full, Limited, StreamBody};
use hyper::body::{Bytes, Frame, Incoming};
use hyper::header::{HeaderMap, HeaderName, HeaderValue};
use hyper::{Method, Request, Response, StatusCode, Uri};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo};
use serde_json::value::RawValue;
use serde_json::Value;
use tokio::net::TcpListener;

use history::Conversation;

use crate::metrics::GatewayDecision;
use refusal::{Client as GatewayClient, Gate, PendingCall, Verdict};

/// The providers' public endpoints, the default upstreams.
pub const ANTHROPIC_UPSTREAM: &str = "https://api.anthropic.com";
pub const OPENAI_UPSTREAM: &str = "https://api.openai.com";
pub const GEMINI_UPSTREAM: &str = "https://generativelanguage.googleapis.com";

/// Largest request or non-streamed answer handled (a long conversation is a few MiB).
pub const MAX_BODY: usize = crate::api::evaluate::MAX_INPUT;

type BoxError = Box<dyn std::error::Error + Send + Sync>;
type Body = UnsyncBoxBody<Bytes, BoxError>;
type HttpsClient = Client<hyper_rustls::HttpsConnector<HttpConnector>, Full<Bytes>>;

/// Where each provider's requests go: scheme, authority and an optional path prefix to
/// which the request's own path is appended.
#[derive(Clone, Debug)]
pub struct Upstream {
    scheme: String,
    authority: String,
    prefix: String,
}

/// An upstream URL the gateway cannot use, or a request path it cannot append.
#[derive(Debug, thiserror::Error)]
pub enum UpstreamError {
    #[error("`{url}` is not a URL ({source})")]
    NotAUrl {
        url: String,
        #[source]
        source: hyper::http::uri::InvalidUri,
    },
    #[error("`{0}` must start with https:// (or http:// for a local server)")]
    Scheme(String),
    #[error("`{0}` has no host")]
    NoHost(String),
    #[error("cannot build the upstream URL ({0})")]
    Join(#[source] hyper::http::uri::InvalidUri),
}

impl Upstream {
    pub fn parse(url: &str) -> Result<Self, UpstreamError> {
        let uri: Uri = url.parse().map_err(|source| UpstreamError::NotAUrl {
            url: url.to_owned(),
            source,
        })?;
        let scheme = uri.scheme_str().unwrap_or_default();
        if scheme != "http" && scheme != "https" {
            return Err(UpstreamError::Scheme(url.to_owned()));
        }
        let authority = uri
            .authority()
            .ok_or_else(|| UpstreamError::NoHost(url.to_owned()))?
            .to_string();
        Ok(Self {
            scheme: scheme.to_owned(),
            authority,
            prefix: uri.path().trim_end_matches('/').to_owned(),
        })
    }

    fn join(&self, path_and_query: &str) -> Result<Uri, UpstreamError> {
        format!(
            "{}://{}{}{path_and_query}",
            self.scheme, self.authority, self.prefix
        )
        .parse()
        .map_err(UpstreamError::Join)
    }
}

/// The gateway's settings.
#[derive(Clone, Debug)]
pub struct Config {
    pub anthropic: Upstream,
    pub openai: Upstream,
    pub gemini: Upstream,
}

/// What each connection's requests share.
struct State {
    config: Config,
    gate: Gate,
    client: HttpsClient,
}

/// The provider APIs whose answers are checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Api {
    AnthropicMessages,
    ChatCompletions,
    Responses,
    /// `…/models/MODEL:generateContent` and `:streamGenerateContent`.
    GeminiContent,
}

impl Api {
    fn of(method: &Method, path: &str) -> Option<Self> {
        if method != Method::POST {
            return None;
        }
        match path.trim_end_matches('/') {
            "/v1/messages" => Some(Self::AnthropicMessages),
            "/v1/chat/completions" => Some(Self::ChatCompletions),
            "/v1/responses" => Some(Self::Responses),
            p if is_gemini_content(p) => Some(Self::GeminiContent),
            _ => None,
        }
    }

    fn error(self, status: StatusCode, kind: &str, message: &str) -> Response<Body> {
        let body = match self {
            Self::AnthropicMessages => anthropic::error_body(kind, message),
            Self::ChatCompletions | Self::Responses => openai::error_body(kind, message),
            Self::GeminiContent => gemini::error_body(status.as_u16(), kind, message),
        };
        json_response(status, &body)
    }

    fn history(self, request: &Value) -> Option<&Value> {
        match self {
            Self::AnthropicMessages => anthropic::history(request),
            Self::ChatCompletions => openai::chat_history(request),
            Self::Responses => openai::responses_history(request),
            Self::GeminiContent => gemini::history(request),
        }
    }

    /// The conversation of a request body, read without building the rest of the request
    /// (a coding agent's system prompt and tool definitions are tens of KiB, sent again on
    /// every turn): the other fields are only checked to be JSON. A body the narrow reading
    /// refuses (not an object, the field given twice) is read whole, as before, so the
    /// field judged is the one a provider's parser keeps (the last). A `null` conversation
    /// is no conversation.
    fn read_history(self, body: &[u8]) -> Result<Option<Conversation<'_>>, serde_json::Error> {
        // Serde reads a struct from an array too (fields by position): objects only.
        let object = body.trim_ascii_start().first() == Some(&b'{');
        let narrow = match self {
            _ if !object => Err(serde::de::Error::custom("not an object")),
            Self::AnthropicMessages | Self::ChatCompletions => {
                serde_json::from_slice::<Messages<'_>>(body).map(|r| r.messages)
            }
            Self::Responses => serde_json::from_slice::<Input<'_>>(body).map(|r| r.input),
            Self::GeminiContent => serde_json::from_slice::<Contents<'_>>(body).map(|r| r.contents),
        };
        if let Ok(history) = narrow {
            let Some(raw) = history else { return Ok(None) };
            // A list is kept as its items' bytes, each read only if not found clean before.
            if let Ok(items) = serde_json::from_str::<Vec<&RawValue>>(raw.get()) {
                return Ok(Some(Conversation::Items(items)));
            }
            let value: Value = serde_json::from_str(raw.get())?;
            return Ok((!value.is_null() && self.history_shape(&value))
                .then_some(Conversation::Whole(value)));
        }
        let request = serde_json::from_slice::<Value>(body)?;
        Ok(self.history(&request).cloned().map(Conversation::Whole))
    }

    /// Whether a conversation field's value is one [`Api::history`] takes.
    fn history_shape(self, value: &Value) -> bool {
        match self {
            Self::Responses => value.is_array(),
            Self::AnthropicMessages | Self::ChatCompletions | Self::GeminiContent => true,
        }
    }

    fn message_calls(self, message: &Value) -> Vec<PendingCall> {
        match self {
            Self::AnthropicMessages => anthropic::message_calls(message),
            Self::ChatCompletions => openai::chat_calls(message),
            Self::Responses => openai::response_calls(message),
            Self::GeminiContent => gemini::calls(message),
        }
    }

    fn rewrite_message(self, message: &mut Value, verdicts: &[(PendingCall, Verdict)]) -> bool {
        match self {
            Self::AnthropicMessages => anthropic::rewrite_message(message, verdicts),
            Self::ChatCompletions => openai::rewrite_chat(message, verdicts),
            Self::Responses => openai::rewrite_response(message, verdicts),
            Self::GeminiContent => gemini::rewrite(message, verdicts),
        }
    }

    fn stream_filter(self) -> Box<dyn StreamFilter> {
        match self {
            Self::AnthropicMessages => Box::<anthropic::Stream>::default(),
            Self::ChatCompletions => Box::<openai::ChatStream>::default(),
            Self::Responses => Box::<openai::ResponsesStream>::default(),
            Self::GeminiContent => Box::<gemini::Stream>::default(),
        }
    }
}

/// The conversation field of each API's request body, as its bytes; the other fields are
/// skipped.
#[derive(serde::Deserialize)]
struct Messages<'a> {
    #[serde(borrow)]
    messages: Option<&'a RawValue>,
}

#[derive(serde::Deserialize)]
struct Input<'a> {
    #[serde(borrow)]
    input: Option<&'a RawValue>,
}

#[derive(serde::Deserialize)]
struct Contents<'a> {
    #[serde(borrow)]
    contents: Option<&'a RawValue>,
}

/// A Gemini content method: `/v1beta/models/MODEL:generateContent` and
/// `:streamGenerateContent`, under any version and resource (`tunedModels/…`, a Vertex
/// `projects/…/publishers/google/models/…`): whatever names the model, the answer holds
/// the calls.
fn is_gemini_content(path: &str) -> bool {
    path.rsplit('/')
        .next()
        .and_then(|last| last.rsplit_once(':'))
        .is_some_and(|(name, method)| {
            !name.is_empty() && matches!(method, "generateContent" | "streamGenerateContent")
        })
}

/// What a stream filter makes of one event.
pub enum Step {
    /// Send these bytes on now (empty: the event is held back).
    Emit(Bytes),
    /// These calls are complete: judge them, then [`StreamFilter::settle`].
    Judge(Vec<PendingCall>),
}

/// A provider's event-stream rewriting, fed one event at a time.
pub trait StreamFilter: Send {
    fn on_event(&mut self, event: sse::Event) -> Step;
    /// The bytes that replace the judged calls' held events.
    fn settle(&mut self, verdicts: Vec<(PendingCall, Verdict)>) -> Bytes;
    /// The end of the stream: anything still held is dropped, never passed on unchecked.
    fn finish(&mut self) -> Bytes;
}

/// The HTTPS client for the upstreams, trusting the system's roots.
fn client() -> HttpsClient {
    let builder = hyper_rustls::HttpsConnectorBuilder::new()
        .with_native_roots()
        .unwrap_or_else(|e| {
            tracing::warn!(
                "gateway: no trusted root certificates ({e}); https upstreams will fail"
            );
            let config = rustls::ClientConfig::builder()
                .with_root_certificates(rustls::RootCertStore::empty())
                .with_no_client_auth();
            hyper_rustls::HttpsConnectorBuilder::new().with_tls_config(config)
        });
    // Streams are many small writes: without TCP_NODELAY each one can wait out a delayed
    // ACK (40 ms on Linux), which the latency benchmark showed on every answer.
    let mut http = HttpConnector::new();
    http.set_nodelay(true);
    http.enforce_http(false);
    let connector = builder.https_or_http().enable_http1().wrap_connector(http);
    Client::builder(TokioExecutor::new()).build(connector)
}

/// Serves the gateway on `listener` until `shutdown` resolves.
pub async fn serve(
    listener: TcpListener,
    config: Config,
    gate: Gate,
    shutdown: impl Future<Output = ()>,
) {
    let state = Arc::new(State {
        config,
        gate,
        client: client(),
    });
    tokio::pin!(shutdown);
    loop {
        let (stream, client_addr) = tokio::select! {
            () = &mut shutdown => return,
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    tracing::warn!("gateway: accept failed: {e}");
                    continue;
                }
            },
        };
        let Ok(server_addr) = stream.local_addr() else {
            continue;
        };
        // See `client`: small writes must not wait for ACKs.
        let _ = stream.set_nodelay(true);
        let state = Arc::clone(&state);
        tokio::spawn(async move {
            // Found once a connection: the client's socket, and so its owner and session,
            // never changes.
            let peer = peer::Client::find(client_addr, server_addr);
            let ctx = Arc::new(state.gate.client(peer).await);
            let service = hyper::service::service_fn(move |req| {
                let state = Arc::clone(&state);
                let ctx = Arc::clone(&ctx);
                async move { Ok::<_, Infallible>(handle(&state, &ctx, req).await) }
            });
            // A client that hangs up mid-answer is not the gateway's failure.
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

/// Headers that belong to one connection, not to the request (RFC 9110, 7.6.1).
const HOP_BY_HOP: &[&str] = &[
    "connection",
    "keep-alive",
    "proxy-connection",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
];

fn copy_headers(from: &HeaderMap, to: &mut HeaderMap, skip: &[&str]) {
    for (name, value) in from {
        let n = name.as_str();
        if !HOP_BY_HOP.contains(&n) && !skip.contains(&n) {
            to.append(name.clone(), value.clone());
        }
    }
}

fn path_only(path_and_query: &str) -> &str {
    path_and_query
        .split_once('?')
        .map_or(path_and_query, |(p, _)| p)
}

async fn handle(state: &State, ctx: &GatewayClient, req: Request<Incoming>) -> Response<Body> {
    let method = req.method().clone();
    let pq = req
        .uri()
        .path_and_query()
        .map_or_else(|| "/".to_owned(), ToString::to_string);
    let path = path_only(&pq).to_owned();
    let api = Api::of(&method, &path);
    let (response, decision) = proxy(state, ctx, req, api).await;
    if let Some(daemon) = state.gate.daemon() {
        daemon.metrics.gateway_request(decision);
    }
    // The query is left out: some APIs take keys there. An answer passed on as it came is
    // counted in the metrics and logged only at debug level: a line per streamed turn was a
    // measurable part of the gateway's added latency and says nothing the counters do not.
    let status = response.status().as_u16();
    if matches!(
        decision,
        GatewayDecision::Checked | GatewayDecision::CheckedStream | GatewayDecision::Forwarded
    ) {
        tracing::debug!(method = %method, path = %path, status, decision = decision.name(), "gateway");
    } else {
        tracing::info!(method = %method, path = %path, status, decision = decision.name(), "gateway");
    }
    response
}

/// Forwards one request; returns the answer and the decision to log.
async fn proxy(
    state: &State,
    ctx: &GatewayClient,
    req: Request<Incoming>,
    api: Option<Api>,
) -> (Response<Body>, GatewayDecision) {
    let anthropic_like = req.headers().contains_key("anthropic-version")
        || req.uri().path().starts_with("/v1/messages");
    let gemini_like = api == Some(Api::GeminiContent)
        || req.headers().contains_key("x-goog-api-key")
        || req.uri().path().starts_with("/v1beta/");
    let upstream = if anthropic_like {
        &state.config.anthropic
    } else if gemini_like {
        &state.config.gemini
    } else {
        &state.config.openai
    };
    let error = |status: StatusCode, kind: &str, message: &str| match api {
        Some(api) => api.error(status, kind, message),
        None if anthropic_like => json_response(status, &anthropic::error_body(kind, message)),
        None if gemini_like => {
            json_response(status, &gemini::error_body(status.as_u16(), kind, message))
        }
        None => json_response(status, &openai::error_body(kind, message)),
    };
    let (parts, body) = req.into_parts();
    let body = match Limited::new(body, MAX_BODY).collect().await {
        Ok(b) => b.to_bytes(),
        Err(e) => {
            return (
                error(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    "request_too_large",
                    &format!("Carapace could not read the request ({e}); the limit is 32 MiB"),
                ),
                GatewayDecision::Refused,
            )
        }
    };
    if let Some(api) = api {
        let Ok(history) = api.read_history(&body) else {
            return (
                error(
                    StatusCode::BAD_REQUEST,
                    "invalid_request_error",
                    "Carapace cannot read the request body as JSON",
                ),
                GatewayDecision::Refused,
            );
        };
        if let Some(transcript) = &history {
            if let Some(message) = state.gate.history(ctx, transcript).await {
                return (
                    error(StatusCode::FORBIDDEN, "permission_error", &message),
                    GatewayDecision::BadAgent,
                );
            }
        }
    }
    let pq = parts
        .uri
        .path_and_query()
        .map_or_else(|| "/".to_owned(), ToString::to_string);
    let uri = match upstream.join(&pq) {
        Ok(u) => u,
        Err(e) => {
            let text = e.to_string();
            return (
                error(StatusCode::BAD_GATEWAY, "api_error", &text),
                GatewayDecision::Error,
            );
        }
    };
    let mut forward = Request::new(Full::new(body));
    *forward.method_mut() = parts.method;
    *forward.uri_mut() = uri;
    let skip: &[&str] = if api.is_some() {
        &["host", "accept-encoding"]
    } else {
        &["host"]
    };
    copy_headers(&parts.headers, forward.headers_mut(), skip);
    let answer = match state.client.request(forward).await {
        Ok(a) => a,
        Err(e) => {
            let mut cause: &dyn std::error::Error = &e;
            while let Some(next) = cause.source() {
                cause = next;
            }
            return (
                error(
                    StatusCode::BAD_GATEWAY,
                    "api_error",
                    &format!("Carapace's gateway cannot reach the upstream ({cause})"),
                ),
                GatewayDecision::Error,
            );
        }
    };
    check_answer(state, ctx, api, answer).await
}

/// Layer 1 over the upstream's answer to a checked route; anything else passes as it is.
async fn check_answer(
    state: &State,
    ctx: &GatewayClient,
    api: Option<Api>,
    answer: Response<Incoming>,
) -> (Response<Body>, GatewayDecision) {
    let (parts, body) = answer.into_parts();
    let mut response = Response::new(Body::default());
    *response.status_mut() = parts.status;
    let Some(api) = api.filter(|_| parts.status.is_success()) else {
        copy_headers(&parts.headers, response.headers_mut(), &[]);
        *response.body_mut() = body.map_err(BoxError::from).boxed_unsync();
        return (response, GatewayDecision::Forwarded);
    };
    let encoded = parts
        .headers
        .get(hyper::header::CONTENT_ENCODING)
        .is_some_and(|v| v.as_bytes() != b"identity");
    if encoded {
        return (
            api.error(
                StatusCode::BAD_GATEWAY,
                "api_error",
                "the upstream sent a compressed answer, which Carapace cannot check",
            ),
            GatewayDecision::Refused,
        );
    }
    let streaming = parts
        .headers
        .get(hyper::header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"text/event-stream"));
    if streaming {
        copy_headers(&parts.headers, response.headers_mut(), &["content-length"]);
        *response.body_mut() =
            filter_stream(body, api.stream_filter(), state.gate.clone(), ctx.clone());
        return (response, GatewayDecision::CheckedStream);
    }
    let bytes = match Limited::new(body, MAX_BODY).collect().await {
        Ok(b) => b.to_bytes(),
        Err(e) => {
            return (
                api.error(
                    StatusCode::BAD_GATEWAY,
                    "api_error",
                    &format!("Carapace could not read the upstream's answer ({e})"),
                ),
                GatewayDecision::Error,
            )
        }
    };
    let (bytes, decision) = check_message(state, ctx, api, bytes).await;
    copy_headers(&parts.headers, response.headers_mut(), &["content-length"]);
    response.headers_mut().insert(
        hyper::header::CONTENT_LENGTH,
        HeaderValue::from(bytes.len()),
    );
    *response.body_mut() = full(bytes);
    (response, decision)
}

/// Layer 1 over a whole (non-streamed) answer: the original bytes when every call passes.
async fn check_message(
    state: &State,
    ctx: &GatewayClient,
    api: Api,
    bytes: Bytes,
) -> (Bytes, GatewayDecision) {
    let Ok(mut message) = serde_json::from_slice::<Value>(&bytes) else {
        // Not JSON: no call a client could read either.
        return (bytes, GatewayDecision::Checked);
    };
    let calls = api.message_calls(&message);
    if calls.is_empty() {
        return (bytes, GatewayDecision::Checked);
    }
    let verdicts = judge(&state.gate, ctx, calls).await;
    if api.rewrite_message(&mut message, &verdicts) {
        (
            Bytes::from(message.to_string()),
            GatewayDecision::RefusedToolCall,
        )
    } else {
        (bytes, GatewayDecision::Checked)
    }
}

async fn judge(
    gate: &Gate,
    ctx: &GatewayClient,
    calls: Vec<PendingCall>,
) -> Vec<(PendingCall, Verdict)> {
    let mut verdicts = Vec::with_capacity(calls.len());
    for call in calls {
        let verdict = gate.tool_call(ctx, &call).await;
        verdicts.push((call, verdict));
    }
    verdicts
}

/// Runs `filter` over the upstream's event stream as it arrives. The stream is polled by the
/// connection that sends the answer, so each chunk goes from the upstream to the client on
/// one task (no hand-over per chunk), and a slow client slows the upstream read.
fn filter_stream<B>(
    upstream: B,
    filter: Box<dyn StreamFilter>,
    gate: Gate,
    ctx: GatewayClient,
) -> Body
where
    B: hyper::body::Body<Data = Bytes> + Send + Unpin + 'static,
    B::Error: Into<BoxError> + Send,
{
    let relay = Relay {
        upstream,
        filter,
        gate,
        ctx,
        splitter: sse::Splitter::default(),
    };
    let frames = futures_util::stream::unfold(Some(relay), |relay| async move {
        let mut relay = relay?;
        match relay.next().await {
            Ok(Some((bytes, true))) => Some((Ok(Frame::data(bytes)), None)),
            Ok(Some((bytes, false))) => Some((Ok(Frame::data(bytes)), Some(relay))),
            Ok(None) => None,
            Err(e) => Some((Err(e), None)),
        }
    });
    StreamBody::new(frames).boxed_unsync()
}

/// Bytes of an answer gathered into one write to the client at most.
const COALESCE_LIMIT: usize = 64 << 10;

/// The state of one filtered answer.
struct Relay<B> {
    upstream: B,
    filter: Box<dyn StreamFilter>,
    gate: Gate,
    ctx: GatewayClient,
    splitter: sse::Splitter,
}

impl<B> Relay<B>
where
    B: hyper::body::Body<Data = Bytes> + Unpin,
    B::Error: Into<BoxError>,
{
    /// The next bytes for the client, and whether they are the last; `None` when the answer
    /// ended with nothing more to send. What the upstream has already sent goes out in one
    /// piece (it arrives in one read as many small chunks), what it has not is not waited for.
    async fn next(&mut self) -> Result<Option<(Bytes, bool)>, BoxError> {
        let mut out = Vec::new();
        loop {
            let frame = if out.is_empty() {
                self.upstream.frame().await
            } else if out.len() >= COALESCE_LIMIT {
                return Ok(Some((Bytes::from(out), false)));
            } else {
                match self.upstream.frame().now_or_never() {
                    Some(frame) => frame,
                    None => return Ok(Some((Bytes::from(out), false))),
                }
            };
            let (events, end) = match frame {
                Some(Ok(frame)) => match frame.into_data() {
                    Ok(data) => (self.splitter.push(&data)?, false),
                    Err(_) => continue,
                },
                Some(Err(e)) => return Err(e.into()),
                None => (self.splitter.finish().into_iter().collect(), true),
            };
            for event in events {
                match self.filter.on_event(event) {
                    Step::Emit(bytes) => out.extend_from_slice(&bytes),
                    Step::Judge(calls) => {
                        let verdicts = judge(&self.gate, &self.ctx, calls).await;
                        out.extend_from_slice(&self.filter.settle(verdicts));
                    }
                }
            }
            if end {
                out.extend_from_slice(&self.filter.finish());
                return Ok((!out.is_empty()).then(|| (Bytes::from(out), true)));
            }
        }
    }
}

fn full(bytes: Bytes) -> Body {
    Full::new(bytes)
        .map_err(|never| match never {})
        .boxed_unsync()
}

fn json_response(status: StatusCode, body: &Value) -> Response<Body> {
    let mut response = Response::new(full(Bytes::from(body.to_string())));
    *response.status_mut() = status;
    response.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    // Tells the agent's user that this answer came from Carapace, not from the provider.
    response.headers_mut().insert(
        HeaderName::from_static("x-carapace"),
        HeaderValue::from_static("gateway"),
    );
    response
}

#[cfg(test)]
mod tests;
