//! Fetchers that are not network tools: object-store and release downloads (`aws s3 cp`,
//! `gsutil cp`, `rclone cat`, `gh release download`, …). What they bring down is downloaded
//! bytes (`flow`): on stdout when the destination is `-` (or the command prints it), else
//! in the files or trees they write.
use super::super::operation::Context;
use super::args;
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
            | ("gh", ["api", ..] | ["gist", "view", ..]) => true,
            ("gh", ["release" | "run", "download", ..]) => self.release_download(args, ctx),
            _ => false,
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
