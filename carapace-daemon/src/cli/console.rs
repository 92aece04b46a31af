//! `carapace console`: asks the daemon for a login link to its console and opens it.
use std::path::Path;

use super::connect::connect;
use carapace::api::proto::ConsoleUrlRequest;

#[derive(Debug, clap::Args)]
#[command(after_help = "\
The link holds a one-time token: whoever opens it first, within two minutes, is logged in as
you (the browser keeps a cookie; the page refuses processes inside agent sessions). Keep it
to yourself; run `carapace console` again for a new one.

Examples:
  carapace console             # opens the browser when there is a display
  carapace console --no-open   # only prints the link (e.g. over SSH with a port forward)")]
pub struct ConsoleArgs {
    /// Only print the link; do not start a browser
    #[arg(long)]
    pub no_open: bool,
}

/// Whether a graphical session is there to open a browser in.
fn has_display() -> bool {
    ["DISPLAY", "WAYLAND_DISPLAY"]
        .iter()
        .any(|v| std::env::var_os(v).is_some_and(|s| !s.is_empty()))
}

pub async fn run(socket: &Path, args: ConsoleArgs) -> anyhow::Result<u8> {
    let mut client = connect(socket).await?;
    let url = client
        .console_url(ConsoleUrlRequest {})
        .await
        .map_err(|e| anyhow::anyhow!("cannot open the console: {}", e.message()))?
        .into_inner()
        .url;
    println!("{url}");
    if args.no_open || !has_display() {
        eprintln!("carapace: open this link in a browser on this machine (it works once, for two minutes)");
        return Ok(0);
    }
    // The browser outlives this command; its output is not ours to show.
    let opened = std::process::Command::new("xdg-open")
        .arg(&url)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn();
    if let Err(e) = opened {
        eprintln!("carapace: cannot start xdg-open ({e}); open the link above in a browser");
    }
    Ok(0)
}
