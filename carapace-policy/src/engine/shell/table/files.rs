//! Commands that change files, archives, keys and devices, and the network clients.

use std::path::Path;

use super::super::super::operation::Context;
use super::super::args;
use super::super::commands::engine_sockets;
use super::super::flow;
use super::super::names::path_like;
use super::super::vars::set_var;
use super::super::walk::{Feed, Walker};
use super::Call;
use crate::rules::Action;

/// `tee FILE…`: writes what it is given to each file, and passes it on.
pub(super) fn tee(w: &mut Walker<'_>, ctx: &mut Context, call: Call<'_>) -> Feed {
    let Call { args, stdin, .. } = call;
    let o = args::parse(args, &["--output-error"], false);
    let content = (!stdin.text.is_empty()).then(|| stdin.joined());
    for f in o.operands {
        w.path_op(Action::Write, f, ctx, content.clone());
        if stdin.downloaded {
            w.downloaded_to(f, ctx);
        }
    }
    stdin
}

/// `make`: its makefile's recipes run in a shell, so a makefile that came from the
/// network (`curl -o Makefile URL && make`, `make -f FETCHED`, `curl … | make -f -`) is
/// downloaded code run; `--eval TEXT` adds a makefile line, whose recipe after `;` is
/// shell code. Building a cloned project (`git clone URL && cd y && make`) is everyday
/// work and stays allowed: only a makefile saved from a download itself counts.
pub(super) fn make(w: &mut Walker<'_>, ctx: &mut Context, call: Call<'_>) -> Feed {
    let Call {
        args, depth, stdin, ..
    } = call;
    let o = args::parse(
        args,
        &[
            "-C",
            "--directory",
            "-f",
            "--file",
            "--makefile",
            "-E",
            "--eval",
            "-I",
            "--include-dir",
            "-j",
            "--jobs",
            "-l",
            "--load-average",
            "-o",
            "--old-file",
            "-W",
            "--what-if",
            "-O",
            "--output-sync",
        ],
        false,
    );
    let dir = o.value(&["-C", "--directory"]).unwrap_or(".");
    let files = o.values(&["-f", "--file", "--makefile"]);
    if files.is_empty() {
        for name in ["GNUmakefile", "makefile", "Makefile"] {
            if w.is_downloaded_file(&format!("{dir}/{name}"), ctx) {
                w.runs_download("make", flow::Reach::Script);
            }
        }
    }
    for f in files {
        if f == "-" || flow::is_stdin_path(f) {
            w.script_source("make", "/dev/stdin", &stdin, ctx);
        } else if w.is_downloaded_file(f, ctx) {
            w.runs_download("make", flow::Reach::Script);
        }
    }
    for line in o.values(&["-E", "--eval"]) {
        if let Some((_, recipe)) = line.split_once(':').and_then(|(_, r)| r.split_once(';')) {
            w.script(recipe, &mut ctx.clone(), depth + 1);
        }
    }
    Feed::default()
}

/// `nvme format|sanitize|write… DEV` rewrites the device.
pub(super) fn nvme(w: &mut Walker<'_>, ctx: &mut Context, call: Call<'_>) -> Feed {
    let Call { args, .. } = call;
    for dev in args.iter().filter(|a| a.starts_with("/dev/")) {
        w.path_op(Action::Write, dev, ctx, None);
    }
    Feed::default()
}

/// When the entry `nvme` applies.
pub(super) fn when_nvme(call: &Call<'_>) -> bool {
    let Call { args, .. } = call;
    matches!(
        args.first().map(String::as_str),
        Some("format" | "sanitize" | "write" | "write-zeroes" | "write-uncor" | "dsm")
    )
}

/// Container engines reached at a socket given on the line (`--url unix:///…`).
pub(super) fn container_socket(w: &mut Walker<'_>, ctx: &mut Context, call: Call<'_>) -> Feed {
    let Call { args, .. } = call;
    for sock in engine_sockets(args) {
        w.path_op(Action::Network, sock, ctx, None);
    }
    Feed::default()
}

/// When the entry `container_socket` applies.
pub(super) fn when_container_socket(call: &Call<'_>) -> bool {
    let Call { args, .. } = call;
    !engine_sockets(args).is_empty()
}

