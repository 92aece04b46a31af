//! A small Chrome `DevTools` Protocol client: starts headless Chromium (Debian's `chromium`)
//! and drives one page over its WebSocket — navigate, evaluate JavaScript, click at an
//! element like a mouse does, take screenshots. Enough for the console's browser test,
//! without Selenium or Node.
use std::io::{BufRead as _, BufReader};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine as _;
use serde_json::{json, Value};
use tungstenite::{Message, WebSocket};

/// How long one protocol command may take.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(30);

/// The Chromium binary, if installed.
#[must_use]
pub fn chromium() -> Option<PathBuf> {
    ["chromium", "chromium-browser", "google-chrome"]
        .iter()
        .find_map(|name| {
            std::env::var_os("PATH").and_then(|paths| {
                std::env::split_paths(&paths)
                    .map(|d| d.join(name))
                    .find(|p| p.is_file())
            })
        })
}

/// A headless browser with one page, killed when dropped.
pub struct Browser {
    child: Child,
    ws: WebSocket<TcpStream>,
    next_id: u64,
    _profile: tempfile::TempDir,
}

impl Browser {
    /// Starts `bin` headless with a throwaway profile and attaches to a new blank page.
    #[must_use]
    pub fn start(bin: &Path) -> Self {
        let profile = tempfile::tempdir().unwrap_or_else(|e| panic!("temp dir: {e}"));
        let mut child = Command::new(bin)
            .args([
                "--headless=new",
                // The tests run as root, where Chromium's sandbox cannot start.
                "--no-sandbox",
                "--disable-gpu",
                "--disable-dev-shm-usage",
                "--no-first-run",
                "--no-default-browser-check",
                "--disable-extensions",
                "--disable-background-networking",
                "--window-size=1280,900",
                "--remote-debugging-address=127.0.0.1",
                "--remote-debugging-port=0",
            ])
            .arg(format!("--user-data-dir={}", profile.path().display()))
            .arg("about:blank")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", bin.display()));
        // "DevTools listening on ws://127.0.0.1:PORT/devtools/browser/ID" on stderr.
        let stderr = child.stderr.take().unwrap_or_else(|| panic!("no stderr"));
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut sent = false;
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if !sent {
                    if let Some(url) = line.strip_prefix("DevTools listening on ") {
                        let _ = tx.send(url.trim().to_owned());
                        sent = true;
                    }
                }
            }
        });
        let browser_url = rx
            .recv_timeout(Duration::from_secs(30))
            .unwrap_or_else(|e| panic!("Chromium printed no DevTools address: {e}"));
        let port = browser_url
            .trim_start_matches("ws://")
            .split_once('/')
            .map_or_else(
                || panic!("odd DevTools address {browser_url}"),
                |(hostport, _)| hostport.to_owned(),
            );
        // The page Chromium opened, from /json/list.
        let list = http_get(&port, "/json/list");
        let targets: Value = serde_json::from_str(&list)
            .unwrap_or_else(|e| panic!("/json/list is not JSON ({e}): {list}"));
        let page_ws = targets
            .as_array()
            .into_iter()
            .flatten()
            .find(|t| t["type"] == "page")
            .and_then(|t| t["webSocketDebuggerUrl"].as_str())
            .unwrap_or_else(|| panic!("no page target in {list}"))
            .to_owned();
        let stream = TcpStream::connect(&port).unwrap_or_else(|e| panic!("connect {port}: {e}"));
        stream
            .set_read_timeout(Some(COMMAND_TIMEOUT))
            .unwrap_or_else(|e| panic!("{e}"));
        let (ws, _) = tungstenite::client(page_ws.as_str(), stream)
            .unwrap_or_else(|e| panic!("WebSocket handshake with {page_ws}: {e}"));
        let mut browser = Self {
            child,
            ws,
            next_id: 0,
            _profile: profile,
        };
        browser.call("Page.enable", &json!({}));
        browser.call("Runtime.enable", &json!({}));
        browser
    }

    /// Sends one command and returns its `result` (events in between are dropped).
    pub fn call(&mut self, method: &str, params: &Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        let msg = json!({"id": id, "method": method, "params": params}).to_string();
        self.ws
            .send(Message::text(msg))
            .unwrap_or_else(|e| panic!("{method}: cannot send: {e}"));
        let deadline = Instant::now() + COMMAND_TIMEOUT;
        loop {
            assert!(Instant::now() < deadline, "{method}: no answer in time");
            let frame = self
                .ws
                .read()
                .unwrap_or_else(|e| panic!("{method}: cannot read: {e}"));
            let Message::Text(text) = frame else { continue };
            let v: Value = serde_json::from_str(text.as_str())
                .unwrap_or_else(|e| panic!("{method}: not JSON ({e})"));
            if v["id"].as_u64() != Some(id) {
                continue;
            }
            assert!(v.get("error").is_none(), "{method} failed: {v}");
            return v["result"].clone();
        }
    }

    pub fn navigate(&mut self, url: &str) {
        let r = self.call("Page.navigate", &json!({"url": url}));
        assert!(r.get("errorText").is_none(), "navigate {url}: {r}");
    }

    /// The value of a JavaScript expression (promises awaited).
    pub fn eval(&mut self, expression: &str) -> Value {
        let r = self.call(
            "Runtime.evaluate",
            &json!({"expression": expression, "returnByValue": true, "awaitPromise": true}),
        );
        assert!(
            r.get("exceptionDetails").is_none(),
            "{expression} threw: {r}"
        );
        r["result"]["value"].clone()
    }

    /// Waits until `expression` is true; panics with `what` and the page's text otherwise.
    pub fn wait_for(&mut self, expression: &str, timeout: Duration, what: &str) {
        let deadline = Instant::now() + timeout;
        loop {
            if self.eval(&format!("Boolean({expression})")) == Value::Bool(true) {
                return;
            }
            if Instant::now() > deadline {
                let body = self.eval("document.body ? document.body.innerText : ''");
                panic!("{what}: not seen within {timeout:?}; the page says:\n{body}");
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Clicks the middle of the element `selector` picks, with mouse events (as a person
    /// does: the page sees a trusted click).
    pub fn click(&mut self, selector: &str) {
        let sel = serde_json::to_string(selector).unwrap_or_default();
        let rect = self.eval(&format!(
            "(() => {{ const e = document.querySelector({sel}); if (!e) return null; \
             e.scrollIntoView({{block: 'center'}}); const r = e.getBoundingClientRect(); \
             return [r.x + r.width / 2, r.y + r.height / 2]; }})()"
        ));
        let (Some(x), Some(y)) = (rect[0].as_f64(), rect[1].as_f64()) else {
            panic!("nothing to click at {selector}");
        };
        for kind in ["mouseMoved", "mousePressed", "mouseReleased"] {
            self.call(
                "Input.dispatchMouseEvent",
                &json!({"type": kind, "x": x, "y": y, "button": "left", "clickCount": 1}),
            );
        }
    }

    /// Writes a PNG of the page as it is now to `path`.
    pub fn screenshot(&mut self, path: &Path) {
        let r = self.call(
            "Page.captureScreenshot",
            &json!({"format": "png", "captureBeyondViewport": true}),
        );
        let data = base64::engine::general_purpose::STANDARD
            .decode(r["data"].as_str().unwrap_or_default())
            .unwrap_or_else(|e| panic!("screenshot is not base64: {e}"));
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        }
        std::fs::write(path, data).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A plain HTTP/1.1 GET of `path` on `hostport`; the body.
fn http_get(hostport: &str, path: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match raw_http(
            hostport,
            &format!("GET {path} HTTP/1.1\r\nHost: {hostport}\r\nConnection: close\r\n\r\n"),
        ) {
            Ok((_, body)) => return body,
            Err(e) if Instant::now() < deadline => {
                let _ = e;
                std::thread::sleep(Duration::from_millis(100));
            }
            Err(e) => panic!("GET http://{hostport}{path}: {e}"),
        }
    }
}

/// Sends `request` as is to `hostport`; (status line, body). Reads the body by its
/// Content-Length when there is one (Chromium keeps the connection open), else to the end.
pub fn raw_http(hostport: &str, request: &str) -> std::io::Result<(String, String)> {
    let (head, body) = http_exchange(hostport, request)?;
    let status = head.lines().next().unwrap_or_default().to_owned();
    Ok((status, body))
}

/// As [`raw_http`], with the whole head (status line and headers) instead of the status.
pub fn http_exchange(hostport: &str, request: &str) -> std::io::Result<(String, String)> {
    use std::io::{Read as _, Write as _};
    let mut s = TcpStream::connect(hostport)?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    s.write_all(request.as_bytes())?;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        let n = s.read(&mut chunk)?;
        if n == 0 {
            break;
        }
        buf.extend_from_slice(&chunk[..n]);
        let text = String::from_utf8_lossy(&buf);
        if let Some((head, body)) = text.split_once("\r\n\r\n") {
            let length = head.lines().find_map(|l| {
                let (k, v) = l.split_once(':')?;
                k.trim()
                    .eq_ignore_ascii_case("content-length")
                    .then(|| v.trim().parse::<usize>().ok())?
            });
            if length.is_some_and(|len| body.len() >= len) {
                break;
            }
        }
    }
    let out = String::from_utf8_lossy(&buf).into_owned();
    let (head, body) = out.split_once("\r\n\r\n").unwrap_or((&out, ""));
    Ok((head.to_owned(), body.to_owned()))
}
