//! Shell command lines → operations. (Interim: words split on whitespace; the real parser
//! replaces this.)
use super::operation::{Context, Extracted};

pub fn extract(command: &str, _ctx: &Context, out: &mut Extracted) {
    out.command(command.split_whitespace().collect::<Vec<_>>().join(" "));
}
