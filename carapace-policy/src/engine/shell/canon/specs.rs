//! How each tool the packs speak about reads its options: short aliases, options that take a
//! value, the long names it accepts abbreviated, and what makes it a dry run. Only what the
//! rules need; an option not listed keeps the spelling it was written in.

/// git's own options before the verb that take a value (`git -C DIR push`).
pub(in super::super) const GIT_GLOBAL_VALUED: &[&str] = &[
    "-C",
    "-c",
    "--git-dir",
    "--work-tree",
    "--namespace",
    "--exec-path",
    "--config-env",
    "--super-prefix",
    "--list-cmds",
    "--attr-source",
];

/// `pass` and `gopass` subcommands; any other first word is an entry to show.
pub(super) const PASS_VERBS: &[&str] = &[
    "init",
    "ls",
    "list",
    "find",
    "search",
    "show",
    "grep",
    "insert",
    "add",
    "edit",
    "generate",
    "rm",
    "remove",
    "delete",
    "mv",
    "rename",
    "cp",
    "copy",
    "git",
    "help",
    "version",
    "otp",
    "sync",
    "setup",
    "config",
    "audit",
    "fsck",
    "mounts",
    "recipients",
    "templates",
    "clone",
    "create",
    "new",
    "cat",
    "update",
    "env",
    "completion",
    "alias",
    "fscopy",
    "fsmove",
    "history",
    "link",
    "merge",
    "process",
    "pwgen",
    "rcs",
    "sum",
    "age",
    "convert",
    "unclip",
];

pub(super) struct Spec {
    tool: &'static str,
    /// The verb (git's subcommand, or the first operand: `gh auth`) it is for; `None`: any.
    verb: Option<&'static str>,
    /// Short options and the long option(s) each stands for.
    shorts: &'static [(char, &'static str)],
    /// Options (canonical names) that take a value.
    valued: &'static [&'static str],
    /// Every long option, for tools that accept a unique prefix of one (`getopt_long`,
    /// git's parse-options, gpg); empty: names are taken as written.
    longs: &'static [&'static str],
    /// Options that make the command only say what it would do.
    dry_run: &'static [&'static str],
    /// Options known to take no value (where `longs` does not list every option): the word
    /// after one is an operand.
    flags: &'static [&'static str],
    /// Long options under another name (`--net` is docker's `--network`).
    aliases: &'static [(&'static str, &'static str)],
}

impl Spec {
    /// `--name` as the tool reads it: itself, or the one long option it abbreviates.
    pub(super) fn long_name(&self, name: &str) -> String {
        if let Some((_, to)) = self.aliases.iter().find(|(from, _)| from[2..] == *name) {
            return (*to).to_owned();
        }
        if self.longs.is_empty() || self.longs.iter().any(|l| l[2..] == *name) {
            return format!("--{name}");
        }
        let mut candidates = self.longs.iter().filter(|l| l[2..].starts_with(name));
        match (candidates.next(), candidates.next()) {
            (Some(only), None) if !name.is_empty() => (*only).to_owned(),
            _ => format!("--{name}"),
        }
    }

    /// `-c` as the tool reads it: the long option(s) it stands for, or itself.
    pub(super) fn short_name(&self, c: char) -> String {
        self.shorts
            .iter()
            .find(|(s, _)| *s == c)
            .map_or_else(|| format!("-{c}"), |(_, long)| (*long).to_owned())
    }

    pub(super) fn valued(&self, name: &str) -> bool {
        self.valued.contains(&name)
    }

    /// Whether the spec knows `name` well enough to say whether it takes a value: the word
    /// after an option it does not know may be that option's value.
    pub(super) fn settles(&self, name: &str) -> bool {
        // `--no-X` turns X off and takes no value, for the tools that accept a negation
        // (git's parse-options, getopt_long tools that list every option).
        let negation = !self.longs.is_empty() && name.starts_with("--no-");
        negation
            || self.valued(name)
            || self.longs.contains(&name)
            || self.flags.contains(&name)
            || self
                .shorts
                .iter()
                .any(|(_, long)| long.split_whitespace().any(|l| l == name))
    }

    pub(super) fn is_dry_run(&self, options: &[String]) -> bool {
        options.iter().any(|o| self.dry_run.contains(&o.as_str()))
    }
}