/// zsh's `ztcp HOST PORT` connects and leaves the socket's descriptor in
/// `$REPLY`; zsh hands out descriptors from 10 on.
pub(super) fn ztcp(w: &mut Walker<'_>, ctx: &mut Context, call: Call<'_>) -> Feed {
    let Call { args, .. } = call;
    let o = args::parse(args, &["-d"], false);
    if !o.has(&["-l", "-a", "-c", "-L", "-v"]) {
        if let Some(host) = o.operands.first() {
            let port = o.operands.get(1).and_then(|p| p.parse().ok());
            w.host_op(host, port, None);
            let fd = o.value(&["-d"]).unwrap_or("10").to_owned();
            set_var(ctx, "REPLY", &fd);
            w.flow.download_fds.push(fd);
        }
    }
    Feed::default()
}

/// `sysctl`: the `/proc/sys` files it reads or writes.
pub(super) fn sysctl(w: &mut Walker<'_>, ctx: &mut Context, call: Call<'_>) -> Feed {
    let Call { args, .. } = call;
    for (action, path) in super::super::sysctl::operations(args) {
        w.path_op(action, &path, ctx, None);
    }
    Feed::default()
}

/// `chmod`, `chown`, `chgrp`, `chattr`, `chcon`: every file named is changed.
pub(super) fn change_owner(w: &mut Walker<'_>, ctx: &mut Context, call: Call<'_>) -> Feed {
    let Call { name, args, .. } = call;
    // Modes like `-x` or `+i` look like options; only the known options are.
    let reference = args.iter().any(|a| a.starts_with("--reference"));
    let mut rest: Vec<&String> = if name == "chattr" {
        args.iter()
            .filter(|a| {
                !(a.starts_with("--")
                    || matches!(a.as_str(), "-R" | "-V" | "-f")
                    || (a.len() > 1
                        && a.starts_with(['-', '+', '='])
                        && a[1..].bytes().all(|b| b.is_ascii_alphabetic())))
            })
            .collect()
    } else {
        args.iter()
            .filter(|a| {
                !(a.starts_with("--")
                    || matches!(
                        a.as_str(),
                        "-R" | "-v" | "-c" | "-f" | "-h" | "-H" | "-L" | "-P" | "-V"
                    ))
            })
            .collect()
    };
    if name != "chattr" && !reference && !rest.is_empty() {
        rest.remove(0);
    }
    for f in rest {
        w.path_op(Action::Write, f, ctx, None);
    }
    Feed::default()
}

/// `rm`, `rmdir`, `unlink`, `shred`: files deleted (a tree with `rm -r`).
pub(super) fn remove(w: &mut Walker<'_>, ctx: &mut Context, call: Call<'_>) -> Feed {
    let Call { name, args, .. } = call;
    let o = args::parse(
        args,
        &["-n", "-s", "--iterations", "--size", "--random-source"],
        false,
    );
    // rm and rmdir refuse to remove `.` (`rm -rf .` deletes nothing). `..` is
    // refused too, but only by some implementations: still judged.
    let dot = |f: &str| f.trim_end_matches('/') == ".";
    let recursive = o.has(&["-r", "-R", "--recursive"]);
    for f in o.operands {
        if matches!(name, "rm" | "rmdir") && dot(f) {
            continue;
        }
        if matches!(name, "shred" | "wipe") {
            w.path_op(Action::Write, f, ctx, None);
        }
        if name == "rm" && recursive {
            w.tree_delete(f, ctx);
        } else {
            w.path_op(Action::Delete, f, ctx, None);
        }
    }
    Feed::default()
}

/// `cp`, `mv`, `install`, `ln`, `rsync`, `scp`.
pub(super) fn copy(w: &mut Walker<'_>, ctx: &mut Context, call: Call<'_>) -> Feed {
    let Call {
        name, args, stdin, ..
    } = call;
    w.copy(name, args, ctx, &stdin)
}

/// `sponge FILE`: writes its stdin to FILE.
pub(super) fn sponge(w: &mut Walker<'_>, ctx: &mut Context, call: Call<'_>) -> Feed {
    let Call { args, stdin, .. } = call;
    let content = (!stdin.text.is_empty()).then(|| stdin.joined());
    for f in args.iter().filter(|a| !a.starts_with('-')) {
        w.path_op(Action::Write, f, ctx, content.clone());
        if stdin.downloaded {
            w.downloaded_to(f, ctx);
        }
    }
    Feed::default()
}

