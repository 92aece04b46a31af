//! The `/metrics` endpoint (HTTP/1.1, plain text) of `carapaced --metrics ADDR`.
//!
//! It listens where it is told; the daemon's help recommends a loopback address because
//! the rule ids and counts it shows say what agents on this machine tried.
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

/// What produces the page.
pub type Render = Arc<dyn Fn() -> String + Send + Sync>;

/// The Prometheus text format's content type.
const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

fn respond(render: &Render, req: &Request<Incoming>) -> Response<Full<Bytes>> {
    let (status, body) = if req.uri().path() == "/metrics" {
        (StatusCode::OK, render())
    } else {
        (
            StatusCode::NOT_FOUND,
            "only /metrics is served here\n".to_owned(),
        )
    };
    let mut resp = Response::new(Full::new(Bytes::from(body)));
    *resp.status_mut() = status;
    if let Ok(v) = hyper::header::HeaderValue::from_str(CONTENT_TYPE) {
        resp.headers_mut().insert(hyper::header::CONTENT_TYPE, v);
    }
    resp
}

/// Serves `/metrics` on `listener` until the task is dropped.
#[must_use = "the task runs until aborted; keep or detach its handle"]
pub fn spawn(listener: TcpListener, render: Render) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            let (stream, peer): (_, SocketAddr) = match listener.accept().await {
                Ok(s) => s,
                Err(e) => {
                    tracing::warn!("metrics endpoint: cannot accept a connection: {e}");
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                    continue;
                }
            };
            let render = Arc::clone(&render);
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |req: Request<Incoming>| {
                    let resp = respond(&render, &req);
                    async move { Ok::<_, Infallible>(resp) }
                });
                if let Err(e) = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await
                {
                    tracing::debug!(%peer, "metrics connection ended: {e}");
                }
            });
        }
    })
}