/// Every spelling of each value-taking option of `tool`'s spec (with the value `V`), as
/// `getopt_long` reads them: `--name V`, `--name=V`, the shortest unique prefix both ways,
/// and each short alone, with the value attached and bundled after another short.
#[cfg(test)]
pub(crate) fn valued_spellings(tool: &str) -> Vec<String> {
    let Some(spec) = find(tool, None) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for long in spec.valued {
        out.push(format!("{long} V"));
        out.push(format!("{long}=V"));
        let name = &long[2..];
        if let Some(prefix) = (1..name.len())
            .map(|n| &name[..n])
            .find(|p| spec.long_name(p) == *long)
        {
            out.push(format!("--{prefix} V"));
            out.push(format!("--{prefix}=V"));
        }
    }
    let flag = spec
        .shorts
        .iter()
        .find(|(_, long)| !spec.valued(long))
        .map(|(c, _)| *c);
    for (c, long) in spec.shorts {
        if spec.valued(long) {
            out.push(format!("-{c} V"));
            out.push(format!("-{c}V"));
            out.extend(flag.map(|f| format!("-{f}{c} V")));
        }
    }
    out
}

/// The spec for `tool` whose verb is `verb` (or that applies to any verb).
pub(super) fn find(tool: &str, verb: Option<&String>) -> Option<&'static Spec> {
    SPECS
        .iter()
        .find(|s| s.tool == tool && s.verb.is_none_or(|v| verb.is_some_and(|w| w == v)))
}

/// Whether any spec is for `tool`.
pub(super) fn knows(tool: &str) -> bool {
    SPECS.iter().any(|s| s.tool == tool)
}

const NONE: &[&str] = &[];

/// Shorthand for a spec without abbreviations or dry runs.
const fn spec(
    tool: &'static str,
    verb: Option<&'static str>,
    shorts: &'static [(char, &'static str)],
    valued: &'static [&'static str],
) -> Spec {
    Spec {
        tool,
        verb,
        shorts,
        valued,
        longs: NONE,
        dry_run: NONE,
        flags: NONE,
        aliases: &[],
    }
}

const GH_AUTH_SHORTS: &[(char, &str)] = &[
    ('t', "--show-token"),
    ('h', "--hostname"),
    ('s', "--scopes"),
    ('p', "--git-protocol"),
    ('w', "--web"),
    ('a', "--active"),
    ('u', "--user"),
];
const GH_AUTH_VALUED: &[&str] = &["--hostname", "--scopes", "--git-protocol", "--user"];
const HOST_SHORTS: &[(char, &str)] = &[('h', "--hostname")];
const HOST_VALUED: &[&str] = &["--hostname", "--host"];

const KUBECTL_SHORTS: &[(char, &str)] = &[
    ('n', "--namespace"),
    ('o', "--output"),
    ('s', "--server"),
    ('l', "--selector"),
];
const KUBECTL_VALUED: &[&str] = &[
    "--kubeconfig",
    "--context",
    "--cluster",
    "--user",
    "--namespace",
    "--output",
    "--server",
    "--token",
    "--as",
    "--as-group",
    "--template",
    "--selector",
    "--request-timeout",
];

