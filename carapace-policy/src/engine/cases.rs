//! Case files: must-block / must-approve / must-allow tool calls as data, run through the
//! whole of Layer 1 (extraction, normalisation, every rule). The built-in packs' fixtures
//! (`rules/fixtures/`) and the evasion and day-to-day corpus (`tests/corpus/`) use it.
//!
//! ```yaml
//! homes: [/home/alice, /root]      # where `~` expands (default: these two)
//! cwd: /home/alice/project         # the agent's working directory (default: this)
//! rules: "version: 1\n…"           # the rule file (default: the caller's)
//! block:                           # the decision must be `block`
//!   - { bash: "cat ~/.ssh/id_rsa", rule: ssh-private-keys }   # `rule`: must be among the matches
//!   - { tool: Read, input: { file_path: "~/.aws/credentials" } }
//!   - { call: { tool_name: Write, tool_input: {…} } }          # any shape `carapace check` takes
//!   - { path: /etc/passwd, op: write }                         # a bare operation
//!   - { addr: 169.254.169.254, port: 80 }
//! approve: [ … ]                   # the decision must be `approve`
//! allow: [ … ]                     # allow, log or warn; `rule`: that rule must not match
//! ```
//!
//! With rules that declare `profile: guardrail`, every task case also states the answer:
//! `answer: { approved: false, failed_checks: [R_SAFETY_001], required_confirmation: false }`.
use serde_json::{Map, Value};
use yaml_rust2::{Yaml, YamlLoader};

#[cfg(test)]
use super::guardrail::{self, TaskAnswer};
#[cfg(test)]
use super::{evaluate, Activation, Layer};
use super::{Context, Extracted, Operation, ToolCall};
#[cfg(test)]
use crate::rules::RuleSet;
use crate::rules::{Action, Mode};

/// One case and where it is.
#[derive(Clone, Debug)]
pub struct Case {
    pub expect: Mode,
    pub rule: Option<String>,
    pub what: Value,
    pub line: usize,
}

/// A parsed case file.
pub struct CaseFile {
    pub homes: Vec<String>,
    pub cwd: String,
    #[cfg_attr(
        not(test),
        expect(dead_code, reason = "the tests' own rules; a replay brings its rules")
    )]
    pub rules: Option<String>,
    pub cases: Vec<Case>,
}

pub fn yaml_to_json(y: &Yaml) -> Value {
    match y {
        Yaml::Real(r) => r.parse::<f64>().map_or(Value::Null, Value::from),
        Yaml::Integer(i) => Value::from(*i),
        Yaml::String(s) => Value::String(s.clone()),
        Yaml::Boolean(b) => Value::Bool(*b),
        Yaml::Array(items) => Value::Array(items.iter().map(yaml_to_json).collect()),
        Yaml::Hash(h) => {
            let mut m = Map::new();
            for (k, v) in h {
                let key = match k {
                    Yaml::String(s) => s.clone(),
                    Yaml::Integer(i) => i.to_string(),
                    other => format!("{other:?}"),
                };
                m.insert(key, yaml_to_json(v));
            }
            Value::Object(m)
        }
        _ => Value::Null,
    }
}

/// Line numbers of list items under `key:` (for messages), in order.
fn item_lines(text: &str, key: &str) -> Vec<usize> {
    let mut lines = Vec::new();
    let mut inside = false;
    for (n, line) in text.lines().enumerate() {
        if !line.starts_with(' ')
            && !line.starts_with('-')
            && !line.starts_with('#')
            && !line.trim().is_empty()
        {
            inside = line.trim_end() == format!("{key}:");
            continue;
        }
        if inside && line.trim_start().starts_with("- ") && line.starts_with("  -") {
            lines.push(n + 1);
        }
    }
    lines
}

