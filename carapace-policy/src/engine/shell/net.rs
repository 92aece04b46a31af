//! Network commands: where they connect (host and port, canonical), what they send
//! (`content`), and the files they read or write on the way.
use super::super::normalize;
use super::super::operation::{Context, Extracted, Operation};
use super::args;
use super::flow::{self, Reach};
use super::names::{self, remote_host};
use super::walk::{downloaded_feed, Feed, Walker};
use crate::rules::Action;

/// Options of curl that take a value.
const CURL_VALUED: &[&str] = &[
    "-d",
    "--data",
    "--data-raw",
    "--data-binary",
    "--data-ascii",
    "--data-urlencode",
    "--json",
    "-F",
    "--form",
    "--form-string",
    "-T",
    "--upload-file",
    "-o",
    "--output",
    "-H",
    "--header",
    "-A",
    "--user-agent",
    "-e",
    "--referer",
    "-u",
    "--user",
    "-x",
    "--proxy",
    "-X",
    "--request",
    "-b",
    "--cookie",
    "-c",
    "--cookie-jar",
    "-K",
    "--config",
    "-w",
    "--write-out",
    "-m",
    "--max-time",
    "--connect-timeout",
    "-r",
    "--range",
    "--retry",
    "--resolve",
    "--connect-to",
    "--url",
    "-E",
    "--cert",
    "--key",
    "--cacert",
    "--capath",
    "-D",
    "--dump-header",
    "--trace",
    "--trace-ascii",
    "--stderr",
    "-z",
    "--time-cond",
    "-Y",
    "-y",
    "--limit-rate",
    "--interface",
    "--local-port",
    "--netrc-file",
    "-Q",
    "--quote",
    "--mail-from",
    "--mail-rcpt",
    "-U",
    "--proxy-user",
    "--libcurl",
    "--output-dir",
    "--unix-socket",
    "--abstract-unix-socket",
    "--variable",
    "-C",
    "--continue-at",
    "--max-filesize",
    "--oauth2-bearer",
    "--aws-sigv4",
    "--output-dir",
];

/// Options of wget, wget2 and aria2c that take a value.
const WGET_VALUED: &[&str] = &[
    "-O",
    "-o",
    "-a",
    "-P",
    "-i",
    "-e",
    "-U",
    "-T",
    "-t",
    "-w",
    "-Q",
    "-l",
    "-A",
    "-R",
    "-D",
    "-d",
    "--output-document",
    "--output-file",
    "--append-output",
    "--directory-prefix",
    "--input-file",
    "--execute",
    "--user-agent",
    "--timeout",
    "--tries",
    "--wait",
    "--quota",
    "--level",
    "--accept",
    "--reject",
    "--domains",
    "--header",
    "--post-data",
    "--post-file",
    "--body-data",
    "--body-file",
    "--method",
    "--user",
    "--password",
    "--http-user",
    "--http-password",
    "--load-cookies",
    "--save-cookies",
    "--ca-certificate",
    "--certificate",
    "--private-key",
    "--referer",
    "--dir",
    "--out",
];