const GPG_SHORTS: &[(char, &str)] = &[
    ('a', "--armor"),
    ('o', "--output"),
    ('r', "--recipient"),
    ('u', "--local-user"),
    ('k', "--list-keys"),
    ('K', "--list-secret-keys"),
    ('e', "--encrypt"),
    ('d', "--decrypt"),
    ('s', "--sign"),
    ('b', "--detach-sign"),
    ('c', "--symmetric"),
    ('v', "--verbose"),
    ('q', "--quiet"),
    ('n', "--dry-run"),
    ('z', "-z"),
];
const GPG_VALUED: &[&str] = &[
    "--output",
    "--recipient",
    "--local-user",
    "--homedir",
    "--export-options",
    "--import-options",
    "--default-key",
    "--passphrase",
    "--passphrase-fd",
    "--passphrase-file",
    "--pinentry-mode",
    "--keyserver",
    "--trust-model",
    "--status-fd",
    "--compress-level",
    "--cipher-algo",
    "--digest-algo",
    "-z",
];
const GPG_LONGS: &[&str] = &[
    "--armor",
    "--batch",
    "--yes",
    "--no-tty",
    "--output",
    "--recipient",
    "--local-user",
    "--homedir",
    "--export",
    "--export-options",
    "--export-secret-keys",
    "--export-secret-subkeys",
    "--export-ssh-key",
    "--import",
    "--import-options",
    "--list-keys",
    "--list-public-keys",
    "--list-secret-keys",
    "--list-sigs",
    "--fingerprint",
    "--sign",
    "--clearsign",
    "--clear-sign",
    "--detach-sign",
    "--encrypt",
    "--decrypt",
    "--symmetric",
    "--verify",
    "--default-key",
    "--passphrase",
    "--passphrase-fd",
    "--passphrase-file",
    "--pinentry-mode",
    "--keyserver",
    "--recv-keys",
    "--send-keys",
    "--search-keys",
    "--refresh-keys",
    "--gen-key",
    "--full-gen-key",
    "--quick-gen-key",
    "--edit-key",
    "--delete-keys",
    "--delete-secret-keys",
    "--trust-model",
    "--status-fd",
    "--with-colons",
    "--verbose",
    "--quiet",
    "--dry-run",
    "--version",
    "--help",
];
const GPGSM_LONGS: &[&str] = &[
    "--armor",
    "--base64",
    "--batch",
    "--output",
    "--export",
    "--export-secret-key-p12",
    "--export-secret-key-p8",
    "--export-secret-key-raw",
    "--import",
    "--list-keys",
    "--list-secret-keys",
    "--sign",
    "--encrypt",
    "--decrypt",
    "--verify",
    "--recipient",
    "--local-user",
    "--homedir",
];

const CHMOD_SHORTS: &[(char, &str)] = &[
    ('R', "--recursive"),
    ('v', "--verbose"),
    ('c', "--changes"),
    ('f', "--silent"),
    ('h', "--no-dereference"),
];
const CHMOD_LONGS: &[&str] = &[
    "--recursive",
    "--verbose",
    "--changes",
    "--silent",
    "--quiet",
    "--reference",
    "--no-dereference",
    "--dereference",
    "--from",
    "--preserve-root",
    "--no-preserve-root",
    "--help",
    "--version",
];
const SETFACL_SHORTS: &[(char, &str)] = &[
    ('R', "--recursive"),
    ('m', "--modify"),
    ('x', "--remove"),
    ('M', "--modify-file"),
    ('X', "--remove-file"),
    ('b', "--remove-all"),
    ('k', "--remove-default"),
    ('d', "--default"),
    ('n', "--no-mask"),
];
const SETFACL_VALUED: &[&str] = &[
    "--modify",
    "--remove",
    "--modify-file",
    "--remove-file",
    "--set",
    "--set-file",
];

const PKILL_SHORTS: &[(char, &str)] = &[
    ('f', "--full"),
    ('x', "--exact"),
    ('u', "--euid"),
    ('U', "--uid"),
    ('g', "--pgroup"),
    ('G', "--group"),
    ('P', "--parent"),
    ('s', "--session"),
    ('t', "--terminal"),
    ('n', "--newest"),
    ('o', "--oldest"),
    ('e', "--echo"),
    ('c', "--count"),
    ('i', "--ignore-case"),
];
const PKILL_VALUED: &[&str] = &[
    "--signal",
    "--euid",
    "--uid",
    "--pgroup",
    "--group",
    "--parent",
    "--session",
    "--terminal",
];
const KILLALL_SHORTS: &[(char, &str)] = &[
    ('s', "--signal"),
    ('e', "--exact"),
    ('I', "--ignore-case"),
    ('i', "--interactive"),
    ('q', "--quiet"),
    ('r', "--regexp"),
    ('u', "--user"),
    ('w', "--wait"),
    ('v', "--verbose"),
];
const KILLALL_VALUED: &[&str] = &["--signal", "--user", "--older-than", "--younger-than"];

/// `security find-generic-password -ws NAME`: single letters, most with a value.
const SECURITY_VALUED: &[&str] = &[
    "-a", "-s", "-l", "-D", "-c", "-C", "-j", "-r", "-d", "-P", "-t", "-p",
];

