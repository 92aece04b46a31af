//! Walks the syntax tree: lists, pipelines, compound commands, redirects and words, keeping
//! the variables and working directory a real shell would have at each point.
use brush_parser::ast;

use super::super::normalize;
use super::super::operation::{Context, Extracted, Operation};
use super::{parse, word, MAX_DEPTH, MAX_WORK};
use crate::rules::Action;

/// What a command prints, as far as it is known, so that `echo … | base64 -d | sh`, `$(…)`
/// and here-docs can be followed into the command that consumes them.
#[derive(Clone, Debug, Default)]
pub(super) struct Feed {
    /// Text known to be printed (echo, printf, here-docs, decoders, `cat` of its stdin).
    pub text: Vec<String>,
    /// Paths (often globs) whose names are printed (`ls DIR`, `find DIR`), for `xargs`.
    pub names: Vec<String>,
    /// The bytes came from the network (`flow`).
    pub downloaded: bool,
}

impl Feed {
    pub fn text(s: impl Into<String>) -> Self {
        Self {
            text: vec![s.into()],
            ..Self::default()
        }
    }

    pub fn joined(&self) -> String {
        self.text.join("\n")
    }

    pub fn is_empty(&self) -> bool {
        self.text.is_empty() && self.names.is_empty()
    }

    pub fn extend(&mut self, other: Self) {
        self.text.extend(other.text);
        self.names.extend(other.names);
        self.downloaded |= other.downloaded;
    }
}

pub(super) struct Walker<'o> {
    pub out: &'o mut Extracted,
    work: usize,
    exhausted: bool,
    /// Output of process substitutions, by the `/dev/fd/N` name the command sees.
    pub fd_feeds: Vec<(String, Feed)>,
    /// `alias NAME=VALUE` definitions seen so far.
    pub aliases: Vec<(String, String)>,
    /// `git config KEY VALUE` settings seen so far, as `KEY=VALUE`: later git commands of
    /// the line run with them (`git config alias.fp 'push -f' && git fp`).
    pub git_config: Vec<String>,
    /// Functions defined so far (name, body), walked again at each call with its arguments
    /// as the positional parameters (`g() { git "$@"; }; g push -f`).
    pub functions: Vec<(String, String)>,
    /// Functions being walked for a call: a recursive call is not walked again.
    pub calling: Vec<String>,
    /// Running on the caller's own stack (see `super::extract`): every text parsed must be
    /// light enough for it.
    inline: bool,
    /// Inline, a text that is not light was met: the walk stopped and must be redone on an
    /// analysis thread.
    pub escalate: bool,
    /// Where downloaded bytes went so far.
    pub flow: super::flow::Flow,
}

impl<'o> Walker<'o> {
    pub fn new(out: &'o mut Extracted) -> Self {
        Self {
            out,
            work: 0,
            exhausted: false,
            fd_feeds: Vec::new(),
            aliases: Vec::new(),
            git_config: Vec::new(),
            functions: Vec::new(),
            calling: Vec::new(),
            inline: false,
            escalate: false,
            flow: super::flow::Flow::default(),
        }
    }

    /// A walker for the caller's thread: it stops (setting `escalate`) at the first text
    /// that is not [`parse::light`].
    pub fn inline(out: &'o mut Extracted) -> Self {
        Self {
            inline: true,
            ..Self::new(out)
        }
    }

    /// Counts work; false (once reported) when the call has become too expensive to follow.
    pub fn spend(&mut self, units: usize) -> bool {
        if self.escalate {
            return false;
        }
        self.work += units;
        if self.work > MAX_WORK && !self.exhausted {
            self.exhausted = true;
            self.out
                .unparsable("the shell command is too complex to analyse (work limit reached)");
        }
        !self.exhausted
    }