impl Walker<'_> {
    /// A network operation to the host and port of a URL (or bare `host[:port]`).
    pub fn url_op(&mut self, raw: &str, content: Option<String>) {
        let named = normalize::urls(raw);
        if let Some(((host, port), others)) = named.split_last() {
            for (other, other_port) in others {
                self.host_op(other, *other_port, content.clone());
            }
            self.host_op(host, *port, content);
        } else if normalize::file_url_path(raw.trim()).is_some() {
            // `curl file:///…` reads a local file.
            if let Some(path) = normalize::path(raw, &Context::default()) {
                self.out.op(Operation::path(Action::Read, path));
            }
        }
    }

    pub fn host_op(&mut self, host: &str, port: Option<u16>, content: Option<String>) {
        // `$(whoami).exfil.example`: the labels after the unknown part are the host named.
        let known = host
            .rsplit_once(super::walk::UNKNOWN)
            .map_or(host, |(_, after)| after);
        let host = normalize::host(known.trim_start_matches('.'));
        if host.is_empty() {
            return;
        }
        let mut op = Operation::network(host, port);
        op.content = content;
        self.out.op(op);
    }

    /// The address curl was told to connect to instead of the URL's host (the first of a
    /// `--resolve` list); an empty one keeps the URL's.
    fn redirected_to(&mut self, addr: Option<&str>, port: Option<&str>) {
        let Some(addr) = addr.and_then(|a| a.split(',').next()) else {
            return;
        };
        let addr = addr.trim_start_matches('[').trim_end_matches(']');
        if !addr.is_empty() {
            self.host_op(addr, port.and_then(|p| p.parse().ok()), None);
        }
    }

    /// A listener or a connection whose peer is unknown.
    fn port_op(&mut self, port: Option<u16>) {
        self.out.op(Operation {
            action: Some(Action::Network),
            port,
            ..Operation::default()
        });
    }

    /// A network client: the hosts and URLs it reaches, what it sends and where it saves
    /// what it fetches; one method per tool family.
    pub fn network(
        &mut self,
        name: &str,
        args: &[String],
        ctx: &mut Context,
        depth: usize,
        stdin: Feed,
    ) -> Feed {
        let piped = (!stdin.text.is_empty()).then(|| stdin.joined());
        // Only when some file could hold the environment: this normalises every argument
        // as a path, on every network command.
        let may_hold_environment = self.files.iter().any(|(_, f)| f.environment)
            || self.fd_feeds.iter().any(|(_, f)| f.environment)
            || args.iter().any(|a| a.contains("environ"));
        let sends_environ_file = may_hold_environment
            && args.iter().any(|a| {
                let file = a.rsplit_once('@').map_or(
                    a.strip_prefix("--post-file=").unwrap_or(a.as_str()),
                    |(_, f)| f,
                );
                self.file_feed(file, ctx).is_some_and(|f| f.environment)
            });
        if (stdin.environment && sends_stdin(name, args))
            || self.env_words > 0
            || sends_environ_file
        {
            // The environment (API keys, tokens) sent out: the canonical line the
            // `environment-to-network` rule names.
            self.out.command("env | curl".to_owned());
        }
        match name {
            "curl" => self.net_curl(args, ctx, piped.as_ref()),
            "wget" | "wget2" | "aria2c" => self.net_wget(name, args, ctx, piped.as_ref()),
            "nc" | "ncat" | "netcat" => self.net_nc(args, ctx, depth, piped.as_ref()),
            "socat" => self.net_socat(args, ctx, depth, piped.as_ref()),
            "ssh" | "autossh" | "mosh" => self.net_ssh(args, ctx, depth, piped, stdin.downloaded),
            "sshpass" => self.net_sshpass(args, ctx, depth, stdin),
            "ssh-copy-id" | "sftp" => self.net_ssh_copy_id(name, args, ctx),
            "http" | "https" | "xh" => self.net_http(name, args, ctx, piped),
            _ => self.net_other(name, args, ctx, piped.as_ref()),
        }
    }

    #[expect(
        clippy::too_many_lines,
        reason = "one pass over curl's options, each kind of value in turn"
    )]
    fn net_curl(&mut self, args: &[String], ctx: &mut Context, piped: Option<&String>) -> Feed {
        let o = args::parse(args, CURL_VALUED, false);
        let mut sent = Vec::new();
        for d in o.values(&[
            "-d",
            "--data",
            "--data-binary",
            "--data-ascii",
            "--json",
            "--data-urlencode",
            "--data-raw",
        ]) {
            let file = if let Some(f) = d.strip_prefix('@') {
                Some(f)
            } else {
                // --data-urlencode name@file
                d.split_once('@')
                    .filter(|(n, _)| !n.contains(['=', ' ']))
                    .filter(|_| !d.contains('='))
                    .map(|(_, f)| f)
            };
            match file {
                Some("-") => sent.extend(piped.cloned()),
                Some(f) => self.path_op(Action::Read, f, ctx, None),
                None => sent.push(d.to_owned()),
            }
        }
        for f in o.values(&["-F", "--form"]) {
            match f.split_once('=') {
                Some((_, v)) if v.starts_with(['@', '<']) => {
                    let file = v[1..].split(';').next().unwrap_or("");
                    self.path_op(Action::Read, file, ctx, None);
                }
                _ => sent.push(f.to_owned()),
            }
        }
        sent.extend(o.values(&["--form-string"]).into_iter().map(str::to_owned));
        // `--resolve HOST:PORT:ADDR` and `--connect-to HOST:PORT:ADDR:PORT` send the
        // request to ADDR, whatever the URL's host.
        for r in o.values(&["--resolve"]) {
            self.redirected_to(r.splitn(3, ':').nth(2), r.split(':').nth(1));
        }
        for c in o.values(&["--connect-to"]) {
            let mut parts = c.splitn(4, ':').skip(2);
            self.redirected_to(parts.next(), parts.next());
        }
        // The connection goes to a local socket (e.g. the docker daemon's), which
        // the kernel sees as a connect to that path.
        for sock in o.values(&["--unix-socket"]) {
            self.path_op(Action::Network, sock, ctx, None);
        }
        for f in o.values(&["-T", "--upload-file"]) {
            if f == "-" || f == "." {
                sent.extend(piped.cloned());
            } else {
                self.path_op(Action::Read, f, ctx, None);
            }
        }
        for h in o.values(&[
            "-H",
            "--header",
            "-u",
            "--user",
            "--oauth2-bearer",
            "-U",
            "--proxy-user",
        ]) {
            if let Some(f) = h.strip_prefix('@') {
                self.path_op(Action::Read, f, ctx, None);
            } else {
                sent.push(h.to_owned());
            }
        }
        for f in o.values(&[
            "-K",
            "--config",
            "--cert",
            "-E",
            "--key",
            "--cacert",
            "--netrc-file",
        ]) {
            self.path_op(Action::Read, f, ctx, None);
        }
        for b in o.values(&["-b", "--cookie"]) {
            if !b.contains('=') {
                self.path_op(Action::Read, b, ctx, None);
            }
        }
        for f in o.values(&[
            "-c",
            "--cookie-jar",
            "-D",
            "--dump-header",
            "--trace",
            "--trace-ascii",
            "--stderr",
            "--libcurl",
        ]) {
            if f != "-" {
                self.path_op(Action::Write, f, ctx, None);
            }
        }
        // Saved in --output-dir when the name is relative.
        let in_dir = |f: &str| match o.value(&["--output-dir"]) {
            Some(dir) if !f.starts_with(['/', '~']) => {
                format!("{}/{f}", dir.trim_end_matches('/'))
            }
            _ => f.to_owned(),
        };
        for f in o
            .values(&["-o", "--output"])
            .into_iter()
            .filter(|f| *f != "-")
        {
            self.path_op(Action::Write, &in_dir(f), ctx, None);
            self.downloaded_to(&in_dir(f), ctx);
        }
        // -O / --remote-name: saved under the URL's last path segment.
        if o.has(&["-O", "--remote-name", "--remote-name-all"]) {
            for u in o.operands.iter().copied().chain(o.values(&["--url"])) {
                let path = u.split(['?', '#']).next().unwrap_or(u);
                if let Some(file) = path.rsplit('/').next().filter(|f| !f.is_empty()) {
                    self.path_op(Action::Write, &in_dir(file), ctx, None);
                    self.downloaded_to(&in_dir(file), ctx);
                }
            }
        }
        for p in o.values(&["-x", "--proxy"]) {
            self.url_op(p, None);
        }
        let content = (!sent.is_empty()).then(|| sent.join("\n"));
        for c in &sent {
            self.out.text(c.as_str());
        }
        for u in o.operands.iter().copied().chain(o.values(&["--url"])) {
            self.url_op(u, content.clone());
        }
        Feed::default()
    }

    fn net_wget(
        &mut self,
        name: &str,
        args: &[String],
        ctx: &mut Context,
        piped: Option<&String>,
    ) -> Feed {
        let o = args::parse(args, WGET_VALUED, false);
        let mut sent: Vec<String> = o
            .values(&[
                "--post-data",
                "--body-data",
                "--header",
                "--password",
                "--http-password",
            ])
            .into_iter()
            .map(str::to_owned)
            .collect();
        for f in o.values(&[
            "--post-file",
            "--body-file",
            "-i",
            "--input-file",
            "--load-cookies",
            "--ca-certificate",
            "--certificate",
            "--private-key",
        ]) {
            if f == "-" {
                sent.extend(piped.cloned());
            } else {
                self.path_op(Action::Read, f, ctx, None);
            }
        }
        let content = (!sent.is_empty()).then(|| sent.join("\n"));
        for u in &o.operands {
            self.url_op(u, content.clone());
        }
        // aria2c's `-o NAME` names the file saved in `-d DIR` (wget's `-o` is a log).
        if name == "aria2c" {
            let dir = o.value(&["-d", "--dir"]).unwrap_or(".");
            for f in o.values(&["-o", "--out"]) {
                let file = format!("{}/{f}", dir.trim_end_matches('/'));
                self.path_op(Action::Write, &file, ctx, None);
                self.downloaded_to(&file, ctx);
            }
        }
        let out_file = o.value(&["-O", "--output-document", "--out"]);
        for f in o
            .values(&[
                "-o",
                "--output-file",
                "-a",
                "--append-output",
                "--save-cookies",
            ])
            .into_iter()
            .chain(out_file)
        {
            if f != "-" {
                self.path_op(Action::Write, f, ctx, None);
            }
        }
        if let Some(f) = out_file.filter(|f| *f != "-") {
            self.downloaded_to(f, ctx);
        }
        // aria2c -o NAME: the file's name in -d DIR.
        let named = o.value(&["-o"]).filter(|_| name == "aria2c");
        if let Some(n) = named {
            let dir = o.value(&["-d", "--dir"]).unwrap_or(".");
            let path = format!("{}/{n}", dir.trim_end_matches('/'));
            self.path_op(Action::Write, &path, ctx, None);
            self.downloaded_to(&path, ctx);
        }
        // A recursive fetch lands anywhere under its directory.
        if o.has(&["-r", "--recursive", "-m", "--mirror"]) {
            let dir = o.value(&["-P", "--directory-prefix"]).unwrap_or(".");
            self.downloaded_tree(dir, ctx);
        }
        if out_file.is_none() && named.is_none() {
            // Saved under the URL's last path segment, in -P DIR or here.
            let dir = o
                .value(&["-P", "--directory-prefix", "-d", "--dir"])
                .unwrap_or(".");
            for u in &o.operands {
                let path = u.split(['?', '#']).next().unwrap_or(u);
                let after_host = path.split_once("://").map_or(path, |(_, r)| r);
                let file = after_host
                    .split_once('/')
                    .map_or("", |(_, p)| p)
                    .rsplit('/')
                    .next()
                    .unwrap_or("");
                let file = if file.is_empty() { "index.html" } else { file };
                self.path_op(Action::Write, &format!("{dir}/{file}"), ctx, None);
                self.downloaded_to(&format!("{dir}/{file}"), ctx);
            }
        }
        Feed::default()
    }

    fn net_nc(
        &mut self,
        args: &[String],
        ctx: &mut Context,
        depth: usize,
        piped: Option<&String>,
    ) -> Feed {
        let o = args::parse(
            args,
            &[
                "-p",
                "-s",
                "-w",
                "-i",
                "-q",
                "-x",
                "-X",
                "-e",
                "-c",
                "-I",
                "-O",
                "-T",
                "-V",
                "-W",
                "-g",
                "-G",
                "-P",
                "-o",
                "--exec",
                "--sh-exec",
                "--lua-exec",
                "--output",
                "--proxy",
                "--proxy-type",
                "--source-port",
                "--wait",
            ],
            false,
        );
        // The program nc runs reads the connection: `nc HOST PORT -e /bin/sh` is a
        // shell that runs whatever the other end sends.
        for e in o.values(&["-e", "--exec"]) {
            self.run(
                &e.split_whitespace().map(str::to_owned).collect::<Vec<_>>(),
                &mut ctx.clone(),
                depth + 1,
                downloaded_feed(),
            );
        }
        for c in o.values(&["-c", "--sh-exec"]) {
            self.run(
                &["sh".to_owned(), "-c".to_owned(), c.to_owned()],
                &mut ctx.clone(),
                depth + 1,
                downloaded_feed(),
            );
        }
        for f in o.values(&["-o", "--output"]) {
            self.path_op(Action::Write, f, ctx, None);
        }
        // `-U PATH`: a unix socket (the docker daemon's), a connect to that path.
        if o.has(&["-U", "--unixsock"]) {
            for sock in &o.operands {
                self.path_op(Action::Network, sock, ctx, None);
            }
            return Feed::default();
        }
        let flag_port = o
            .value(&["-p", "--source-port"])
            .and_then(|p| p.parse().ok());
        match o.operands.as_slice() {
            [] => self.port_op(flag_port),
            [host] if o.has(&["-l", "--listen"]) => {
                self.port_op(host.parse().ok().or(flag_port));
            }
            [host, rest @ ..] => {
                let port = rest.first().and_then(|p| p.parse().ok());
                self.host_op(host, port, piped.cloned());
            }
        }
        Feed::default()
    }

    fn net_socat(
        &mut self,
        args: &[String],
        ctx: &mut Context,
        depth: usize,
        piped: Option<&String>,
    ) -> Feed {
        let addresses: Vec<&String> = args
            .iter()
            .filter(|a| !a.starts_with('-') || a.len() == 1)
            .collect();
        // A program socat runs reads what the other address sends: from a network
        // address, that is a remote party's input (`socat TCP:HOST:PORT EXEC:sh`).
        let networked = addresses.iter().any(|a| is_socat_network(a));
        for a in addresses {
            self.socat_address(a, ctx, depth, piped, networked);
        }
        Feed::default()
    }

    fn net_ssh(
        &mut self,
        args: &[String],
        ctx: &mut Context,
        depth: usize,
        piped: Option<String>,
        downloaded: bool,
    ) -> Feed {
        let o = args::parse(
            args,
            &[
                "-b",
                "-c",
                "-D",
                "-E",
                "-e",
                "-F",
                "-I",
                "-i",
                "-J",
                "-L",
                "-l",
                "-m",
                "-O",
                "-o",
                "-p",
                "-Q",
                "-R",
                "-S",
                "-W",
                "-w",
                "-B",
                "-M",
                "--ssh",
                "--port",
                "--server",
                "--predict",
                "--family",
            ],
            true,
        );
        for f in o.values(&["-i", "-F"]) {
            self.path_op(Action::Read, f, ctx, None);
        }
        for f in o.values(&["-E"]) {
            self.path_op(Action::Write, f, ctx, None);
        }
        let mut port = o.value(&["-p"]).and_then(|p| p.parse().ok()).or(Some(22));
        for opt in o.values(&["-o"]) {
            let (k, v) = opt.split_once(['=', ' ']).unwrap_or((opt, ""));
            match k.to_ascii_lowercase().as_str() {
                "proxycommand" | "localcommand" | "knownhostscommand" | "remotecommand" => {
                    self.script(v, &mut ctx.clone(), depth + 1);
                }
                "port" => port = v.trim().parse().ok().or(port),
                "identityfile" | "userknownhostsfile" | "certificatefile" => {
                    self.path_op(Action::Read, v.trim(), ctx, None);
                }
                _ => {}
            }
        }
        for j in o.values(&["-J"]) {
            for hop in j.split(',') {
                self.ssh_destination(hop, Some(22), None);
            }
        }
        let Some((dest, remote)) = o.rest.split_first() else {
            return Feed::default();
        };
        let remote_cmd = remote.join(" ");
        if !remote_cmd.is_empty() && names::loopback(&ssh_host(dest)) {
            // Run on this machine, from the login user's home (`-l root`, `root@`): its own
            // command line, where `~` is that home.
            let mut home = ctx.clone();
            let user = o.value(&["-l"]).or_else(|| names::login_user(dest));
            if let Some(dir) = user.and_then(|u| normalize::shell_path(&format!("~{u}"), ctx)) {
                home.home = dir;
            }
            home.cwd.clone_from(&home.home);
            self.script(&remote_cmd, &mut home, depth + 1);
        }
        self.remote_runs_download(remote, &remote_cmd, ctx, depth, downloaded);
        let content = if remote_cmd.is_empty() {
            piped
        } else {
            Some(remote_cmd.clone())
        };
        if !remote_cmd.is_empty() {
            self.out.text(remote_cmd.as_str());
        }
        self.ssh_destination(dest, port, content);
        Feed::default()
    }

    /// Downloaded code run on the remote host is downloaded code run all the same: a
    /// download piped to `ssh HOST` (the login shell reads it) or to `ssh HOST sh`, and a
    /// remote line that runs one itself (`ssh HOST 'curl … | sh'`). Only the remote line's
    /// flows are kept: its paths are the remote host's, not this one's.
    fn remote_runs_download(
        &mut self,
        remote: &[String],
        remote_cmd: &str,
        ctx: &Context,
        depth: usize,
        downloaded: bool,
    ) {
        if downloaded {
            // The remote shell splits the line again (`ssh HOST 'bash -s'`).
            let first = remote_cmd.split_whitespace().next();
            let runner = first.map_or("sh", names::family);
            if remote.is_empty() || names::is_shell(runner) || names::is_interpreter(runner) {
                self.runs_download(runner, Reach::Stdin);
            }
        }
        if remote_cmd.is_empty() || !self.spend(remote_cmd.len()) {
            return;
        }
        let mut scratch = Extracted::new("Bash");
        Walker::new(&mut scratch).script(remote_cmd, &mut ctx.clone(), depth + 1);
        for line in scratch.commands {
            if flow::is_download_run(&line) {
                self.out.command(line);
            }
        }
    }

    fn net_sshpass(
        &mut self,
        args: &[String],
        ctx: &mut Context,
        depth: usize,
        stdin: Feed,
    ) -> Feed {
        let o = args::parse(args, &["-p", "-f", "-e", "-d", "-P"], true);
        for f in o.values(&["-f"]) {
            self.path_op(Action::Read, f, ctx, None);
        }
        if o.rest.is_empty() {
            return Feed::default();
        }
        self.run(o.rest, ctx, depth + 1, stdin)
    }

    fn net_ssh_copy_id(&mut self, name: &str, args: &[String], ctx: &mut Context) -> Feed {
        let o = args::parse(
            args,
            &[
                "-i", "-p", "-P", "-F", "-o", "-b", "-J", "-l", "-c", "-D", "-R", "-s", "-S", "-B",
            ],
            false,
        );
        for f in o.values(&["-i", "-F", "-b"]) {
            self.path_op(Action::Read, f, ctx, None);
        }
        if name == "ssh-copy-id" && o.values(&["-i"]).is_empty() {
            self.path_op(Action::Read, "~/.ssh", ctx, None);
        }
        let port = o
            .value(&["-p", "-P"])
            .and_then(|p| p.parse().ok())
            .or(Some(22));
        if let Some(dest) = o.operands.first() {
            self.ssh_destination(dest, port, None);
            // To this machine: the key lands in the user's own authorized_keys.
            if name == "ssh-copy-id" && names::loopback(&ssh_host(dest)) {
                let home =
                    names::login_user(dest).map_or_else(|| "~".to_owned(), |u| format!("~{u}"));
                self.path_op(
                    Action::Write,
                    &format!("{home}/.ssh/authorized_keys"),
                    ctx,
                    None,
                );
            }
        }
        Feed::default()
    }

    fn net_http(
        &mut self,
        name: &str,
        args: &[String],
        ctx: &mut Context,
        piped: Option<String>,
    ) -> Feed {
        let o = args::parse(
            args,
            &[
                "-a",
                "--auth",
                "-A",
                "--auth-type",
                "-o",
                "--output",
                "--session",
                "--session-read-only",
                "--verify",
                "--cert",
                "--cert-key",
                "--proxy",
                "--pretty",
                "-s",
                "--style",
                "-p",
                "--print",
                "--format-options",
                "--default-scheme",
                "--timeout",
                "--max-redirects",
            ],
            false,
        );
        let mut ops = o.operands.iter().copied();
        let mut url = ops.next();
        if url.is_some_and(|m| !m.is_empty() && m.bytes().all(|b| b.is_ascii_uppercase())) {
            url = ops.next();
        }
        let mut sent = Vec::new();
        for item in ops {
            // field=@file, field:=@file, @file: the file's contents are sent.
            match item.split_once('@') {
                Some((k, f)) if k.is_empty() || k.ends_with('=') || k.ends_with(":=") => {
                    self.path_op(Action::Read, f, ctx, None);
                }
                _ => sent.push(item.to_owned()),
            }
        }
        sent.extend(o.values(&["-a", "--auth"]).into_iter().map(str::to_owned));
        for f in o.values(&["-o", "--output"]) {
            self.path_op(Action::Write, f, ctx, None);
        }
        for f in o.values(&["--cert", "--cert-key", "--session-read-only"]) {
            self.path_op(Action::Read, f, ctx, None);
        }
        let content = (!sent.is_empty()).then(|| sent.join("\n")).or(piped);
        if let Some(u) = url {
            let u = if u.starts_with(':') {
                format!("localhost{u}")
            } else if u.contains("://") {
                u.to_owned()
            } else {
                format!("{}://{u}", if name == "https" { "https" } else { "http" })
            };
            self.url_op(&u, content);
        }
        Feed::default()
    }

    fn net_other(
        &mut self,
        name: &str,
        args: &[String],
        ctx: &mut Context,
        piped: Option<&String>,
    ) -> Feed {
        // Tools that name hosts: the first operand (telnet, ping, ftp, whois…), or
        // every name that looks like one (dig, host, nslookup, nmap).
        let valued: &[&str] = match name {
            "ping" | "ping6" => &[
                "-c", "-i", "-W", "-w", "-s", "-t", "-I", "-l", "-p", "-Q", "-S", "-M",
            ],
            "dig" => &["-b", "-c", "-f", "-k", "-p", "-q", "-t", "-x", "-y"],
            "traceroute" | "tracepath" | "mtr" => &[
                "-f", "-g", "-i", "-m", "-N", "-p", "-t", "-w", "-q", "-z", "-s", "-c",
            ],
            "nmap" => &[
                "-p", "-iL", "-oN", "-oX", "-oG", "-oA", "--script", "-e", "-S",
            ],
            "openvpn" => &[
                "--config",
                "--remote",
                "--port",
                "--auth-user-pass",
                "--ca",
                "--cert",
                "--key",
            ],
            "telnet" | "ftp" | "lftp" | "tftp" => &["-l", "-n", "-u", "-p", "-e", "-c", "-f"],
            "websocat" | "grpcurl" => &[
                "-H",
                "-d",
                "-import-path",
                "-proto",
                "--header",
                "-protoset",
            ],
            _ => &[],
        };
        let o = args::parse(args, valued, false);
        for f in o.values(&[
            "--config",
            "--ca",
            "--cert",
            "--key",
            "--auth-user-pass",
            "-f",
            "-iL",
            "-proto",
            "-protoset",
        ]) {
            self.path_op(Action::Read, f, ctx, None);
        }
        for r in o.values(&["--remote"]) {
            self.url_op(r, None);
        }
        let all = matches!(name, "dig" | "host" | "nslookup" | "nmap" | "whois");
        let mut ops = o.operands.iter();
        while let Some(op) = ops.next() {
            let op = op.strip_prefix('@').unwrap_or(op);
            if all && !(op.contains(['.', ':']) || normalize::ip(op).is_some()) {
                continue;
            }
            if matches!(name, "telnet" | "ftp" | "tftp") {
                let port = ops.next().and_then(|p| p.parse().ok());
                self.host_op(op, port, piped.cloned());
                break;
            }
            if op.contains("://") {
                self.url_op(op, piped.cloned());
            } else {
                let host = op.rsplit('@').next().unwrap_or(op);
                self.host_op(host, None, piped.cloned());
            }
            if !all {
                break;
            }
        }
        Feed::default()
    }

    fn ssh_destination(&mut self, dest: &str, port: Option<u16>, content: Option<String>) {
        if dest.starts_with("ssh://") || dest.starts_with("sftp://") {
            if let Some((host, p)) = normalize::url(dest) {
                self.host_op(&host, p.or(port), content);
            }
            return;
        }
        let hostpart = dest.rsplit('@').next().unwrap_or(dest);
        let host = match remote_host(hostpart) {
            Some(h) => h,
            None => hostpart.to_owned(),
        };
        self.host_op(&host, port, content);
    }

    /// One socat address: `TCP:host:port`, `EXEC:cmd`, `FILE:path`, `/path`, …
    fn socat_address(
        &mut self,
        addr: &str,
        ctx: &mut Context,
        depth: usize,
        piped: Option<&String>,
        networked: bool,
    ) {
        let feed = || {
            if networked {
                downloaded_feed()
            } else {
                Feed::default()
            }
        };
        let (kind, rest) = addr.split_once([':', ',']).unwrap_or((addr, ""));
        let target = rest.split(',').next().unwrap_or(rest);
        match kind.to_ascii_uppercase().as_str() {
            "TCP" | "TCP4" | "TCP6" | "TCP-CONNECT" | "OPENSSL" | "SSL" | "UDP" | "UDP4"
            | "UDP6" | "UDP-SENDTO" | "UDP-CONNECT" | "SCTP" | "SCTP-CONNECT" | "SOCKS4"
            | "SOCKS4A" | "SOCKS5" | "PROXY" | "OPENSSL-CONNECT" | "DTLS" => {
                let (host, port) = target.rsplit_once(':').unwrap_or((target, ""));
                self.host_op(host, port.parse().ok(), piped.cloned());
            }
            "TCP-LISTEN" | "TCP-L" | "TCP4-LISTEN" | "TCP6-LISTEN" | "UDP-LISTEN" | "UDP-RECV"
            | "OPENSSL-LISTEN" | "SSL-L" => self.port_op(target.parse().ok()),
            "EXEC" => {
                self.run(
                    &target
                        .split_whitespace()
                        .map(str::to_owned)
                        .collect::<Vec<_>>(),
                    &mut ctx.clone(),
                    depth + 1,
                    feed(),
                );
            }
            "SYSTEM" => {
                let code = rest.split(',').next().unwrap_or(rest);
                self.run(
                    &["sh".to_owned(), "-c".to_owned(), code.to_owned()],
                    &mut ctx.clone(),
                    depth + 1,
                    feed(),
                );
            }
            "FILE" | "OPEN" | "GOPEN" | "CREATE" | "CREAT" | "PIPE" | "UNIX" | "UNIX-CONNECT" => {
                self.path_op(Action::Read, target, ctx, None);
                if kind != "OPEN" {
                    self.path_op(Action::Write, target, ctx, None);
                }
            }
            _ if addr.starts_with(['/', '.', '~']) => {
                let path = addr.split(',').next().unwrap_or(addr);
                self.path_op(Action::Read, path, ctx, None);
                self.path_op(Action::Write, path, ctx, None);
            }
            _ => {}
        }
    }
}