const GIT_PUSH: Spec = Spec {
    tool: "git",
    verb: Some("push"),
    shorts: &[
        ('f', "--force"),
        ('n', "--dry-run"),
        ('d', "--delete"),
        ('u', "--set-upstream"),
        ('q', "--quiet"),
        ('v', "--verbose"),
        ('o', "--push-option"),
    ],
    valued: &["--push-option", "--repo", "--receive-pack", "--exec"],
    longs: &[
        "--all",
        "--branches",
        "--mirror",
        "--tags",
        "--follow-tags",
        "--atomic",
        "--no-atomic",
        "--dry-run",
        "--porcelain",
        "--delete",
        "--prune",
        "--force",
        "--force-with-lease",
        "--no-force-with-lease",
        "--force-if-includes",
        "--no-force-if-includes",
        "--repo",
        "--set-upstream",
        "--thin",
        "--no-thin",
        "--quiet",
        "--verbose",
        "--progress",
        "--no-verify",
        "--verify",
        "--push-option",
        "--receive-pack",
        "--exec",
        "--signed",
        "--no-signed",
        "--recurse-submodules",
        "--ipv4",
        "--ipv6",
    ],
    dry_run: &["--dry-run"],
    flags: NONE,
    aliases: &[],
};

const GIT_RESET: Spec = Spec {
    tool: "git",
    verb: Some("reset"),
    shorts: &[('q', "--quiet"), ('p', "--patch"), ('N', "--intent-to-add")],
    valued: &["--pathspec-from-file"],
    longs: &[
        "--hard",
        "--soft",
        "--mixed",
        "--merge",
        "--keep",
        "--quiet",
        "--patch",
        "--intent-to-add",
        "--recurse-submodules",
        "--no-recurse-submodules",
        "--refresh",
        "--no-refresh",
        "--pathspec-from-file",
        "--pathspec-file-nul",
    ],
    dry_run: NONE,
    flags: NONE,
    aliases: &[],
};

const GIT_CLEAN: Spec = Spec {
    tool: "git",
    verb: Some("clean"),
    shorts: &[
        ('f', "--force"),
        ('n', "--dry-run"),
        ('q', "--quiet"),
        ('i', "--interactive"),
        ('e', "--exclude"),
        // No long names, but no values either: what follows is a path.
        ('d', "-d"),
        ('x', "-x"),
        ('X', "-X"),
    ],
    valued: &["--exclude"],
    longs: &[
        "--force",
        "--dry-run",
        "--quiet",
        "--interactive",
        "--exclude",
    ],
    dry_run: &["--dry-run", "--interactive"],
    flags: NONE,
    aliases: &[],
};

const GIT_BRANCH: Spec = Spec {
    tool: "git",
    verb: Some("branch"),
    shorts: &[
        ('d', "--delete"),
        ('D', "--delete --force"),
        ('f', "--force"),
        ('m', "--move"),
        ('M', "--move --force"),
        ('c', "--copy"),
        ('C', "--copy --force"),
        ('l', "--list"),
        ('a', "--all"),
        ('r', "--remotes"),
        ('v', "--verbose"),
        ('q', "--quiet"),
        ('t', "--track"),
        ('u', "--set-upstream-to"),
    ],
    valued: &[
        "--set-upstream-to",
        "--format",
        "--sort",
        "--contains",
        "--no-contains",
        "--merged",
        "--no-merged",
        "--points-at",
    ],
    longs: &[
        "--delete",
        "--force",
        "--move",
        "--copy",
        "--list",
        "--all",
        "--remotes",
        "--verbose",
        "--quiet",
        "--track",
        "--no-track",
        "--set-upstream-to",
        "--unset-upstream",
        "--show-current",
        "--edit-description",
        "--format",
        "--sort",
        "--contains",
        "--no-contains",
        "--merged",
        "--no-merged",
        "--points-at",
        "--column",
        "--no-column",
        "--create-reflog",
        "--ignore-case",
        "--omit-empty",
        "--recurse-submodules",
    ],
    dry_run: NONE,
    flags: NONE,
    aliases: &[],
};

