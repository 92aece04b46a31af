//! Fetchers that are not network tools: object-store and release downloads (`aws s3 cp`,
//! `gsutil cp`, `rclone cat`, `gh release download`, …). What they bring down is downloaded
//! bytes (`flow`): on stdout when the destination is `-` (or the command prints it), else
//! in the files or trees they write. Also where downloads land once unpacked (`gunzip`,
//! `7z x`) and what runs when a package manager installs one.
use super::super::operation::Context;
use super::args;
use super::flow::Reach;
use super::walk::Walker;

/// Whether a source names a remote store rather than a local path.
fn remote(src: &str) -> bool {
    ["s3://", "gs://", "az://", "r2://", "http://", "https://"]
        .iter()
        .any(|s| src.starts_with(s))
}

impl Walker<'_> {
    /// Records where `name ARGS` puts what it fetches; true when it prints it.
    pub(super) fn remote_copy(&mut self, name: &str, args: &[String], ctx: &Context) -> bool {
        // Every command passes here: the others cost one comparison.
        if !matches!(
            name,
            "aws" | "gsutil" | "gcloud" | "s3cmd" | "rclone" | "gh" | "openssl" | "pip"
        ) {
            return false;
        }
        let words: Vec<&str> = args
            .iter()
            .map(String::as_str)
            .filter(|a| !a.starts_with('-') || *a == "-")
            .collect();
        match (name, words.as_slice()) {
            ("aws", ["s3", verb @ ("cp" | "mv" | "sync"), src, dest, ..])
            | ("gsutil", [verb @ ("cp" | "mv" | "rsync"), src, dest, ..])
            | ("gcloud", ["storage", verb @ ("cp" | "mv" | "rsync"), src, dest, ..])
            | ("s3cmd", [verb @ ("get" | "sync"), src, dest, ..]) => {
                self.copied_from_store(verb, src, dest, ctx)
            }
            (
                "rclone",
                [verb @ ("copy" | "copyto" | "sync" | "move" | "moveto"), src, dest, ..],
            ) => src.contains(':') && self.copied_from_store(verb, "s3://", dest, ctx),
            ("aws", ["s3api", "get-object", .., dest]) => {
                self.copied_from_store("cp", "s3://", dest, ctx)
            }
            ("gsutil" | "rclone", ["cat", ..])
            | ("gcloud", ["storage", "cat", ..])
            | ("gh", ["api", ..] | ["gist", "view", ..])
            | ("openssl", ["s_client", ..]) => true,
            ("gh", ["release" | "run", "download", ..]) => self.release_download(args, ctx),
            // `gh repo clone OWNER/REPO [DIR]` (and `glab`'s, which is not matched here):
            // a clone as git's is.
            ("gh", ["repo", "clone", repo, rest @ ..]) => {
                let dir = rest
                    .first()
                    .copied()
                    .filter(|d| *d != "--")
                    .unwrap_or_else(|| repo.rsplit('/').next().unwrap_or(repo));
                self.downloaded_tree(dir.trim_end_matches(".git"), ctx);
                false
            }
            ("pip", ["download", ..]) => {
                self.package_download(args, ctx);
                false
            }
            _ => false,
        }
    }

    /// A package manager installing a downloaded package file runs its scripts
    /// (`dpkg -i`, `rpm -U`, `pip install ./x.whl`, `npm i ./x.tgz`).
    pub(super) fn installs_download(&mut self, name: &str, args: &[String], ctx: &Context) {
        if !self.flow.downloads.is_empty()
            && installs(name, args)
            && args
                .iter()
                .any(|a| !a.starts_with('-') && self.is_download(a, ctx))
        {
            self.runs_download("sh", Reach::Script);
        }
    }

    /// A downloaded archive unpacked by name (`gunzip i.sh.gz` → `i.sh`, `7z x p.7z -oDIR`).
    pub(super) fn unpacks_download(&mut self, name: &str, args: &[String], ctx: &Context) {
        if self.flow.downloads.is_empty() {
            return;
        }
        let decompress = matches!(name, "gunzip" | "bunzip2" | "unxz" | "unzstd" | "unlzma")
            || (matches!(name, "gzip" | "bzip2" | "xz" | "zstd" | "lz4")
                && args.iter().any(|a| {
                    a == "--decompress"
                        || (!a.starts_with("--") && a.starts_with('-') && a.contains('d'))
                }));
        let files = args.iter().filter(|a| !a.starts_with('-'));
        if decompress {
            for f in files
                .filter(|f| self.is_download(f, ctx))
                .collect::<Vec<_>>()
            {
                if let Some((stem, _)) = f.rsplit_once('.') {
                    self.downloaded_to(stem, ctx);
                }
            }
        } else if matches!(name, "7z" | "7za" | "7zr")
            && args.first().is_some_and(|v| v == "x" || v == "e")
            && args
                .iter()
                .skip(1)
                .any(|a| !a.starts_with('-') && self.is_download(a, ctx))
        {
            let dir = args
                .iter()
                .find_map(|a| a.strip_prefix("-o"))
                .unwrap_or(".");
            self.downloaded_tree(dir, ctx);
        }
    }

    /// `cp SRC DEST` from a store: `-` prints it; a tree copy (`sync`) taints the tree.
    fn copied_from_store(&mut self, verb: &str, src: &str, dest: &str, ctx: &Context) -> bool {
        if !remote(src) {
            return false;
        }
        if dest == "-" {
            return true;
        }
        self.downloaded_to(dest, ctx);
        if matches!(verb, "sync" | "rsync") || dest.ends_with('/') || dest == "." {
            self.downloaded_tree(dest, ctx);
        }
        false
    }

    /// `pip download … -d DIR`: the packages (sdists with a `setup.py` among them) land
    /// unpacked-to-be in DIR, every file of which is downloaded bytes. Into the working
    /// directory (no `-d`) only the archives land; the project's own files stay its own.
    fn package_download(&mut self, args: &[String], ctx: &Context) {
        let o = args::parse(args, &["-d", "--dest", "--destination-directory"], false);
        if let Some(dir) = o.value(&["-d", "--dest", "--destination-directory"]) {
            self.downloaded_tree(dir, ctx);
        }
    }

    /// `gh release download [-p PATTERN]… [-D DIR] [-O FILE]`: each named asset, or the
    /// whole directory when the names are patterns (or none are given).
    fn release_download(&mut self, args: &[String], ctx: &Context) -> bool {
        let o = args::parse(
            args,
            &[
                "-p",
                "--pattern",
                "-D",
                "--dir",
                "-O",
                "--output",
                "-R",
                "--repo",
                "-A",
                "--archive",
                "-n",
                "--name",
            ],
            false,
        );
        if let Some(out) = o.value(&["-O", "--output"]) {
            if out == "-" {
                return true;
            }
            self.downloaded_to(out, ctx);
            return false;
        }
        let dir = o.value(&["-D", "--dir"]).unwrap_or(".");
        let patterns = o.values(&["-p", "--pattern"]);
        if patterns.is_empty() || patterns.iter().any(|p| p.contains(['*', '?', '['])) {
            self.downloaded_tree(dir, ctx);
        }
        for p in patterns {
            self.downloaded_to(&format!("{}/{p}", dir.trim_end_matches('/')), ctx);
        }
        false
    }
}

/// Whether `name ARGS` installs packages (whose maintainer scripts run).
fn installs(name: &str, args: &[String]) -> bool {
    let has = |words: &[&str]| args.iter().any(|a| words.contains(&a.as_str()));
    match name {
        "dpkg" => has(&["-i", "--install", "--unpack"]),
        "rpm" => args.iter().any(|a| {
            a.starts_with("-i")
                || a.starts_with("-U")
                || a.starts_with("-F")
                || matches!(a.as_str(), "--install" | "--upgrade" | "--freshen")
        }),
        "pacman" => args.iter().any(|a| a.starts_with("-U")),
        "apt" | "apt-get" | "yum" | "dnf" | "zypper" | "pip" | "pip3" | "pipx" | "gem" | "snap"
        | "flatpak" | "brew" | "uv" => has(&["install", "localinstall", "reinstall"]),
        "npm" | "pnpm" | "yarn" | "bun" => has(&["install", "i", "add"]),
        "installer" => has(&["-pkg"]),
        _ => false,
    }
}