/// Whether a socat address is a network endpoint (connecting or listening).
fn is_socat_network(addr: &str) -> bool {
    let kind = addr
        .split([':', ','])
        .next()
        .unwrap_or(addr)
        .to_ascii_uppercase();
    [
        "TCP", "UDP", "SCTP", "OPENSSL", "SSL", "SOCKS", "PROXY", "DTLS", "IP", "UDPLITE",
    ]
    .iter()
    .any(|k| kind.starts_with(k))
}

/// Whether a network command sends what it reads on stdin: nc, socat, ssh and the like
/// always do, `HTTPie` unless told not to; curl and wget when told to (`-d @-`,
/// `--data-binary @-`, `-T -`, `--post-file=/dev/stdin`).
fn sends_stdin(name: &str, args: &[String]) -> bool {
    match name {
        "xh" | "http" | "https" => !args.iter().any(|a| a == "--ignore-stdin" || a == "-I"),
        "curl" | "curlie" | "wget" | "wget2" => args.iter().any(|a| {
            a.ends_with("@-")
                || a.contains("@/dev/stdin")
                || a == "-"
                || a.ends_with("=-")
                || a.ends_with("/dev/stdin")
                || a.ends_with("@/proc/self/fd/0")
        }),
        _ => true,
    }
}

/// The host an ssh destination names (`user@host`, `ssh://user@host:port/`, `[::1]`).
fn ssh_host(dest: &str) -> String {
    let d = dest
        .strip_prefix("ssh://")
        .or_else(|| dest.strip_prefix("sftp://"))
        .unwrap_or(dest);
    let d = d.rsplit('@').next().unwrap_or(d);
    let host = match d.strip_prefix('[') {
        Some(rest) => rest.split(']').next().unwrap_or(rest),
        None => d.split([':', '/']).next().unwrap_or(d),
    };
    normalize::host(host)
}
