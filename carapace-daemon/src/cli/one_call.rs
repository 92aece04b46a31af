//! One `Evaluate` on the daemon's direct wire ([`carapace::api::direct`]): what the one-call
//! clients (`hook`, `check`) use instead of opening an HTTP/2 connection for a single call.
use std::io;

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::UnixStream;

use carapace::api::direct::{self, FrameError};
use carapace::api::proto::{EvaluateReply, EvaluateRequest};

#[derive(Debug, thiserror::Error)]
pub enum OneCallError {
    /// No answer could be read: the connection broke, or the daemon predates the direct wire
    /// (it reads the request as a broken HTTP/2 preface and hangs up). The caller asks again
    /// over gRPC, which either daemon answers, or which fails if the daemon is gone.
    #[error("no answer on the direct wire: {0}")]
    Unanswered(#[from] io::Error),
    #[error(transparent)]
    Frame(#[from] FrameError),
    /// The daemon answered with a refusal (its message).
    #[error("{0}")]
    Refused(String),
}

/// Sends `req` on `stream` and reads the daemon's answer.
pub async fn evaluate(
    mut stream: UnixStream,
    req: &EvaluateRequest,
) -> Result<EvaluateReply, OneCallError> {
    stream.write_all(&direct::request_frame(req)).await?;
    let mut header = [0u8; 5];
    stream.read_exact(&mut header).await?;
    let (answered, len) = direct::reply_header(header)?;
    let mut body = vec![0u8; len];
    stream.read_exact(&mut body).await?;
    direct::reply(answered, &body)?.map_err(|refusal| OneCallError::Refused(refusal.0))
}

#[cfg(test)]
mod tests {
    use tokio::net::UnixListener;

    use super::*;
    use crate::cli::evaluator::{Evaluator, Fallback, InSession, Source};

    fn source() -> Source {
        Source {
            rules: None,
            local: false,
            cwd: Some("/tmp".into()),
        }
    }

    /// A daemon that speaks only the direct wire: it reads one request and answers `reply`
    /// (a gRPC client could not get an answer from it).
    async fn wire_only_daemon(listener: UnixListener, reply: EvaluateReply) -> EvaluateRequest {
        let (mut stream, _) = listener.accept().await.expect("accept");
        let mut header = [0u8; 12];
        stream.read_exact(&mut header).await.expect("header");
        assert_eq!(header[..8], direct::MAGIC);
        let len = direct::request_length(header[8..].try_into().expect("4 bytes")).expect("len");
        let mut body = vec![0u8; len];
        stream.read_exact(&mut body).await.expect("body");
        let frame = direct::reply_frame(Ok(&reply));
        stream.write_all(&frame).await.expect("reply");
        direct::request(&body).expect("request")
    }

    #[tokio::test]
    async fn a_one_call_evaluator_asks_on_the_direct_wire() {
        let dir = tempfile::tempdir().expect("dir");
        let socket = dir.path().join("d.sock");
        let listener = UnixListener::bind(&socket).expect("bind");
        let decision = serde_json::to_string(&carapace_policy::engine::Decision {
            decision: carapace_policy::rules::Mode::Block,
            tool: "Bash".into(),
            message: "no".into(),
            matches: Vec::new(),
            operations: Vec::new(),
        })
        .expect("json");
        let daemon = tokio::spawn(wire_only_daemon(
            listener,
            EvaluateReply {
                decision_json: decision,
                approval_id: "r7".into(),
                ..EvaluateReply::default()
            },
        ));
        let mut eval = Evaluator::open_for_one_call(&socket, &source(), Fallback::Fail)
            .await
            .expect("open");
        let session = InSession {
            agent: "claude-code".into(),
            external_id: "s1".into(),
            wait_seconds: 9,
        };
        let call = serde_json::json!({"tool": "Bash", "input": {"command": "make deploy"}});
        let verdict = eval.check_in(&call, None, &session).await.expect("verdict");
        assert_eq!(verdict.approval_id, "r7");
        assert_eq!(
            verdict.decision.decision,
            carapace_policy::rules::Mode::Block
        );
        let asked = daemon.await.expect("daemon task");
        assert_eq!(asked.agent, "claude-code");
        assert_eq!(asked.session_id, "s1");
        assert_eq!(asked.wait_seconds, 9);
        assert_eq!(asked.cwd, "/tmp");
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&asked.call_json).expect("json"),
            call
        );
    }

    /// A daemon from before the direct wire hangs up on it: the evaluator then asks over
    /// gRPC, and fails (closed) when nothing answers there either.
    #[tokio::test]
    async fn a_daemon_that_hangs_up_is_asked_again_over_grpc() {
        let dir = tempfile::tempdir().expect("dir");
        let socket = dir.path().join("d.sock");
        let listener = UnixListener::bind(&socket).expect("bind");
        let hangs_up = tokio::spawn(async move {
            let (mut stream, _) = listener.accept().await.expect("accept");
            let mut some = [0u8; 4];
            let _ = stream.read_exact(&mut some).await;
            drop(stream);
            // The retry over gRPC connects again; nobody answers it.
            let (stream, _) = listener.accept().await.expect("second accept");
            drop(stream);
        });
        let mut eval = Evaluator::open_for_one_call(&socket, &source(), Fallback::Fail)
            .await
            .expect("open");
        let call = serde_json::json!({"tool": "Read", "input": {"file_path": "/etc/hosts"}});
        let err = eval
            .check_in(&call, None, &InSession::default())
            .await
            .expect_err("no answer anywhere");
        assert!(format!("{err:#}").contains("daemon"), "{err:#}");
        hangs_up.await.expect("listener task");
    }
}
