//! `carapace learn TRANSCRIPT`: asks the configured model for rules that would have caught
//! what the user corrected in a conversation, and prints them as rule YAML for the user to
//! review. Every printed rule passed the rule validator; none is activated.
use std::io::Read as _;
use std::path::{Path, PathBuf};

use anyhow::Context as _;

use carapace::config::{self, LlmConfig};
use carapace::llm::Reviewer;
use carapace::paths::DEFAULT_DATA_DIR;

/// Largest transcript read.
const MAX_INPUT: u64 = 32 << 20;

#[derive(Debug, clap::Args)]
#[command(after_help = "\
The model comes from the `llm:` section of $CARAPACE_DATA_DIR/config.yaml, e.g.

  llm:
    provider: anthropic          # or openai (also Ollama, llama.cpp, vLLM)
    model: claude-haiku-4-5
    api_key_env: ANTHROPIC_API_KEY

Transcripts: Claude Code JSONL (~/.claude/projects/…/SESSION.jsonl), OpenAI chat messages
or Anthropic messages as JSON. The conversation is sent to the model as untrusted data.

Nothing is activated: review the printed YAML and copy the rules you want into your rule
file, then `carapace rules check` and `sudo carapace rules reload`.

Examples:
  carapace learn ~/.claude/projects/my-app/1b2c….jsonl
  carapace learn conversation.json > proposed.yaml && carapace rules check proposed.yaml
  cat conversation.json | carapace learn -")]
pub struct LearnArgs {
    /// The transcript file (`-` for stdin)
    #[arg(value_name = "TRANSCRIPT")]
    pub transcript: PathBuf,
    /// Where config.yaml is
    #[arg(long, value_name = "DIR", env = "CARAPACE_DATA_DIR", default_value = DEFAULT_DATA_DIR)]
    pub data_dir: PathBuf,
}

/// The model `dir/config.yaml` names, read as the daemon reads it (every section checked:
/// a file the daemon would refuse is refused here too, with the same diagnostics).
pub(crate) fn model(data_dir: &Path) -> anyhow::Result<LlmConfig> {
    let config = config::load(data_dir).map_err(|d| anyhow::anyhow!("{d}"))?;
    config.llm.ok_or_else(|| {
        anyhow::anyhow!(
            "no model configured: add an `llm:` section to {} (see `carapace learn --help`)",
            data_dir.join(config::FILE_NAME).display()
        )
    })
}

pub async fn learn(args: LearnArgs) -> anyhow::Result<u8> {
    let mut text = String::new();
    if args.transcript.as_os_str() == "-" {
        std::io::stdin()
            .take(MAX_INPUT)
            .read_to_string(&mut text)
            .context("cannot read the transcript from stdin")?;
    } else {
        std::fs::File::open(&args.transcript)
            .and_then(|f| f.take(MAX_INPUT).read_to_string(&mut text))
            .with_context(|| format!("cannot read {}", args.transcript.display()))?;
    }
    let file = args.data_dir.join(config::FILE_NAME);
    let model = model(&args.data_dir)?;
    let reviewer = Reviewer::new(Some(model), &file.display().to_string())?;
    let learned = reviewer
        .learn(&text)
        .await
        .context("the model could not propose rules")?;
    for why in &learned.rejected {
        eprintln!("carapace learn: dropped a proposal that does not validate: {why}");
    }
    if learned.yaml.is_empty() {
        eprintln!(
            "carapace learn: no rule proposed ({} proposal(s) from the model)",
            learned.proposed
        );
        return Ok(0);
    }
    println!(
        "# Proposed by `carapace learn` from {}. Not active: review, then copy the rules\n\
         # you want into your rule file.",
        args.transcript.display()
    );
    print!("{}", learned.yaml);
    Ok(0)
}