    /// A call of a function defined earlier in the line: its body walked again with the
    /// call's arguments as `$1…` and `$@`. `None` when `name` is no such function (or is
    /// already being called: recursion adds nothing the first walk did not see).
    pub fn call_function(
        &mut self,
        name: &str,
        args: &[String],
        ctx: &Context,
        depth: usize,
    ) -> Option<Feed> {
        if self.calling.iter().any(|c| c == name) {
            return None;
        }
        let body = self
            .functions
            .iter()
            .rev()
            .find(|(n, _)| n == name)
            .map(|(_, b)| b.clone())?;
        let mut sub = ctx.clone();
        for (i, a) in args.iter().enumerate() {
            set_var(&mut sub, &(i + 1).to_string(), a);
        }
        set_var(&mut sub, "@", &args.join(" "));
        self.calling.push(name.to_owned());
        let feed = self.script(&body, &mut sub, depth + 1);
        self.calling.pop();
        Some(feed)
    }

    /// Parses and walks a piece of shell text: the command line itself, or text found inside
    /// it that a shell would run (`sh -c`, `eval`, substitutions, decoded payloads).
    pub fn script(&mut self, src: &str, ctx: &mut Context, depth: usize) -> Feed {
        if depth > MAX_DEPTH {
            self.out.unparsable(format!(
                "the shell command is nested too deep (more than {MAX_DEPTH} levels of sh -c, eval, substitutions or wrappers)"
            ));
            return Feed::default();
        }
        if !self.spend(1) {
            return Feed::default();
        }
        let src = normalize::text(src);
        if self.inline && !parse::light(&src) {
            self.escalate = true;
            return Feed::default();
        }
        if depth > 0 {
            self.out.text(src.as_str());
        }
        match parse::program(&src) {
            Ok(program) => {
                let mut feed = Feed::default();
                for list in &program.complete_commands {
                    feed.extend(self.list(list, ctx, depth));
                }
                feed
            }
            Err(why) => {
                self.out
                    .unparsable(format!("the shell command could not be parsed: {why}"));
                self.out
                    .command(src.split_whitespace().collect::<Vec<_>>().join(" "));
                self.rough(&src, ctx, depth);
                Feed::default()
            }
        }
    }

    /// Operations from a whitespace split, for text the parser refused.
    pub fn rough(&mut self, src: &str, ctx: &mut Context, depth: usize) {
        let spaced = src.replace('>', " > ").replace('<', " < ");
        for words in parse::rough_commands(&spaced) {
            let mut args = Vec::new();
            let mut it = words.into_iter();
            while let Some(w) = it.next() {
                match w.as_str() {
                    ">" => {
                        if let Some(target) = it.next().filter(|t| t != ">") {
                            self.path_op(Action::Write, &target, ctx, None);
                        }
                    }
                    "<" => {
                        if let Some(target) = it.next() {
                            self.path_op(Action::Read, &target, ctx, None);
                        }
                    }
                    _ => args.push(w),
                }
            }
            if !args.is_empty() && depth < MAX_DEPTH {
                // The text did not parse, so nothing in it is re-parsed as a command: only
                // the command table's view of these words.
                self.run(&args, ctx, depth + 1, Feed::default());
            }
        }
    }

    fn list(&mut self, list: &ast::CompoundList, ctx: &mut Context, depth: usize) -> Feed {
        let mut feed = Feed::default();
        for item in &list.0 {
            feed.extend(self.and_or(&item.0, ctx, depth));
        }
        feed
    }

    fn and_or(&mut self, list: &ast::AndOrList, ctx: &mut Context, depth: usize) -> Feed {
        let mut feed = self.pipeline(&list.first, ctx, depth);
        for next in &list.additional {
            let (ast::AndOr::And(p) | ast::AndOr::Or(p)) = next;
            feed.extend(self.pipeline(p, ctx, depth));
        }
        feed
    }

