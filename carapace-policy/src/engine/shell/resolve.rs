//! What program a command word runs when it does not spell the program's name: a glob
//! (`/???/r?`, `/usr/bin/c?t`, `/bin/[c]at`), a name `hash -p` bound to a path, a copy or a
//! link of a program made earlier in the same command (`ln -s /bin/rm x; ./x`, `cp /bin/cat
//! c; ./c`), or the path `which`, `command -v` and `type -P` print (`$(which rm)`).
//!
//! A glob runs whichever file it matches, and which files exist is the agent's machine's
//! business, not the checker's: the word stands for every known program it can match, each
//! walked with the same arguments, so the decision is the strictest among them.
use super::super::normalize;
use super::super::operation::Context;
use super::names::family;
use super::walk::Walker;

/// Where programs live, as `PATH` lists them on the systems Carapace runs on.
const BIN_DIRS: &[&str] = &["/bin", "/usr/bin", "/usr/local/bin", "/sbin", "/usr/sbin"];

/// Programs a copy, a link or a glob is recognised as: the ones the command table and the
/// packs' command rules know (a program neither knows means nothing more by another name).
const KNOWN: &[&str] = &[
    "7z",
    "7za",
    "ack",
    "ag",
    "aria2c",
    "at",
    "awk",
    "aws",
    "az",
    "b2sum",
    "badblocks",
    "base32",
    "base64",
    "basenc",
    "bash",
    "bat",
    "batcat",
    "batch",
    "blkdiscard",
    "bsdtar",
    "bun",
    "bunzip2",
    "busybox",
    "bw",
    "bzcat",
    "bzip2",
    "cat",
    "cfdisk",
    "chattr",
    "chcon",
    "chgrp",
    "chmod",
    "chown",
    "chroot",
    "cksum",
    "cmp",
    "column",
    "comm",
    "cp",
    "cpio",
    "crontab",
    "cryptsetup",
    "csh",
    "csplit",
    "curl",
    "cut",
    "dash",
    "dd",
    "deno",
    "diff",
    "doas",
    "docker",
    "e2fsck",
    "ed",
    "env",
    "ex",
    "fdisk",
    "file",
    "find",
    "fish",
    "flock",
    "gawk",
    "gcloud",
    "gdisk",
    "gh",
    "git",
    "glab",
    "gpg",
    "gpg2",
    "grep",
    "gunzip",
    "gzip",
    "hd",
    "head",
    "hexdump",
    "install",
    "kill",
    "killall",
    "ksh",
    "kubectl",
    "less",
    "link",
    "ln",
    "losetup",
    "lua",
    "mawk",
    "md5sum",
    "mkdir",
    "mke2fs",
    "mkfs",
    "mkswap",
    "more",
    "mount",
    "mv",
    "nano",
    "nawk",
    "nc",
    "ncat",
    "netcat",
    "nice",
    "node",
    "nohup",
    "od",
    "openssl",
    "parted",
    "pass",
    "patch",
    "perl",
    "pgrep",
    "php",
    "pidof",
    "pkexec",
    "pkill",
    "printf",
    "python",
    "python3",
    "rbash",
    "rg",
    "rm",
    "rmdir",
    "rsync",
    "ruby",
    "runuser",
    "scp",
    "script",
    "security",
    "sed",
    "service",
    "setsid",
    "sfdisk",
    "sftp",
    "sh",
    "sha256sum",
    "shred",
    "socat",
    "sort",
    "split",
    "srm",
    "ssh",
    "ssh-add",
    "ssh-keygen",
    "stdbuf",
    "strings",
    "su",
    "sudo",
    "systemctl",
    "systemd-run",
    "tac",
    "tail",
    "tar",
    "tclsh",
    "tee",
    "telnet",
    "timeout",
    "touch",
    "truncate",
    "umount",
    "unlink",
    "unzip",
    "vi",
    "vim",
    "wget",
    "wipe",
    "wipefs",
    "xargs",
    "xxd",
    "xz",
    "zcat",
    "zip",
    "zsh",
    "zstd",
];