const GIT_CHECKOUT: Spec = Spec {
    tool: "git",
    verb: Some("checkout"),
    shorts: &[
        ('f', "--force"),
        ('q', "--quiet"),
        ('p', "--patch"),
        ('m', "--merge"),
    ],
    valued: &["-b", "-B", "--orphan", "--conflict", "--pathspec-from-file"],
    longs: &[
        "--force",
        "--quiet",
        "--patch",
        "--merge",
        "--ours",
        "--theirs",
        "--detach",
        "--orphan",
        "--track",
        "--no-track",
        "--conflict",
        "--overlay",
        "--no-overlay",
        "--progress",
        "--no-progress",
        "--ignore-other-worktrees",
        "--ignore-skip-worktree-bits",
        "--recurse-submodules",
        "--pathspec-from-file",
        "--guess",
        "--no-guess",
    ],
    dry_run: NONE,
    flags: NONE,
    aliases: &[],
};

const GIT_SWITCH: Spec = Spec {
    tool: "git",
    verb: Some("switch"),
    shorts: &[
        ('f', "--discard-changes"),
        ('c', "--create"),
        ('C', "--force-create"),
        ('d', "--detach"),
        ('m', "--merge"),
        ('q', "--quiet"),
        ('t', "--track"),
    ],
    valued: &["--create", "--force-create", "--orphan", "--conflict"],
    longs: &[
        "--discard-changes",
        "--force",
        "--create",
        "--force-create",
        "--detach",
        "--merge",
        "--quiet",
        "--track",
        "--no-track",
        "--orphan",
        "--conflict",
        "--guess",
        "--no-guess",
        "--progress",
        "--no-progress",
        "--ignore-other-worktrees",
        "--recurse-submodules",
    ],
    dry_run: NONE,
    flags: NONE,
    aliases: &[],
};

const GIT_RESTORE: Spec = Spec {
    tool: "git",
    verb: Some("restore"),
    shorts: &[
        ('s', "--source"),
        ('S', "--staged"),
        ('W', "--worktree"),
        ('p', "--patch"),
        ('q', "--quiet"),
        ('m', "--merge"),
    ],
    valued: &["--source", "--conflict", "--pathspec-from-file"],
    longs: &[
        "--source",
        "--staged",
        "--worktree",
        "--patch",
        "--quiet",
        "--merge",
        "--ours",
        "--theirs",
        "--conflict",
        "--overlay",
        "--no-overlay",
        "--progress",
        "--no-progress",
        "--ignore-unmerged",
        "--ignore-skip-worktree-bits",
        "--recurse-submodules",
        "--pathspec-from-file",
    ],
    dry_run: NONE,
    flags: NONE,
    aliases: &[],
};

const GIT_PRUNE: Spec = Spec {
    tool: "git",
    verb: Some("prune"),
    shorts: &[('n', "--dry-run"), ('v', "--verbose")],
    valued: &["--expire"],
    longs: &["--dry-run", "--verbose", "--progress", "--expire"],
    dry_run: &["--dry-run"],
    flags: NONE,
    aliases: &[],
};

const GIT_REFLOG: Spec = Spec {
    tool: "git",
    verb: Some("reflog"),
    shorts: &[('n', "--dry-run")],
    valued: NONE,
    longs: NONE,
    dry_run: &["--dry-run"],
    flags: NONE,
    aliases: &[],
};

const GIT_GC: Spec = Spec {
    tool: "git",
    verb: Some("gc"),
    shorts: &[('q', "--quiet")],
    valued: NONE,
    longs: &[
        "--aggressive",
        "--auto",
        "--prune",
        "--no-prune",
        "--quiet",
        "--force",
        "--keep-largest-pack",
        "--cruft",
        "--no-cruft",
    ],
    dry_run: NONE,
    flags: NONE,
    aliases: &[],
};

const GIT_UPDATE_REF: Spec = spec("git", Some("update-ref"), &[], &["-m"]);