/// GNU `parallel`: the command it runs on each input.
pub(super) fn parallel(w: &mut Walker<'_>, ctx: &mut Context, call: Call<'_>) -> Feed {
    let Call {
        args, depth, stdin, ..
    } = call;
    w.parallel(args, ctx, depth, &stdin)
}

/// `dd if=… of=…`.
pub(super) fn dd(w: &mut Walker<'_>, ctx: &mut Context, call: Call<'_>) -> Feed {
    let Call { args, stdin, .. } = call;
    w.dd(args, ctx, &stdin)
}

/// Disk and file-system tools: every device or path named is written.
pub(super) fn disk_tool(w: &mut Walker<'_>, ctx: &mut Context, call: Call<'_>) -> Feed {
    let Call { args, .. } = call;
    for f in args.iter().filter(|a| path_like(a) && !a.starts_with('-')) {
        w.path_op(Action::Write, f, ctx, None);
    }
    Feed::default()
}

/// `crontab`: the user's spool file, read (`-l`), deleted (`-r`) or written.
pub(super) fn crontab(w: &mut Walker<'_>, ctx: &mut Context, call: Call<'_>) -> Feed {
    let Call { args, stdin, .. } = call;
    let o = args::parse(args, &["-u"], false);
    let user = o.value(&["-u"]).map_or_else(
        || {
            Path::new(&ctx.home)
                .file_name()
                .map_or("root".into(), |n| n.to_string_lossy().into_owned())
        },
        str::to_owned,
    );
    let spool = format!("/var/spool/cron/crontabs/{user}");
    if o.has(&["-l"]) {
        w.path_op(Action::Read, &spool, ctx, None);
    } else if o.has(&["-r"]) {
        w.path_op(Action::Delete, &spool, ctx, None);
    } else {
        let content = match o.operands.first() {
            Some(&"-") | None => (!stdin.text.is_empty()).then(|| stdin.joined()),
            Some(f) => {
                w.path_op(Action::Read, f, ctx, None);
                w.file_feed(f, ctx).map(|f| f.joined())
            }
        };
        w.path_op(Action::Write, &spool, ctx, content);
    }
    Feed::default()
}

/// `systemctl enable|mask|link… UNIT`: the unit file written.
pub(super) fn systemctl(w: &mut Walker<'_>, ctx: &mut Context, call: Call<'_>) -> Feed {
    let Call { args, .. } = call;
    let o = args::parse(
        args,
        &[
            "-t",
            "-p",
            "-H",
            "-M",
            "--type",
            "--property",
            "--host",
            "--machine",
            "--root",
        ],
        false,
    );
    let dir = if o.has(&["--user"]) {
        "~/.config/systemd/user"
    } else {
        "/etc/systemd/system"
    };
    if let Some((verb, units)) = o.operands.split_first() {
        if matches!(
            *verb,
            "enable"
                | "disable"
                | "mask"
                | "unmask"
                | "link"
                | "edit"
                | "preset"
                | "revert"
                | "set-property"
                | "add-wants"
                | "add-requires"
                | "reenable"
                | "set-default"
        ) {
            for u in units {
                let target = if path_like(u) {
                    (*u).to_owned()
                } else {
                    format!("{dir}/{u}")
                };
                w.path_op(Action::Write, &target, ctx, None);
            }
        }
    }
    Feed::default()
}

/// `tar` / `bsdtar`.
pub(super) fn tar(w: &mut Walker<'_>, ctx: &mut Context, call: Call<'_>) -> Feed {
    let Call { args, stdin, .. } = call;
    w.tar(args, ctx, &stdin)
}

/// `zip`, `7z`, `rar`: the archive written, the files read.
pub(super) fn archiver(w: &mut Walker<'_>, ctx: &mut Context, call: Call<'_>) -> Feed {
    let Call {
        name, args, stdin, ..
    } = call;
    if name == "zip" && args.iter().any(|a| a == "-@" || a == "--names-stdin") {
        w.read_names_on_stdin(&stdin, ctx);
    }
    let o = args::parse(
        args,
        &[
            "-b",
            "-n",
            "-t",
            "-tt",
            "-x",
            "-i",
            "-P",
            "-O",
            "--password",
        ],
        false,
    );
    // `7z x A -oDIR` / `7z e A -oDIR`: the archive is read and unpacked into DIR (its `-o`
    // takes its value attached), or into the working directory.
    if name.starts_with("7z") && matches!(o.operands.first(), Some(&("x" | "e"))) {
        for archive in o.operands.iter().skip(1).take(1) {
            w.path_op(Action::Read, archive, ctx, None);
        }
        match args.iter().find_map(|a| a.strip_prefix("-o")) {
            Some(dir) if !dir.is_empty() => w.tree_write(dir, ctx),
            _ => w.path_op(Action::Write, ".", ctx, None),
        }
        return Feed::default();
    }
    let mut ops = o
        .operands
        .iter()
        .filter(|a| !matches!(*a, &("a" | "x" | "e" | "l" | "u" | "d")));
    if let Some(archive) = ops.next() {
        w.path_op(Action::Write, archive, ctx, None);
    }
    for f in ops {
        w.tree_read(f, ctx);
    }
    Feed::default()
}

