//! One JSON `POST` over HTTP/1.1 or HTTPS (rustls with the webpki roots, so the daemon
//! needs no system certificate store), with a bounded response size.
use http_body_util::{BodyExt as _, Full, Limited};
use hyper::body::Bytes;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;

use super::LlmError;

/// Largest model answer read (structured answers are a few hundred bytes).
const MAX_RESPONSE: usize = 4 << 20;

#[derive(Clone, Debug)]
pub struct Http {
    client: Client<HttpsConnector<HttpConnector>, Full<Bytes>>,
}

/// A response: status and body.
#[derive(Clone, Debug)]
pub struct Reply {
    pub status: u16,
    pub body: Vec<u8>,
}

impl Http {
    pub fn new() -> Result<Self, LlmError> {
        let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
        let tls = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| LlmError::Transport(format!("cannot set up TLS: {e}")))?
            .with_root_certificates(rustls::RootCertStore {
                roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
            })
            .with_no_client_auth();
        let https = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_or_http()
            .enable_http1()
            .build();
        Ok(Self {
            client: Client::builder(TokioExecutor::new()).build(https),
        })
    }

    /// POSTs `body` as JSON to `url` with extra `headers`.
    pub async fn post_json(
        &self,
        url: &str,
        headers: &[(&str, String)],
        body: &serde_json::Value,
    ) -> Result<Reply, LlmError> {
        let uri: hyper::Uri = url
            .parse()
            .map_err(|e| LlmError::Transport(format!("bad URL {url}: {e}")))?;
        let mut req = hyper::Request::post(uri).header("content-type", "application/json");
        for (k, v) in headers {
            req = req.header(*k, v);
        }
        let req = req
            .body(Full::new(Bytes::from(body.to_string())))
            .map_err(|e| LlmError::Transport(format!("cannot build the request: {e}")))?;
        let resp = self
            .client
            .request(req)
            .await
            .map_err(|e| LlmError::Transport(format!("{url}: {}", chain(&e))))?;
        let status = resp.status().as_u16();
        let body = Limited::new(resp.into_body(), MAX_RESPONSE)
            .collect()
            .await
            .map_err(|e| LlmError::Transport(format!("{url}: reading the answer: {e}")))?
            .to_bytes()
            .to_vec();
        Ok(Reply { status, body })
    }
}

/// An error with its sources, so "connection refused" is not lost behind "client error".
fn chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut cur = e.source();
    while let Some(s) = cur {
        out.push_str(": ");
        out.push_str(&s.to_string());
        cur = s.source();
    }
    out
}