    fn pipeline(&mut self, p: &ast::Pipeline, ctx: &mut Context, depth: usize) -> Feed {
        if let [only] = p.seq.as_slice() {
            return self.command(only, ctx, depth, Feed::default());
        }
        // The pipeline as one line, so that command rules like `curl … | sh` can match.
        let line = p
            .seq
            .iter()
            .map(|c| {
                normalize::text(&c.to_string())
                    .split_whitespace()
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .collect::<Vec<_>>()
            .join(" | ");
        self.out.command(line);
        // Each part of a pipeline runs in a subshell: `cd` in one does not move the others.
        // Downloaded bytes taint every later part: `curl … | grep … | sh` runs them.
        let mut feed = Feed::default();
        let mut downloaded = false;
        for c in &p.seq {
            let mut sub = ctx.clone();
            feed.downloaded |= downloaded;
            feed = self.command(c, &mut sub, depth, feed);
            downloaded |= feed.downloaded;
        }
        feed
    }

    fn command(&mut self, c: &ast::Command, ctx: &mut Context, depth: usize, stdin: Feed) -> Feed {
        if !self.spend(1) {
            return Feed::default();
        }
        match c {
            ast::Command::Simple(s) => self.simple(s, ctx, depth, stdin),
            ast::Command::Compound(cc, redirects) => {
                let redirects: Vec<&ast::IoRedirect> =
                    redirects.iter().flat_map(|r| r.0.iter()).collect();
                let stdin = self
                    .redirect_inputs(&redirects, ctx, depth)
                    .unwrap_or(stdin);
                let feed = self.compound(cc, ctx, depth, stdin);
                self.redirect_outputs(&redirects, ctx, depth, &feed)
            }
            ast::Command::Function(f) => {
                // A function runs whenever it is called; walking its body at the definition
                // covers every call.
                let mut sub = ctx.clone();
                let redirects: Vec<&ast::IoRedirect> =
                    f.body.1.iter().flat_map(|r| r.0.iter()).collect();
                let feed = self.compound(&f.body.0, &mut sub, depth, Feed::default());
                self.redirect_outputs(&redirects, &mut sub, depth, &feed);
                self.functions
                    .push((f.fname.to_string(), f.body.to_string()));
                Feed::default()
            }
            ast::Command::ExtendedTest(test, _) => {
                self.test_expr(&test.expr, ctx, depth);
                Feed::default()
            }
        }
    }

    fn test_expr(&mut self, e: &ast::ExtendedTestExpr, ctx: &mut Context, depth: usize) {
        match e {
            ast::ExtendedTestExpr::And(a, b) | ast::ExtendedTestExpr::Or(a, b) => {
                self.test_expr(a, ctx, depth);
                self.test_expr(b, ctx, depth);
            }
            ast::ExtendedTestExpr::Not(a) | ast::ExtendedTestExpr::Parenthesized(a) => {
                self.test_expr(a, ctx, depth);
            }
            ast::ExtendedTestExpr::UnaryTest(_, w) => {
                self.words(&w.value, ctx, depth);
            }
            ast::ExtendedTestExpr::BinaryTest(_, a, b) => {
                self.words(&a.value, ctx, depth);
                self.words(&b.value, ctx, depth);
            }
        }
    }

    fn compound(
        &mut self,
        c: &ast::CompoundCommand,
        ctx: &mut Context,
        depth: usize,
        stdin: Feed,
    ) -> Feed {
        match c {
            ast::CompoundCommand::BraceGroup(g) => self.list_with_stdin(&g.list, ctx, depth, stdin),
            ast::CompoundCommand::Subshell(s) => {
                let mut sub = ctx.clone();
                self.list_with_stdin(&s.list, &mut sub, depth, stdin)
            }
            ast::CompoundCommand::ForClause(f) => {
                let values: Vec<String> = f
                    .values
                    .iter()
                    .flatten()
                    .flat_map(|w| self.words(&w.value, ctx, depth))
                    .collect();
                let mut feed = Feed::default();
                if values.is_empty() {
                    feed.extend(self.list(&f.body.list, ctx, depth));
                }
                // Walk the body once per value (bounded by the work budget), so that
                // `for f in id_rsa config; do cat ~/.ssh/$f; done` names each file.
                for v in values {
                    set_var(ctx, &f.variable_name, &v);
                    feed.extend(self.list(&f.body.list, ctx, depth));
                    if self.exhausted {
                        break;
                    }
                }
                feed
            }
            ast::CompoundCommand::ArithmeticForClause(f) => self.list(&f.body.list, ctx, depth),
            ast::CompoundCommand::CaseClause(c) => {
                self.words(&c.value.value, ctx, depth);
                let mut feed = Feed::default();
                for item in &c.cases {
                    for p in &item.patterns {
                        self.words(&p.value, ctx, depth);
                    }
                    if let Some(cmd) = &item.cmd {
                        feed.extend(self.list(cmd, ctx, depth));
                    }
                }
                feed
            }
            ast::CompoundCommand::IfClause(i) => {
                let mut feed = self.list(&i.condition, ctx, depth);
                feed.extend(self.list(&i.then, ctx, depth));
                for e in i.elses.iter().flatten() {
                    if let Some(cond) = &e.condition {
                        feed.extend(self.list(cond, ctx, depth));
                    }
                    feed.extend(self.list(&e.body, ctx, depth));
                }
                feed
            }
            ast::CompoundCommand::WhileClause(w) | ast::CompoundCommand::UntilClause(w) => {
                let mut feed = self.list_with_stdin(&w.0, ctx, depth, stdin);
                feed.extend(self.list(&w.1.list, ctx, depth));
                feed
            }
            ast::CompoundCommand::Arithmetic(a) => {
                // `(( x = $(cmd) ))` runs cmd.
                word::expand_heredoc(&a.expr.value, ctx, &mut |inner| {
                    self.substitution(inner, ctx, depth)
                });
                Feed::default()
            }
            ast::CompoundCommand::Coprocess(c) => {
                let mut sub = ctx.clone();
                self.command(&c.body, &mut sub, depth, Feed::default())
            }
        }
    }

    /// A list whose first command reads the given stdin (`{ sh; } <<EOF`).
    fn list_with_stdin(
        &mut self,
        list: &ast::CompoundList,
        ctx: &mut Context,
        depth: usize,
        stdin: Feed,
    ) -> Feed {
        if stdin.is_empty() {
            return self.list(list, ctx, depth);
        }
        let mut feed = Feed::default();
        let mut stdin = Some(stdin);
        for item in &list.0 {
            let first = &item.0.first;
            if let (Some(input), [only]) = (stdin.take(), first.seq.as_slice()) {
                feed.extend(self.command(only, ctx, depth, input));
                for next in &item.0.additional {
                    let (ast::AndOr::And(p) | ast::AndOr::Or(p)) = next;
                    feed.extend(self.pipeline(p, ctx, depth));
                }
            } else {
                feed.extend(self.and_or(&item.0, ctx, depth));
            }
        }
        feed
    }

    fn simple(
        &mut self,
        c: &ast::SimpleCommand,
        ctx: &mut Context,
        depth: usize,
        stdin: Feed,
    ) -> Feed {
        let mut parts = Parts::default();
        for item in c.prefix.iter().flat_map(|p| p.0.iter()) {
            self.item(item, true, ctx, depth, &mut parts);
        }
        if let Some(name) = &c.word_or_name {
            parts.words.extend(self.words(&name.value, ctx, depth));
        }
        for item in c.suffix.iter().flat_map(|s| s.0.iter()) {
            self.item(item, false, ctx, depth, &mut parts);
        }
        let Parts {
            assignments,
            redirects,
            words,
        } = parts;

        if words.is_empty() {
            // Plain assignments persist in this shell.
            for (name, value) in &assignments {
                set_var(ctx, name, value);
            }
            self.redirect_inputs(&redirects, ctx, depth);
            return self.redirect_outputs(&redirects, ctx, depth, &Feed::default());
        }
        let stdin = self
            .redirect_inputs(&redirects, ctx, depth)
            .unwrap_or(stdin);
        // What a command makes of downloaded bytes is downloaded bytes still.
        let tainted = stdin.downloaded;
        let mut feed = if assignments.is_empty() {
            self.run(&words, ctx, depth, stdin)
        } else {
            // `VAR=x cmd`: the command's environment only.
            let mut sub = ctx.clone();
            for (name, value) in &assignments {
                set_var(&mut sub, name, value);
            }
            let feed = self.run(&words, &mut sub, depth, stdin);
            ctx.cwd = sub.cwd;
            feed
        };
        feed.downloaded |= tainted;
        self.redirect_outputs(&redirects, ctx, depth, &feed)
    }

    fn item<'a>(
        &mut self,
        item: &'a ast::CommandPrefixOrSuffixItem,
        in_prefix: bool,
        ctx: &mut Context,
        depth: usize,
        parts: &mut Parts<'a>,
    ) {
        match item {
            ast::CommandPrefixOrSuffixItem::IoRedirect(r) => parts.redirects.push(r),
            ast::CommandPrefixOrSuffixItem::Word(w) => {
                parts.words.extend(self.words(&w.value, ctx, depth));
            }
            ast::CommandPrefixOrSuffixItem::AssignmentWord(a, w) => {
                if !in_prefix {
                    // `export X=…` and the like: the builtin sees the expanded word.
                    parts.words.extend(self.words(&w.value, ctx, depth));
                    return;
                }
                let value = self.assignment_value(&a.value, ctx, depth);
                if let ast::AssignmentName::VariableName(name) = &a.name {
                    parts.assignments.push((name.clone(), value));
                }
            }
            ast::CommandPrefixOrSuffixItem::ProcessSubstitution(kind, sub) => {
                let name = self.process_substitution(kind, sub, ctx, depth);
                parts.words.push(name);
            }
        }
    }

    fn assignment_value(
        &mut self,
        value: &ast::AssignmentValue,
        ctx: &mut Context,
        depth: usize,
    ) -> String {
        match value {
            ast::AssignmentValue::Scalar(w) => self.word_one(&w.value, ctx, depth),
            ast::AssignmentValue::Array(items) => items
                .iter()
                .map(|(_, w)| self.word_one(&w.value, ctx, depth))
                .collect::<Vec<_>>()
                .join(" "),
        }
    }

    fn process_substitution(
        &mut self,
        kind: &ast::ProcessSubstitutionKind,
        sub: &ast::SubshellCommand,
        ctx: &mut Context,
        depth: usize,
    ) -> String {
        let mut inner = ctx.clone();
        let feed = self.list(&sub.list, &mut inner, depth);
        let name = format!("/dev/fd/{}", 63 - self.fd_feeds.len().min(50));
        if matches!(kind, ast::ProcessSubstitutionKind::Read) {
            self.fd_feeds.push((name.clone(), feed));
        }
        name
    }

    /// Here-docs and here-strings become the command's stdin; `<` files are read.
    fn redirect_inputs(
        &mut self,
        redirects: &[&ast::IoRedirect],
        ctx: &mut Context,
        depth: usize,
    ) -> Option<Feed> {
        let mut stdin = None;
        for r in redirects {
            match r {
                ast::IoRedirect::HereDocument(_, doc) => {
                    let body = if doc.requires_expansion {
                        word::expand_heredoc(&doc.doc.value, ctx, &mut |inner| {
                            self.substitution(inner, ctx, depth)
                        })
                    } else {
                        doc.doc.value.clone()
                    };
                    let body = normalize::text(&body);
                    self.out.text(body.as_str());
                    stdin = Some(Feed::text(body));
                }
                ast::IoRedirect::HereString(_, w) => {
                    let mut body = self.word_one(&w.value, ctx, depth);
                    body.push('\n');
                    self.out.text(body.as_str());
                    stdin = Some(Feed::text(body));
                }
                ast::IoRedirect::File(fd, kind, target) => match target {
                    ast::IoFileRedirectTarget::Filename(w) => {
                        if matches!(
                            kind,
                            ast::IoFileRedirectKind::Read | ast::IoFileRedirectKind::ReadAndWrite
                        ) {
                            for path in self.words(&w.value, ctx, depth) {
                                self.path_op(Action::Read, &path, ctx, None);
                                if fd.is_none_or(|fd| fd == 0) && self.is_download(&path, ctx) {
                                    stdin = Some(downloaded_feed());
                                }
                                // bash's network redirects: `sh < /dev/tcp/HOST/PORT`, or
                                // `exec 3<>/dev/tcp/…` read later through `<&3`.
                                if path.starts_with("/dev/tcp/") || path.starts_with("/dev/udp/") {
                                    match fd {
                                        None | Some(0) => stdin = Some(downloaded_feed()),
                                        Some(n) => self.flow.net_fds.push(n.to_string()),
                                    }
                                }
                            }
                        }
                    }
                    ast::IoFileRedirectTarget::ProcessSubstitution(k, sub) => {
                        let name = self.process_substitution(k, sub, ctx, depth);
                        if let Some(feed) = self.fd_feed(&name) {
                            stdin = Some(feed);
                        }
                    }
                    ast::IoFileRedirectTarget::Duplicate(w)
                        if matches!(kind, ast::IoFileRedirectKind::DuplicateInput) =>
                    {
                        for path in self.words(&w.value, ctx, depth) {
                            if !is_fd(&path) {
                                self.path_op(Action::Read, &path, ctx, None);
                            } else if self.flow.net_fds.contains(&path) {
                                stdin = Some(downloaded_feed());
                            }
                        }
                    }
                    _ => {}
                },
                ast::IoRedirect::OutputAndError(..) => {}
            }
        }
        stdin
    }

    /// `>`, `>>`, `>|`, `&>`, `<>` and `>&file` write their target, with the command's
    /// output as content when it is known. Returns the output that still reaches stdout.
    fn redirect_outputs(
        &mut self,
        redirects: &[&ast::IoRedirect],
        ctx: &mut Context,
        depth: usize,
        output: &Feed,
    ) -> Feed {
        let content = (!output.text.is_empty()).then(|| output.joined());
        let mut stdout_kept = true;
        for r in redirects {
            let (fd, target) = match r {
                ast::IoRedirect::File(fd, kind, target) => {
                    let writes = matches!(
                        kind,
                        ast::IoFileRedirectKind::Write
                            | ast::IoFileRedirectKind::Append
                            | ast::IoFileRedirectKind::Clobber
                            | ast::IoFileRedirectKind::ReadAndWrite
                            | ast::IoFileRedirectKind::DuplicateOutput
                    );
                    match target {
                        ast::IoFileRedirectTarget::Filename(w) if writes => (*fd, &w.value),
                        ast::IoFileRedirectTarget::Duplicate(w)
                            if matches!(kind, ast::IoFileRedirectKind::DuplicateOutput) =>
                        {
                            (*fd, &w.value)
                        }
                        ast::IoFileRedirectTarget::ProcessSubstitution(k, sub) if writes => {
                            self.process_substitution(k, sub, ctx, depth);
                            continue;
                        }
                        _ => continue,
                    }
                }
                ast::IoRedirect::OutputAndError(w, _) => (None, &w.value),
                _ => continue,
            };
            for path in self.words(target, ctx, depth) {
                if is_fd(&path) {
                    continue;
                }
                if fd.is_none_or(|fd| fd == 1) {
                    stdout_kept = false;
                }
                let content = if fd.is_none_or(|fd| fd == 1) {
                    if output.downloaded {
                        self.downloaded_to(&path, ctx);
                    }
                    content.clone()
                } else {
                    None
                };
                self.path_op(Action::Write, &path, ctx, content);
            }
        }
        if stdout_kept {
            output.clone()
        } else {
            Feed::default()
        }
    }

    /// The fields a raw word expands to; command substitutions inside it are walked.
    pub fn words(&mut self, raw: &str, ctx: &Context, depth: usize) -> Vec<String> {
        if !self.spend(1) {
            return Vec::new();
        }
        let fields = word::expand(raw, ctx, &mut |inner| self.substitution(inner, ctx, depth));
        fields.iter().map(|f| normalize::text(f)).collect()
    }

    /// One string (assignment values, here-strings): no brace expansion or splitting.
    fn word_one(&mut self, raw: &str, ctx: &Context, depth: usize) -> String {
        if !self.spend(1) {
            return String::new();
        }
        normalize::text(&word::expand_one(raw, ctx, &mut |inner| {
            self.substitution(inner, ctx, depth)
        }))
    }

    /// `$(…)` and backticks: the inner command is walked in a subshell; what it prints (when
    /// known) is the substitution's value.
    fn substitution(&mut self, inner: &str, ctx: &Context, depth: usize) -> String {
        let mut sub = ctx.clone();
        let feed = self.script(inner, &mut sub, depth + 1);
        let mut value = feed.joined();
        if feed.downloaded {
            value.push_str(super::flow::DOWNLOADED);
        }
        value
    }

    pub fn fd_feed(&self, name: &str) -> Option<Feed> {
        self.fd_feeds
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, f)| f.clone())
    }

    /// A recursive read (archivers, copies, `grep -r`): the path itself and `PATH/**`, so
    /// rules on files below a directory see the directory being read whole.
    pub fn tree_read(&mut self, raw: &str, ctx: &Context) {
        self.path_op(Action::Read, raw, ctx, None);
        if let Some(path) = normalize::path(raw, ctx) {
            if !pseudo_file(&path) {
                let tree = format!("{}/**", path.trim_end_matches('/'));
                self.out.op(Operation::path(Action::Read, tree));
            }
        }
    }

    /// A delete of `raw` and of everything under it (`rm -r`, `tar --remove-files`): rules on
    /// a protected tree inside (`/var/lib/carapace/**` for `rm -rf /var/lib`) see it.
    pub fn tree_delete(&mut self, raw: &str, ctx: &Context) {
        self.tree_op(Action::Delete, raw, ctx);
    }

    /// A write of `raw` and of names under it that the command does not tell (an archive
    /// unpacked into it, a directory's contents copied in): rules on any file inside
    /// (`~/.bashrc` for `tar -x -C ~`) see it.
    pub fn tree_write(&mut self, raw: &str, ctx: &Context) {
        self.tree_op(Action::Write, raw, ctx);
    }

    fn tree_op(&mut self, action: Action, raw: &str, ctx: &Context) {
        self.path_op(action, raw, ctx, None);
        if let Some(path) = normalize::path(raw, ctx) {
            if !pseudo_file(&path) {
                let tree = format!("{}/**", path.trim_end_matches('/'));
                self.out.op(Operation::path(action, tree));
            }
        }
    }

    /// An operation on a path as the command wrote it (pseudo-files are skipped).
    pub fn path_op(&mut self, action: Action, raw: &str, ctx: &Context, content: Option<String>) {
        let Some(path) = normalize::path(raw, ctx) else {
            return;
        };
        if pseudo_file(&path) {
            return;
        }
        // Bash opens /dev/tcp/HOST/PORT and /dev/udp/HOST/PORT as sockets.
        if let Some(rest) = path
            .strip_prefix("/dev/tcp/")
            .or_else(|| path.strip_prefix("/dev/udp/"))
        {
            let (host, port) = rest.split_once('/').unwrap_or((rest, ""));
            self.host_op(host, port.parse().ok(), content);
            return;
        }
        if action == Action::Read && self.holds_download(&path) {
            self.flow.read_download = true;
        }
        let mut op = Operation::path(action, path);
        op.content = content;
        self.out.op(op);
    }
}

