//! `carapace record show|propose ID`: what a `carapace run --record` session touched, and
//! the allow-list rule file proposed from it (`--write NAME` saves it as a profile).
use std::path::Path;

use super::connect::connect;
use carapace::api::proto::{RecordProposeRequest, RecordShowRequest};

#[derive(Debug, clap::Subcommand)]
pub enum RecordCommand {
    /// What a record session touched: files by action, programs run, addresses and names
    Show {
        /// The session id (`s-…`, printed by `carapace run --record`)
        session: String,
    },
    /// The allow-list rule file proposed from a record session, validated; review it
    #[command(after_help = "\
The proposal refuses reads and writes under the session owner's home (and the other
non-system directories the session touched) except the files it touched, and every network
host except those it reached. It is compiled, and the built-in packs' must-block cases are
replayed against it, before it is shown. Review it before you use it.

Examples:
  carapace record propose s-1a2b3c4d
  sudo carapace record propose s-1a2b3c4d --write web-agent   # then: carapace run --profile web-agent")]
    Propose {
        /// The session id
        session: String,
        /// Save it as profile NAME (`$CARAPACE_DATA_DIR/profiles/NAME.yaml`); refused from
        /// inside a session
        #[arg(long, value_name = "NAME")]
        write: Option<String>,
        /// Replace an existing profile of that name
        #[arg(long, requires = "write")]
        force: bool,
    },
}

pub async fn run(socket: &Path, cmd: RecordCommand) -> anyhow::Result<u8> {
    let mut client = connect(socket).await?;
    match cmd {
        RecordCommand::Show { session } => {
            let reply = client
                .record_show(RecordShowRequest {
                    session_id: session,
                })
                .await
                .map_err(|e| anyhow::anyhow!("{}", e.message()))?
                .into_inner();
            println!(
                "session {}{}: {}",
                reply.session_id,
                if reply.live { " (running)" } else { "" },
                reply.command.join(" ")
            );
            for line in &reply.touched {
                println!("  {line}");
            }
            if reply.truncated {
                println!(
                    "  (the record reached its bound: what came after was not kept, and the \
                     proposal refuses it)"
                );
            }
            Ok(0)
        }
        RecordCommand::Propose {
            session,
            write,
            force,
        } => {
            let reply = client
                .record_propose(RecordProposeRequest {
                    session_id: session,
                    write_name: write.unwrap_or_default(),
                    force,
                })
                .await
                .map_err(|e| anyhow::anyhow!("{}", e.message()))?
                .into_inner();
            print!("{}", reply.text);
            eprintln!(
                "carapace: proposal checked: it compiles, and the {} must-block cases of the \
                 built-in packs stay refused",
                reply.fixtures_checked
            );
            if !reply.written.is_empty() {
                eprintln!(
                    "carapace: saved as {} — review it before running agents under it",
                    reply.written
                );
            }
            Ok(0)
        }
    }
}
