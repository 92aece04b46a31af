//! Arbitrary bytes into a session resolver's untrusted-input steps: as a query from the
//! agent (parsed, its name judged against network rules by name) and as an answer from the
//! upstream resolver (parsed, screened for private addresses, its addresses to learn).
//! Neither may panic nor hang, whatever the bytes.
#![no_main]

use std::sync::LazyLock;

use carapace::dns::wire::{self, Parsed, Question};
use carapace::dns::Handler;
use carapace_policy::engine::Activation;
use carapace_policy::rules::{Homes, Options, RuleSet};
use hickory_proto::op::ResponseCode;
use libfuzzer_sys::fuzz_target;

const RULES: &str = "version: 1
builtin: none
rules:
  - id: egress
    block: { host: \"*\" }
    except: [github.com, \"*.pythonhosted.org\", 10.20.0.0/16, localhost]
  - id: no-gist
    block: { host: gist.github.com }
  - id: web
    block: { host: \"*.example\", port: [80, 443] }
";

static RULE_SET: LazyLock<RuleSet> = LazyLock::new(|| {
    let opts = Options {
        homes: Homes::fixed(["/home/fuzz"]),
        resolver: |_| None,
        host: carapace::policy_host::shared(),
    };
    RuleSet::parse_with("fuzz.yaml", RULES, &opts).expect("the fuzz rules compile")
});

/// A query for an allowed name, whose answer the second half of the input stands for.
static QUESTION: LazyLock<Question> = LazyLock::new(|| {
    // id 0x1234, RD, one question: files.pythonhosted.org A IN.
    let mut q = vec![0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0];
    for label in ["files", "pythonhosted", "org"] {
        q.push(label.len() as u8);
        q.extend_from_slice(label.as_bytes());
    }
    q.extend_from_slice(&[0, 0, 1, 0, 1]);
    match wire::parse_query(&q) {
        Parsed::Question(question) => question,
        other => panic!("the seed query parses: {other:?}"),
    }
});

fuzz_target!(|data: &[u8]| {
    let activation = Activation::default();
    let Some((mode, rest)) = data.split_first() else {
        return;
    };
    if mode & 1 == 0 {
        let _ = Handler::screen_query(rest, &RULE_SET, &activation, ResponseCode::Refused);
    } else {
        let _ = Handler::screen_answer(
            &QUESTION,
            rest,
            mode & 2 == 0,
            &[0],
            (&RULE_SET, &activation),
            (0, ResponseCode::Refused),
        );
    }
});
