//! The HTTP plumbing the loopback API servers share: a listener on `127.0.0.1:0`, a thread
//! with its own Tokio runtime serving HTTP/1.1 (so synchronous tests can use it next to
//! `std::process`), each request read whole before the handler sees it, and a stop when
//! dropped.
use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use http_body_util::{combinators::BoxBody, BodyExt as _, Full, StreamBody};
use hyper::body::{Bytes, Frame, Incoming};
use hyper::header::HeaderMap;
use hyper::{Request, Response};

/// The body type of every loopback answer (whole or streamed).
pub type Body = BoxBody<Bytes, Infallible>;

/// A request as the handler sees it: read whole.
#[derive(Clone, Debug)]
pub struct Received {
    pub method: String,
    /// Path and query, e.g. `/v1/messages?beta=true`.
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Received {
    /// The body as JSON, `None` when it is not JSON.
    #[must_use]
    pub fn json(&self) -> Option<serde_json::Value> {
        serde_json::from_str(&self.body).ok()
    }

    /// The path without its query.
    #[must_use]
    pub fn route(&self) -> &str {
        self.path.split_once('?').map_or(&self.path, |(p, _)| p)
    }
}

/// Headers as `(name, value)` pairs, values decoded lossily.
#[must_use]
pub fn header_pairs(headers: &HeaderMap) -> Vec<(String, String)> {
    headers
        .iter()
        .map(|(k, v)| {
            (
                k.to_string(),
                String::from_utf8_lossy(v.as_bytes()).into_owned(),
            )
        })
        .collect()
}

/// A running server; stops when dropped.
pub struct Loopback {
    addr: SocketAddr,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Loopback {
    /// Serves every request with `handler` on a thread named `name`.
    #[must_use]
    pub fn start<H, F>(name: &str, handler: H) -> Self
    where
        H: Fn(Received) -> F + Send + Sync + 'static,
        F: Future<Output = Response<Body>> + Send + 'static,
    {
        let listener = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap_or_else(|e| panic!("cannot bind a loopback port: {e}"));
        let addr = listener
            .local_addr()
            .unwrap_or_else(|e| panic!("cannot read the bound address: {e}"));
        listener
            .set_nonblocking(true)
            .unwrap_or_else(|e| panic!("cannot make the listener non-blocking: {e}"));
        let (shutdown, stop) = tokio::sync::oneshot::channel();
        let handler = Arc::new(handler);
        let thread = std::thread::Builder::new()
            .name(name.into())
            .spawn(move || serve(listener, handler, stop))
            .unwrap_or_else(|e| panic!("cannot start the server thread: {e}"));
        Self {
            addr,
            shutdown: Some(shutdown),
            thread: Some(thread),
        }
    }

    /// `http://127.0.0.1:PORT`.
    #[must_use]
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }
}

impl Drop for Loopback {
    fn drop(&mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn serve<H, F>(
    listener: std::net::TcpListener,
    handler: Arc<H>,
    mut stop: tokio::sync::oneshot::Receiver<()>,
) where
    H: Fn(Received) -> F + Send + Sync + 'static,
    F: Future<Output = Response<Body>> + Send + 'static,
{
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap_or_else(|e| panic!("cannot build the server's runtime: {e}"));
    rt.block_on(async move {
        let listener = tokio::net::TcpListener::from_std(listener)
            .unwrap_or_else(|e| panic!("cannot register the listener: {e}"));
        loop {
            tokio::select! {
                _ = &mut stop => break,
                accepted = listener.accept() => {
                    let Ok((stream, _)) = accepted else { continue };
                    // One write per event: without TCP_NODELAY a write can wait out the
                    // client's delayed ACK (40 ms), which no real API server does.
                    let _ = stream.set_nodelay(true);
                    let handler = Arc::clone(&handler);
                    tokio::spawn(async move {
                        let service = hyper::service::service_fn(move |req| {
                            let handler = Arc::clone(&handler);
                            async move { Ok::<_, Infallible>(handler(read(req).await).await) }
                        });
                        // A client that hangs up mid-response is not the server's failure.
                        let _ = hyper::server::conn::http1::Builder::new()
                            .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                            .await;
                    });
                }
            }
        }
    });
}

async fn read(req: Request<Incoming>) -> Received {
    let method = req.method().to_string();
    let path = req
        .uri()
        .path_and_query()
        .map_or_else(|| req.uri().path().to_owned(), ToString::to_string);
    let headers = header_pairs(req.headers());
    let body = match req.into_body().collect().await {
        Ok(collected) => String::from_utf8_lossy(&collected.to_bytes()).into_owned(),
        Err(e) => format!("<body unreadable: {e}>"),
    };
    Received {
        method,
        path,
        headers,
        body,
    }
}

/// A whole JSON answer.
#[must_use]
pub fn json_response(value: &serde_json::Value) -> Response<Body> {
    with_type(
        Full::new(Bytes::from(value.to_string())).boxed(),
        "application/json",
    )
}

/// A server-sent-events answer, one body frame an event so that the client sees them
/// arrive as separate chunks.
#[must_use]
pub fn event_stream(events: Vec<String>) -> Response<Body> {
    paced_event_stream(events, Duration::ZERO)
}

/// [`event_stream`] with `gap` between two events, as a model generating its answer sends
/// them (the first goes at once). A zero gap sends them all as fast as the socket takes them.
#[must_use]
pub fn paced_event_stream(events: Vec<String>, gap: Duration) -> Response<Body> {
    let frames = events
        .into_iter()
        .map(|e| Ok::<_, Infallible>(Frame::data(Bytes::from(e))));
    let body = if gap.is_zero() {
        StreamBody::new(tokio_stream::iter(frames)).boxed()
    } else {
        // The first item goes at once, each next one `gap` after the one before.
        StreamBody::new(tokio_stream::StreamExt::throttle(
            tokio_stream::iter(frames),
            gap,
        ))
        .boxed()
    };
    with_type(body, "text/event-stream; charset=utf-8")
}

fn with_type(body: Body, content_type: &'static str) -> Response<Body> {
    let mut r = Response::new(body);
    r.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static(content_type),
    );
    r
}
