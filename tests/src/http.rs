//! A minimal HTTP/1.1 client (hyper's own connection API) for driving the model-API gateway
//! the way an agent's SDK does: one request, the whole answer, headers included.
use http_body_util::{BodyExt as _, Full};
use hyper::body::Bytes;

/// One answer.
#[derive(Clone, Debug)]
pub struct Answer {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Answer {
    #[must_use]
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    #[must_use]
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("the answer is not JSON ({e}): {}", self.text()))
    }

    #[must_use]
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// POSTs `body` to `base` + `path` with `headers` and reads the whole answer.
#[must_use]
pub fn post(base: &str, path: &str, headers: &[(&str, &str)], body: &str) -> Answer {
    let authority = base
        .strip_prefix("http://")
        .unwrap_or_else(|| panic!("{base} is not an http:// URL"))
        .trim_end_matches('/')
        .to_owned();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap_or_else(|e| panic!("cannot build a runtime: {e}"));
    rt.block_on(async move {
        let stream = tokio::net::TcpStream::connect(&authority)
            .await
            .unwrap_or_else(|e| panic!("cannot connect to {authority}: {e}"));
        let (mut sender, conn) =
            hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
                .await
                .unwrap_or_else(|e| panic!("HTTP handshake with {authority} failed: {e}"));
        tokio::spawn(conn);
        let mut request = hyper::Request::post(path)
            .header("host", authority.as_str())
            .header("content-type", "application/json");
        for (k, v) in headers {
            request = request.header(*k, *v);
        }
        let request = request
            .body(Full::new(Bytes::from(body.to_owned())))
            .unwrap_or_else(|e| panic!("bad request: {e}"));
        let response = sender
            .send_request(request)
            .await
            .unwrap_or_else(|e| panic!("POST {path} to {authority} failed: {e}"));
        let status = response.status().as_u16();
        let headers = crate::loopback::header_pairs(response.headers());
        let body = response
            .into_body()
            .collect()
            .await
            .unwrap_or_else(|e| panic!("reading the answer to POST {path} failed: {e}"))
            .to_bytes()
            .to_vec();
        Answer {
            status,
            headers,
            body,
        }
    })
}