/// A case file or case that cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum CaseError {
    #[error(transparent)]
    Yaml(#[from] yaml_rust2::ScanError),
    #[error("empty case file")]
    Empty,
    #[error(transparent)]
    Call(#[from] super::CallError),
    #[error("bad op `{0}` (read, write, delete or execute)")]
    BadOp(String),
    #[error("a case needs bash, tool, call, path or addr")]
    NoSubject,
}

pub fn parse(text: &str) -> Result<CaseFile, CaseError> {
    let docs = YamlLoader::load_from_str(text)?;
    let doc = docs.first().ok_or(CaseError::Empty)?;
    let get = |k: &str| &doc[k];
    let homes = match get("homes") {
        Yaml::Array(a) => a
            .iter()
            .filter_map(|h| h.as_str().map(str::to_owned))
            .collect(),
        _ => vec!["/home/alice".to_owned(), "/root".to_owned()],
    };
    let cwd = get("cwd")
        .as_str()
        .unwrap_or("/home/alice/project")
        .to_owned();
    let rules = get("rules").as_str().map(str::to_owned);
    let mut cases = Vec::new();
    for (key, expect) in [
        ("block", Mode::Block),
        ("approve", Mode::Approve),
        ("allow", Mode::Allow),
    ] {
        let lines = item_lines(text, key);
        if let Yaml::Array(items) = get(key) {
            for (i, item) in items.iter().enumerate() {
                let what = yaml_to_json(item);
                let rule = what.get("rule").and_then(Value::as_str).map(str::to_owned);
                cases.push(Case {
                    expect,
                    rule,
                    what,
                    line: lines.get(i).copied().unwrap_or(0),
                });
            }
        }
    }
    Ok(CaseFile {
        homes,
        cwd,
        rules,
        cases,
    })
}

impl CaseFile {
    #[cfg(test)]
    pub fn rule_set(&self, default_rules: &str) -> Result<RuleSet, String> {
        let opts = crate::rules::Options {
            homes: crate::rules::Homes::fixed(self.homes.clone()),
            resolver: |_| None,
            host: crate::host::real::host(),
        };
        RuleSet::parse_with(
            "case-file",
            self.rules.as_deref().unwrap_or(default_rules),
            &opts,
        )
        .map_err(|d| d.to_string())
    }

    pub fn context(&self) -> Context {
        Context {
            cwd: self.cwd.clone(),
            home: self.homes.first().cloned().unwrap_or_else(|| "/".into()),
            env: vec![("USER".into(), "alice".into())],
            host: None,
        }
    }
}

/// What a case asks to check.
pub fn extract(case: &Case, ctx: &Context) -> Result<Extracted, CaseError> {
    let w = &case.what;
    let s = |k: &str| w.get(k).and_then(Value::as_str);
    if let Some(cmd) = s("bash") {
        return Ok(ToolCall {
            tool: "Bash".into(),
            input: serde_json::json!({ "command": cmd }),
        }
        .extract(ctx));
    }
    if let Some(tool) = s("tool") {
        let input = w.get("input").cloned().unwrap_or(Value::Null);
        return Ok(ToolCall {
            tool: tool.into(),
            input,
        }
        .extract(ctx));
    }
    if let Some(call) = w.get("call") {
        return Ok(ToolCall::from_json(call)?.extract(ctx));
    }
    if let Some(path) = s("path") {
        let op = s("op").unwrap_or("read");
        let action = Action::from_name(op).ok_or_else(|| CaseError::BadOp(op.to_owned()))?;
        let mut ext = Extracted::new("operation");
        ext.op(Operation::path(action, path));
        return Ok(ext);
    }
    if let Some(addr) = s("addr") {
        let port = w
            .get("port")
            .and_then(Value::as_u64)
            .and_then(|p| u16::try_from(p).ok());
        let mut ext = Extracted::new("operation");
        ext.op(Operation::network(super::normalize::host(addr), port));
        return Ok(ext);
    }
    Err(CaseError::NoSubject)
}

/// Runs every case; returns one line per failure.
#[cfg(test)]
pub fn run(file: &CaseFile, rules: &RuleSet, origin: &str) -> Vec<String> {
    let ctx = file.context();
    let mut failures = Vec::new();
    for case in &file.cases {
        let at = format!("{origin}:{}", case.line);
        let task = case
            .what
            .get("call")
            .filter(|c| guardrail::answers(rules, c));
        let unsupported = task
            .and_then(|c| serde_json::to_string(c).ok())
            .and_then(|c| guardrail::unsupported_type(rules, &c));
        let ext = match (extract(case, &ctx), &unsupported) {
            (Ok(e), _) => e,
            (Err(_), Some(task)) => Extracted::new(task.clone()),
            (Err(e), None) => {
                failures.push(format!("{at}: {e}"));
                continue;
            }
        };
        let d = match &unsupported {
            Some(task) => guardrail::unsupported(task),
            None => evaluate(rules, &ext, &Activation::default(), Layer::ToolCall),
        };
        if task.is_some() {
            let got = TaskAnswer::of(&d);
            match case
                .what
                .get("answer")
                .map(|a| serde_json::from_value::<TaskAnswer>(a.clone()))
            {
                Some(Ok(want)) if want == got => {}
                Some(Ok(want)) => failures.push(format!(
                    "{at}: expected the answer {}, got {}",
                    serde_json::json!(want),
                    serde_json::json!(got)
                )),
                Some(Err(e)) => failures.push(format!("{at}: bad `answer`: {e}")),
                None => failures.push(format!(
                    "{at}: the rules declare `profile: guardrail`; give the task's `answer: \
                     {{approved, failed_checks, required_confirmation}}` (got {})",
                    serde_json::json!(got)
                )),
            }
        }
        let got = if d.decision < Mode::Approve {
            Mode::Allow
        } else {
            d.decision
        };
        let ids: Vec<&str> = d.matches.iter().map(|m| m.id.as_str()).collect();
        let rule_ok = match (&case.rule, case.expect) {
            (Some(r), Mode::Allow) => !ids.contains(&r.as_str()),
            (Some(r), _) => ids.contains(&r.as_str()),
            (None, _) => true,
        };
        if got != case.expect || !rule_ok {
            failures.push(format!(
                "{at}: expected {:?}{}, got {:?} (matches: {ids:?}) for {}\n    ops: {:?}\n    commands: {:?}\n    unparsable: {:?}",
                case.expect,
                case.rule.as_deref().map(|r| format!(" by {r}")).unwrap_or_default(),
                d.decision,
                case.what,
                ext.ops,
                ext.commands,
                ext.unparsable,
            ));
        }
    }
    failures
}
