//! The API socket's two doors: each connection is read for its first bytes and handed to
//! tonic (gRPC) or answered on the direct wire ([`super::direct`]). The bytes are peeked, not
//! read, so a gRPC connection reaches tonic untouched, its peer credentials with it.
use std::io;
use std::os::fd::AsRawFd as _;
use std::time::Duration;

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::mpsc;
use tonic::Status;

use super::direct::{self, Opening, MAGIC};
use super::Service;

/// How long a client may take to say which door it wants, and to send its request. A
/// one-call client writes both at once; this only bounds what an idle connection holds.
const OPENING_TIMEOUT: Duration = Duration::from_secs(30);

/// Accepts connections until the gRPC server stops taking them (`to_grpc` closed).
pub async fn accept(
    listener: UnixListener,
    service: Service,
    to_grpc: mpsc::Sender<io::Result<UnixStream>>,
) {
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(e) => {
                // Out of descriptors or memory: wait rather than spin; the gRPC door logs
                // nothing for these either, so say it here.
                tracing::warn!("cannot accept an API connection: {e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let (service, sender) = (service.clone(), to_grpc.clone());
        tokio::spawn(async move {
            match tokio::time::timeout(OPENING_TIMEOUT, opening(&stream)).await {
                Ok(Ok(Opening::Direct)) => answer(&service, stream).await,
                Ok(Ok(_)) => {
                    // The server gone means the daemon is stopping: drop the connection.
                    let _ = sender.send(Ok(stream)).await;
                }
                Ok(Err(_)) | Err(_) => {}
            }
        });
        if to_grpc.is_closed() {
            return;
        }
    }
}

/// Peeks until the first bytes decide the door (or the client hangs up: `Other`, and tonic
/// sees the end).
async fn opening(stream: &UnixStream) -> io::Result<Opening> {
    let mut first = [0u8; MAGIC.len()];
    loop {
        stream.readable().await?;
        let peeked = stream.try_io(tokio::io::Interest::READABLE, || peek(stream, &mut first));
        match peeked {
            Ok(0) => return Ok(Opening::Other),
            Ok(n) => match direct::opening(&first[..n]) {
                Opening::Undecided => tokio::time::sleep(Duration::from_millis(1)).await,
                decided => return Ok(decided),
            },
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(e),
        }
    }
}

fn peek(stream: &UnixStream, buf: &mut [u8]) -> io::Result<usize> {
    // SAFETY: the descriptor is the stream's own, open for the stream's life; `buf` is valid
    // for `buf.len()` writable bytes.
    let n = unsafe {
        libc::recv(
            stream.as_raw_fd(),
            buf.as_mut_ptr().cast(),
            buf.len(),
            libc::MSG_PEEK | libc::MSG_DONTWAIT,
        )
    };
    usize::try_from(n).map_err(|_| io::Error::last_os_error())
}

/// Reads one request, answers it, and closes.
async fn answer(service: &Service, mut stream: UnixStream) {
    let outcome = match read_request(&mut stream).await {
        Ok(req) => match stream.peer_cred() {
            Ok(cred) => match service.peer_of(cred) {
                Ok(peer) => service.evaluate_reply(peer, req).await,
                Err(status) => Err(status),
            },
            Err(e) => Err(Status::unauthenticated(format!(
                "peer credentials are unavailable: {e}"
            ))),
        },
        Err(e) => Err(Status::invalid_argument(e.to_string())),
    };
    let frame = direct::reply_frame(outcome.as_ref().map_err(Status::message));
    // A client that left before its answer has nothing to be told.
    let _ = stream.write_all(&frame).await;
}

#[derive(Debug, thiserror::Error)]
enum ReadError {
    #[error("cannot read the request: {0}")]
    Io(#[from] io::Error),
    #[error("the request took longer than {}s to arrive", OPENING_TIMEOUT.as_secs())]
    Slow,
    #[error(transparent)]
    Frame(#[from] direct::FrameError),
}

async fn read_request(stream: &mut UnixStream) -> Result<super::proto::EvaluateRequest, ReadError> {
    let read = async {
        let mut header = [0u8; MAGIC.len() + 4];
        stream.read_exact(&mut header).await?;
        let len = direct::request_length([header[8], header[9], header[10], header[11]])?;
        // Grown as bytes arrive, not allocated up front: a client that announces the largest
        // body and sends nothing holds no more memory than it sent.
        let mut body = Vec::new();
        let read = (&mut *stream)
            .take(len as u64)
            .read_to_end(&mut body)
            .await?;
        if read < len {
            return Err(io::Error::from(io::ErrorKind::UnexpectedEof).into());
        }
        Ok::<_, ReadError>(direct::request(&body)?)
    };
    tokio::time::timeout(OPENING_TIMEOUT, read)
        .await
        .map_err(|_| ReadError::Slow)?
}