/// Container engines (`docker run`, `podman create`, …): Go's pflag, no abbreviations.
const CONTAINER_SHORTS: &[(char, &str)] = &[
    ('v', "--volume"),
    ('e', "--env"),
    ('p', "--publish"),
    ('u', "--user"),
    ('w', "--workdir"),
    ('i', "--interactive"),
    ('t', "--tty"),
    ('d', "--detach"),
    ('P', "--publish-all"),
];
const CONTAINER_VALUED: &[&str] = &[
    "--volume",
    "--mount",
    "--pid",
    "--network",
    "--ipc",
    "--uts",
    "--userns",
    "--cap-add",
    "--cap-drop",
    "--device",
    "--env",
    "--env-file",
    "--publish",
    "--name",
    "--user",
    "--workdir",
    "--entrypoint",
    "--security-opt",
    "--label",
    "--hostname",
    "--platform",
];
const CONTAINER_FLAGS: &[&str] = &[
    "--privileged",
    "--rm",
    "--interactive",
    "--tty",
    "--detach",
    "--publish-all",
    "--init",
    "--read-only",
];
const CONTAINER: Spec = Spec {
    flags: CONTAINER_FLAGS,
    aliases: &[("--net", "--network")],
    ..spec("docker", None, CONTAINER_SHORTS, CONTAINER_VALUED)
};

/// `gh api` / `glab api`: method, fields and endpoint in any order.
const FORGE_API_SHORTS: &[(char, &str)] = &[
    ('X', "--method"),
    ('F', "--field"),
    ('f', "--raw-field"),
    ('H', "--header"),
    ('i', "--include"),
    ('q', "--jq"),
    ('t', "--template"),
    ('p', "--preview"),
];
const FORGE_API_VALUED: &[&str] = &[
    "--method",
    "--field",
    "--raw-field",
    "--header",
    "--jq",
    "--template",
    "--preview",
    "--input",
    "--hostname",
    "--cache",
];
const FORGE_API_FLAGS: &[&str] = &[
    "--include",
    "--paginate",
    "--silent",
    "--verbose",
    "--slurp",
];

/// `git config`: which options take a value, so that the key and value are told apart.
const GIT_CONFIG: Spec = Spec {
    flags: &[
        "--get",
        "--get-all",
        "--get-regexp",
        "--get-urlmatch",
        "--global",
        "--local",
        "--system",
        "--worktree",
        "--show-origin",
        "--show-scope",
        "--null",
        "--includes",
        "--no-includes",
        "--bool",
        "--int",
        "--path",
        "--add",
        "--replace-all",
        "--unset",
        "--unset-all",
        "--list",
        "--edit",
        "--name-only",
        "--all",
        "--fixed-value",
        "--show-names",
        "--remove-section",
        "--rename-section",
        "--get-colorbool",
        "--bool-or-int",
        "--bool-or-str",
        "--expiry-date",
    ],
    ..spec(
        "git",
        Some("config"),
        &[
            ('f', "--file"),
            ('l', "--list"),
            ('e', "--edit"),
            ('z', "--null"),
        ],
        &[
            "--file",
            "--blob",
            "--type",
            "--default",
            "--comment",
            "--value",
            "--get-color",
        ],
    )
};

/// Secret managers whose bare `secrets` prints every secret.
const DOPPLER: Spec = Spec {
    flags: &[
        "--raw",
        "--json",
        "--plain",
        "--silent",
        "--debug",
        "--no-interactive",
        "--only-names",
        "--no-check-version",
    ],
    ..spec(
        "doppler",
        None,
        &[('p', "--project"), ('c', "--config")],
        &[
            "--project",
            "--config",
            "--scope",
            "--token",
            "--format",
            "--configuration",
        ],
    )
};
const INFISICAL: Spec = Spec {
    flags: &[
        "--plain",
        "--silent",
        "--expand",
        "--include-imports",
        "--recursive",
    ],
    ..spec(
        "infisical",
        None,
        &[],
        &[
            "--env",
            "--path",
            "--projectId",
            "--token",
            "--domain",
            "--tags",
            "--type",
        ],
    )
};