/// Programs one glob may stand for; past this many (`/*/*`) the first ones are walked and
/// the rest are not worth the work (each is a walk of the whole argument list).
const MAX_CANDIDATES: usize = 48;

/// Copies and links of programs remembered, at most.
const MAX_BINARIES: usize = 32;

/// The path `which NAME`, `command -v NAME` and `type -P NAME` print.
pub(super) fn program_path(name: &str) -> String {
    if name.contains('/') {
        name.to_owned()
    } else {
        format!("/usr/bin/{name}")
    }
}

/// A command word with glob characters outside quotes (they were expanded already, so any
/// left are the shell's to match).
fn is_glob(word: &str) -> bool {
    word.contains(['*', '?'])
        || word
            .split_once('[')
            .is_some_and(|(_, after)| after.contains(']'))
}

impl Walker<'_> {
    /// The programs `first` runs when it names one other than its own text says; `None`
    /// when it means what it says.
    pub fn resolve_command(&self, first: &str, ctx: &Context) -> Option<Vec<String>> {
        if !first.contains('/') {
            if let Some((_, target)) = self.binaries.iter().find(|(k, _)| k == first) {
                return Some(vec![target.clone()]);
            }
        } else if let Some(path) = normalize::shell_path(first, ctx) {
            if let Some((_, target)) = self.binaries.iter().find(|(k, _)| *k == path) {
                return Some(vec![target.clone()]);
            }
        }
        if !is_glob(first) {
            return None;
        }
        let matches = |text: &str| super::param::glob_matches(first, text);
        let mut found: Vec<String> = Vec::new();
        let pattern_path = first
            .contains('/')
            .then(|| normalize::shell_path(first, ctx))
            .flatten();
        for name in KNOWN {
            let hit = if first.contains('/') {
                BIN_DIRS
                    .iter()
                    .map(|dir| format!("{dir}/{name}"))
                    .find(|p| matches(p))
            } else {
                matches(name).then(|| (*name).to_owned())
            };
            found.extend(hit);
        }
        for (key, target) in &self.binaries {
            let hit = match &pattern_path {
                Some(p) => super::param::glob_matches(p, key),
                None => matches(key),
            };
            if hit {
                found.push(target.clone());
            }
        }
        found.dedup();
        found.truncate(MAX_CANDIDATES);
        (!found.is_empty()).then_some(found)
    }

    /// `cp`/`ln`/`install`/`mv SOURCE DEST`: when SOURCE is a program the analysis knows
    /// (or a copy of one), DEST runs as that program from now on.
    pub fn copied_program(&mut self, source: &str, dest: &str, ctx: &Context) {
        let Some(dest) = normalize::shell_path(dest, ctx) else {
            return;
        };
        let target = normalize::shell_path(source, ctx).and_then(|p| {
            if let Some((_, t)) = self.binaries.iter().find(|(k, _)| *k == p) {
                return Some(t.clone());
            }
            let base = p.rsplit('/').next().unwrap_or(&p);
            KNOWN.contains(&family(base)).then(|| p.clone())
        });
        match target {
            Some(t) => self.bind_program(dest, t),
            // Something else overwrote it: it is no longer that program.
            None => self.binaries.retain(|(k, _)| *k != dest),
        }
    }

    /// `hash -p PATH NAME`: NAME runs PATH.
    pub fn hash(&mut self, args: &[String]) {
        let o = super::args::parse(args, &["-p"], false);
        if let (Some(path), Some(name)) = (o.value(&["-p"]), o.operands.first()) {
            self.bind_program((*name).to_owned(), path.to_owned());
        }
    }

    fn bind_program(&mut self, key: String, target: String) {
        self.binaries.retain(|(k, _)| *k != key);
        if self.binaries.len() < MAX_BINARIES {
            self.binaries.push((key, target));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_need_a_closed_bracket() {
        assert!(is_glob("/???/r?"));
        assert!(is_glob("/bin/[c]at"));
        assert!(!is_glob("/bin/[cat"));
        assert!(!is_glob("/usr/bin/cat"));
    }

    #[test]
    fn known_programs_are_sorted_and_unique() {
        let mut sorted = KNOWN.to_vec();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted, KNOWN);
    }
}