/// A simple command's items, sorted.
#[derive(Default)]
struct Parts<'a> {
    assignments: Vec<(String, String)>,
    redirects: Vec<&'a ast::IoRedirect>,
    words: Vec<String>,
}

/// Streams that are not files worth reporting.
fn pseudo_file(path: &str) -> bool {
    matches!(
        path,
        "/dev/null" | "/dev/stdin" | "/dev/stdout" | "/dev/stderr" | "/dev/tty" | "/dev/zero"
    ) || path.starts_with("/dev/fd/")
        || path.starts_with("/proc/self/fd/")
}

/// A redirect target naming a file descriptor (`2>&1`, `>&-`).
/// What a network descriptor feeds a command.
fn downloaded_feed() -> Feed {
    Feed {
        downloaded: true,
        ..Feed::default()
    }
}

fn is_fd(word: &str) -> bool {
    let w = word.trim_end_matches('-');
    w.is_empty() || w.bytes().all(|b| b.is_ascii_digit())
}

pub(super) fn set_var(ctx: &mut Context, name: &str, value: &str) {
    if name == "HOME" {
        value.clone_into(&mut ctx.home);
    } else if name == "PWD" {
        value.clone_into(&mut ctx.cwd);
    }
    match ctx.env.iter_mut().find(|(k, _)| k == name) {
        Some((_, v)) => value.clone_into(v),
        None => ctx.env.push((name.to_owned(), value.to_owned())),
    }
}

pub(super) fn unset_var(ctx: &mut Context, name: &str) {
    ctx.env.retain(|(k, _)| k != name);
}
