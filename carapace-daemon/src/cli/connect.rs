//! The client's connection to carapaced: the gRPC API over the daemon's Unix socket. Its own
//! module so that every subcommand can reach the daemon without depending on the client's
//! entry point (`client`), which depends on them all.
use std::path::Path;

use hyper_util::rt::TokioIo;
use tokio::net::UnixStream;
use tonic::transport::{Channel, Endpoint, Uri};

use carapace::api::proto::carapace_client::CarapaceClient;

/// Connects to the daemon's Unix socket.
pub async fn connect(socket: &Path) -> anyhow::Result<CarapaceClient<Channel>> {
    let path = socket.to_path_buf();
    // The URI is required by the API but unused: the connector below dials the socket.
    let channel = Endpoint::try_from("http://carapaced.invalid")?
        .connect_with_connector(tower::service_fn(move |_: Uri| {
            let path = path.clone();
            async move { UnixStream::connect(path).await.map(TokioIo::new) }
        }))
        .await
        .map_err(|e| {
            // The transport error repeats its cause; the innermost error says it best.
            let mut cause: &dyn std::error::Error = &e;
            while let Some(next) = cause.source() {
                cause = next;
            }
            anyhow::anyhow!(
                "cannot reach carapaced at {} ({cause}). Start it with `sudo carapaced` (or \
                 point --socket / CARAPACE_SOCKET at its socket)",
                socket.display()
            )
        })?;
    Ok(CarapaceClient::new(channel))
}