/// When the entry `patch_in_dir` applies: `patch -d DIR` with no file named, where the
/// files the diff names are found in DIR.
pub(super) fn when_patch_in_dir(call: &Call<'_>) -> bool {
    let o = args::parse(call.args, super::super::commands::PATCH_VALUED, false);
    o.value(&["-d", "--directory"]).is_some()
        && o.operands.is_empty()
        && o.value(&["-o", "--output"]).is_none()
}

/// `patch -d DIR < DIFF`: the diff's files, below DIR, are written (any of them: the diff
/// is not known here).
pub(super) fn patch_in_dir(w: &mut Walker<'_>, ctx: &mut Context, call: Call<'_>) -> Feed {
    let o = args::parse(call.args, super::super::commands::PATCH_VALUED, false);
    for input in o.values(&["-i", "--input"]) {
        w.path_op(Action::Read, input, ctx, None);
    }
    if let Some(dir) = o.value(&["-d", "--directory"]) {
        w.tree_write(dir, ctx);
    }
    Feed::default()
}

/// `gzip`, `xz`, `zstd`, `unzip`, `cpio`…: files compressed or unpacked in place.
pub(super) fn compressor(w: &mut Walker<'_>, ctx: &mut Context, call: Call<'_>) -> Feed {
    let Call {
        name, args, stdin, ..
    } = call;
    // `cpio -o` / `-p` (and `zip -@`) archive the files named on stdin, one a
    // line: each one is read.
    let names_on_stdin = match name {
        "cpio" => args.iter().any(|a| {
            matches!(a.as_str(), "--create" | "--pass-through")
                || (a.starts_with('-') && !a.starts_with("--") && a.contains(['o', 'p']))
        }),
        _ => false,
    };
    if names_on_stdin {
        w.read_names_on_stdin(&stdin, ctx);
    }
    let o = args::parse(
        args,
        &["-d", "-x", "-P", "-S", "-o", "--suffix", "--output"],
        false,
    );
    if name == "unzip" {
        let mut it = o.operands.iter();
        let mut downloaded = false;
        if let Some(archive) = it.next() {
            w.path_op(Action::Read, archive, ctx, None);
            downloaded = w.is_download(archive, ctx);
        }
        let named = o.value(&["-d"]);
        let dir = named.unwrap_or(".");
        let lists = o.has(&["-l", "-t", "-v", "-z", "-Z"]);
        if !lists {
            // Into a directory, named on the line or the working one: any name in it
            // (`cd ~ && unzip x.zip` may bring a .bashrc).
            w.tree_write(dir, ctx);
        }
        if downloaded && !lists {
            w.downloaded_tree(dir, ctx);
        }
    } else {
        for f in &o.operands {
            w.path_op(Action::Read, f, ctx, None);
            if !o.has(&["-c", "--stdout", "-t", "--test", "-l", "--list"]) {
                w.path_op(Action::Write, f, ctx, None);
            }
        }
        for f in o.values(&["-o", "--output"]) {
            w.path_op(Action::Write, f, ctx, None);
        }
    }
    Feed::default()
}

/// `git`.
pub(super) fn git(w: &mut Walker<'_>, ctx: &mut Context, call: Call<'_>) -> Feed {
    let Call { args, depth, .. } = call;
    w.git(args, ctx, depth)
}

/// `openssl`.
pub(super) fn openssl(w: &mut Walker<'_>, ctx: &mut Context, call: Call<'_>) -> Feed {
    let Call { args, stdin, .. } = call;
    w.openssl(args, ctx, &stdin)
}