/// `systemd-run` (`getopt_long`: a unique prefix of a long option is that option, so
/// `--on-cal` is `--on-calendar`). Every option is listed; the command follows them.
const SYSTEMD_RUN: Spec = Spec {
    longs: &[
        "--unit",
        "--property",
        "--description",
        "--slice",
        "--slice-inherit",
        "--setenv",
        "--uid",
        "--gid",
        "--nice",
        "--machine",
        "--host",
        "--capsule",
        "--working-directory",
        "--same-dir",
        "--on-active",
        "--on-boot",
        "--on-startup",
        "--on-unit-active",
        "--on-unit-inactive",
        "--on-calendar",
        "--on-clock-change",
        "--on-timezone-change",
        "--timer-property",
        "--path-property",
        "--socket-property",
        "--service-type",
        "--expand-environment",
        "--json",
        "--background",
        "--user",
        "--system",
        "--scope",
        "--no-block",
        "--wait",
        "--pty",
        "--pipe",
        "--quiet",
        "--verbose",
        "--collect",
        "--remain-after-exit",
        "--send-sighup",
        "--shell",
        "--no-ask-password",
        "--help",
        "--version",
    ],
    ..spec(
        "systemd-run",
        None,
        &[
            ('u', "--unit"),
            ('p', "--property"),
            ('E', "--setenv"),
            ('M', "--machine"),
            ('H', "--host"),
            ('C', "--capsule"),
            ('t', "--pty"),
            ('P', "--pipe"),
            ('q', "--quiet"),
            ('v', "--verbose"),
            ('G', "--collect"),
            ('r', "--remain-after-exit"),
            ('d', "--same-dir"),
            ('S', "--shell"),
            ('h', "--help"),
        ],
        &[
            "--unit",
            "--property",
            "--description",
            "--slice",
            "--setenv",
            "--uid",
            "--gid",
            "--nice",
            "--machine",
            "--host",
            "--capsule",
            "--working-directory",
            "--on-active",
            "--on-boot",
            "--on-startup",
            "--on-unit-active",
            "--on-unit-inactive",
            "--on-calendar",
            "--timer-property",
            "--path-property",
            "--socket-property",
            "--service-type",
            "--expand-environment",
            "--json",
            "--background",
        ],
    )
};

const SPECS: &[Spec] = &[
    SYSTEMD_RUN,
    GIT_PUSH,
    GIT_RESET,
    GIT_CLEAN,
    GIT_BRANCH,
    GIT_CHECKOUT,
    GIT_SWITCH,
    GIT_RESTORE,
    GIT_PRUNE,
    GIT_REFLOG,
    GIT_GC,
    GIT_UPDATE_REF,
    GIT_CONFIG,
    CONTAINER,
    Spec {
        tool: "podman",
        ..CONTAINER
    },
    Spec {
        tool: "nerdctl",
        ..CONTAINER
    },
    Spec {
        flags: FORGE_API_FLAGS,
        ..spec("gh", Some("api"), FORGE_API_SHORTS, FORGE_API_VALUED)
    },
    Spec {
        flags: FORGE_API_FLAGS,
        ..spec("glab", Some("api"), FORGE_API_SHORTS, FORGE_API_VALUED)
    },
    DOPPLER,
    INFISICAL,
    spec("gh", Some("auth"), GH_AUTH_SHORTS, GH_AUTH_VALUED),
    spec("gh", Some("config"), HOST_SHORTS, HOST_VALUED),
    spec("glab", Some("auth"), GH_AUTH_SHORTS, GH_AUTH_VALUED),
    spec("glab", Some("config"), HOST_SHORTS, HOST_VALUED),
    spec("kubectl", None, KUBECTL_SHORTS, KUBECTL_VALUED),
    spec("oc", None, KUBECTL_SHORTS, KUBECTL_VALUED),
    Spec {
        longs: GPG_LONGS,
        ..spec("gpg", None, GPG_SHORTS, GPG_VALUED)
    },
    Spec {
        longs: GPGSM_LONGS,
        ..spec("gpgsm", None, GPG_SHORTS, GPG_VALUED)
    },
    Spec {
        longs: CHMOD_LONGS,
        ..spec("chmod", None, CHMOD_SHORTS, &["--reference"])
    },
    Spec {
        longs: CHMOD_LONGS,
        ..spec("chown", None, CHMOD_SHORTS, &["--reference", "--from"])
    },
    Spec {
        longs: CHMOD_LONGS,
        ..spec("chgrp", None, CHMOD_SHORTS, &["--reference"])
    },
    spec("setfacl", None, SETFACL_SHORTS, SETFACL_VALUED),
    spec("pkill", None, PKILL_SHORTS, PKILL_VALUED),
    spec("pgrep", None, PKILL_SHORTS, PKILL_VALUED),
    spec("killall", None, KILLALL_SHORTS, KILLALL_VALUED),
    spec("security", None, &[], SECURITY_VALUED),
    spec("pass", None, &[('c', "--clip")], NONE),
    spec("gopass", None, &[('c', "--clip")], NONE),
];