/// `gpg`: its home read (and written by key changes), files read, `-o` written.
pub(super) fn gpg(w: &mut Walker<'_>, ctx: &mut Context, call: Call<'_>) -> Feed {
    let Call { args, .. } = call;
    let o = args::parse(
        args,
        &[
            "-o",
            "--output",
            "-r",
            "--recipient",
            "-u",
            "--local-user",
            "--homedir",
            "--keyserver",
            "--passphrase-file",
            "--default-key",
        ],
        false,
    );
    let home = o.value(&["--homedir"]).unwrap_or("~/.gnupg");
    w.path_op(Action::Read, home, ctx, None);
    if o.has(&[
        "--import",
        "--gen-key",
        "--generate-key",
        "--full-generate-key",
        "--quick-gen-key",
        "--delete-secret-keys",
        "--delete-keys",
        "--edit-key",
    ]) {
        w.path_op(Action::Write, home, ctx, None);
    }
    for f in o
        .operands
        .iter()
        .copied()
        .chain(o.values(&["--passphrase-file"]))
    {
        if o.has(&[
            "--recv-keys",
            "--send-keys",
            "--search-keys",
            "--refresh-keys",
        ]) {
            break;
        }
        w.path_op(Action::Read, f, ctx, None);
    }
    for f in o.values(&["-o", "--output"]) {
        w.path_op(Action::Write, f, ctx, None);
    }
    if let Some(ks) = o.value(&["--keyserver"]) {
        w.url_op(ks, None);
    }
    Feed::default()
}

/// `ssh-keygen`: the key files read or written.
pub(super) fn ssh_keygen(w: &mut Walker<'_>, ctx: &mut Context, call: Call<'_>) -> Feed {
    let Call { args, .. } = call;
    let o = args::parse(
        args,
        &[
            "-f", "-t", "-b", "-C", "-N", "-P", "-m", "-a", "-Z", "-n", "-I", "-s", "-V", "-z",
            "-O", "-F", "-R", "-E", "-w", "-Y", "-G", "-T", "-M", "-r", "-J", "-j", "-K", "-S",
        ],
        false,
    );
    let files = o.values(&["-f"]);
    let reading = o.has(&[
        "-y", "-l", "-e", "-i", "-B", "-F", "-R", "-D", "-L", "-Q", "-Y",
    ]);
    for f in &files {
        w.path_op(Action::Read, f, ctx, None);
        if !reading {
            w.path_op(Action::Write, f, ctx, None);
        }
    }
    if files.is_empty() && !reading {
        w.path_op(Action::Write, "~/.ssh", ctx, None);
    }
    for f in o.values(&["-s"]) {
        w.path_op(Action::Read, f, ctx, None);
    }
    Feed::default()
}

/// Network clients: hosts reached, data sent, files saved.
pub(super) fn network(w: &mut Walker<'_>, ctx: &mut Context, call: Call<'_>) -> Feed {
    let Call {
        name,
        args,
        depth,
        stdin,
    } = call;
    let mut feed = w.network(name, args, ctx, depth, stdin);
    feed.downloaded |= flow::fetches(name);
    feed
}

/// Static file servers (`busybox httpd`, `http-server`, `serve`, `darkhttpd`, `miniserve`):
/// everything below the directory they serve is readable by whoever connects, so the tree
/// is read (the working directory when none is named).
pub(super) fn file_server(w: &mut Walker<'_>, ctx: &mut Context, call: Call<'_>) -> Feed {
    let Call { args, .. } = call;
    let o = args::parse(
        args,
        &[
            "-h",
            "--root",
            "-p",
            "--port",
            "-a",
            "--address",
            "-c",
            "-r",
            "-u",
            "-l",
            "--listen",
            "-i",
            "--interfaces",
            "-e",
            "-d",
            "-P",
            "--proxy",
            "-C",
            "-K",
            "--cert",
            "--key",
            "--tls-cert",
            "--tls-key",
        ],
        false,
    );
    let root = o
        .value(&["-h", "--root"])
        .or_else(|| o.operands.first().copied())
        .unwrap_or(".");
    w.tree_read(root, ctx);
    Feed::default()
}

/// `sqlite3 [OPTIONS] [DB [SQL…]]`: the database is read and written, and the SQL and dot
/// commands it is given (operands, `-cmd`, `-init FILE`, stdin) act on files and programs:
/// `.read F`/`.import F T` read F, `.output F`/`.once F`/`.backup F`/`.save F` write it
/// (`|CMD` there runs CMD), `.shell`/`.system` run a command, `.load LIB` runs LIB's code,
/// and the functions `readfile('F')`/`writefile('F', …)` read and write F.
pub(super) fn sqlite(w: &mut Walker<'_>, ctx: &mut Context, call: Call<'_>) -> Feed {
    const VALUED: &[&str] = &[
        "cmd",
        "init",
        "separator",
        "newline",
        "nullvalue",
        "vfs",
        "maxsize",
        "mmap",
        "pagecache",
        "lookaside",
        "heap",
        "escape",
        "A",
    ];
    let Call {
        args, depth, stdin, ..
    } = call;
    let mut commands: Vec<&str> = Vec::new();
    let mut db = None;
    let mut i = 0;
    while i < args.len() {
        let arg = args[i].as_str();
        i += 1;
        if let Some(name) = arg.strip_prefix('-').map(|a| a.trim_start_matches('-')) {
            if VALUED.contains(&name) {
                let value = args.get(i).map_or("", String::as_str);
                i += 1;
                match name {
                    "cmd" => commands.push(value),
                    "init" => {
                        w.path_op(Action::Read, value, ctx, None);
                        if let Some(feed) = w.file_feed(value, ctx) {
                            let text = feed.joined();
                            sqlite_commands(w, &text, ctx, depth);
                        }
                    }
                    _ => {}
                }
            }
            continue;
        }
        match db {
            None => db = Some(arg),
            Some(_) => commands.push(arg),
        }
    }
    if let Some(db) = db.filter(|d| !d.starts_with(':') && !d.is_empty()) {
        w.path_op(Action::Read, db, ctx, None);
        w.path_op(Action::Write, db, ctx, None);
    }
    for c in commands {
        sqlite_commands(w, c, ctx, depth);
    }
    let script = stdin.joined();
    if !script.is_empty() {
        sqlite_commands(w, &script, ctx, depth);
    }
    Feed::default()
}

/// The dot commands (one a line) and file functions of sqlite3's shell in `text`.
fn sqlite_commands(w: &mut Walker<'_>, text: &str, ctx: &mut Context, depth: usize) {
    for line in text.lines().take(256) {
        let line = line.trim();
        let Some(dot) = line.strip_prefix('.') else {
            continue;
        };
        let (cmd, rest) = dot.split_once(char::is_whitespace).unwrap_or((dot, ""));
        let rest = rest.trim();
        let file = dot_command_file(rest);
        let action = match cmd {
            "read" | "import" | "open" | "restore" => Action::Read,
            "output" | "once" | "backup" | "save" | "excel" => Action::Write,
            "shell" | "system" => {
                w.script(rest, &mut ctx.clone(), depth + 1);
                continue;
            }
            "load" => Action::Execute,
            _ => continue,
        };
        let Some(file) = file else {
            continue;
        };
        // `.read '|CMD'`, `.output |CMD`: a pipe to or from a command.
        if let Some(program) = file.strip_prefix('|') {
            w.script(program, &mut ctx.clone(), depth + 1);
            continue;
        }
        w.path_op(action, file, ctx, None);
    }
    // ASCII lower case keeps every byte where it was.
    let lower = text.to_ascii_lowercase();
    for (call, action) in [("readfile(", Action::Read), ("writefile(", Action::Write)] {
        let mut from = 0;
        while let Some(at) = lower[from..].find(call) {
            from += at + call.len();
            let arg = text[from..].trim_start();
            if let Some((path, _)) = arg.strip_prefix('\'').and_then(|a| a.split_once('\'')) {
                w.path_op(action, path, ctx, None);
            }
        }
    }
}

/// The file a dot command names: its first argument that is not an option (`.import --csv
/// F T`), unquoted (`.read '|cat F'`).
fn dot_command_file(mut rest: &str) -> Option<&str> {
    loop {
        rest = rest.trim_start();
        let quote = rest.chars().next().filter(|c| matches!(c, '\'' | '"'));
        let (word, after) = match quote {
            Some(q) => rest[1..].split_once(q).unwrap_or((&rest[1..], "")),
            None => rest.split_once(char::is_whitespace).unwrap_or((rest, "")),
        };
        if word.is_empty() && after.is_empty() {
            return None;
        }
        if quote.is_some() || !word.starts_with('-') {
            return Some(word);
        }
        rest = after;
    }
}
