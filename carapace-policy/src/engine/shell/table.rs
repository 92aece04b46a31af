//! The command table as data: what each known command does, as an [`Entry`] of [`TABLE`],
//! looked up by name in a map built once. A command whose effect is its options and
//! operands (which take a value, which name paths read, written, deleted or executed, which
//! run the rest of the line) is a [`Spec`], walked by [`apply`]; one whose effect cannot be
//! said as data (`find -exec`, `xargs`, `sh -c`, interpreters) names a handler function in
//! one of the submodules. Adding a command is adding an entry.
// Handlers share the table's one signature: the call is owned so a handler can hand its
// stdin on to what it runs, and those that only look at it are linted for taking it.
#[allow(
    clippy::needless_pass_by_value,
    reason = "one signature for every handler (see above)"
)]
mod files;
#[allow(
    clippy::needless_pass_by_value,
    reason = "one signature for every handler (see above)"
)]
mod lookups;
#[allow(
    clippy::needless_pass_by_value,
    reason = "one signature for every handler (see above)"
)]
mod state;
#[allow(
    clippy::needless_pass_by_value,
    reason = "one signature for every handler (see above)"
)]
mod text;
#[allow(
    clippy::needless_pass_by_value,
    reason = "one signature for every handler (see above)"
)]
mod wrap;

use std::collections::HashMap;
use std::sync::OnceLock;

use super::super::operation::Context;
use super::args;
use super::commands::{environment_feed, program_paths, PATCH_VALUED};
use super::names::{INTERPRETERS, SHELLS};
use super::walk::{Feed, Walker};
use crate::rules::Action;

/// One command as the walk runs it: its family name, its expanded arguments, how deep in
/// wrappers it is, and its stdin.
pub(super) struct Call<'c> {
    pub name: &'c str,
    pub args: &'c [String],
    pub depth: usize,
    pub stdin: Feed,
}

/// Runs a command whose effect is code, not data.
type Handler = fn(&mut Walker<'_>, &mut Context, Call<'_>) -> Feed;

/// Whether an entry applies to this call (`tr` translates text it is given, and is a
/// plain reader otherwise: two entries, the first guarded).
type Guard = fn(&Call<'_>) -> bool;

/// One entry of the table.
pub(super) struct Entry {
    /// The names it is run by (as [`super::names::family`] gives them).
    names: &'static [&'static str],
    /// When present, the entry applies only if it holds; else the next entry of the name
    /// does, in table order, and then the fallback.
    when: Option<Guard>,
    does: Does,
}

enum Does {
    Spec(Spec),
    /// A reader or filter of files (`cat`, `head`, `sort`, `ls`): the options that take a
    /// value; what readers do is one method ([`Walker::reader`]).
    Reader(&'static [&'static str]),
    Handler(Handler),
}

/// What a command does, as data.
pub(super) struct Spec {
    /// Options that take a value (`-o FILE`, `--out FILE`, `-oFILE`, `--out=FILE`).
    valued: &'static [&'static str],
    /// Options whose value names a path, and what the command does to it (each group in
    /// command-line order).
    option_paths: &'static [(&'static [&'static str], Action)],
    /// Options whose value is shell code run in a subshell (`flock -c CODE`).
    code: &'static [&'static str],
    /// What the command does to the paths its operands name.
    operands: Operands,
    /// Operands starting with this are not paths (`vim +10 FILE`).
    skip: Option<char>,
    /// Without any argument, what the command does to this path (`ssh-add` reads `~/.ssh`).
    bare: Option<(Action, &'static str)>,
    /// A wrapper: option parsing stops at the first operand, and the words from this
    /// operand on run as a command (`timeout 5 CMD…` is `Some(1)`).
    runs: Option<usize>,
    /// What it prints, for `$(…)` and pipes.
    prints: Prints,
}

impl Spec {
    /// A command that does nothing the policy sees; entries override what they do.
    const NONE: Spec = Spec {
        valued: &[],
        option_paths: &[],
        code: &[],
        operands: Operands::None,
        skip: None,
        bare: None,
        runs: None,
        prints: Prints::Nothing,
    };
}

/// What a command does to its operands.
#[derive(Clone, Copy)]
enum Operands {
    None,
    /// Every operand gets each of these actions, in order (an editor reads and writes).
    Each(&'static [Action]),
    /// The first operand gets the first action, the second the second; the rest nothing
    /// (`patch ORIG PATCHFILE`).
    First(&'static [Action]),
}

#[derive(Clone, Copy)]
enum Prints {
    Nothing,
    /// The environment (`printenv`).
    Environment,
    /// Where the named programs are (`which`, `type -P`).
    ProgramPaths,
}

/// `cargo watch …` (the cargo-watch plugin), whose `-s` runs shell code.
fn cargo_watch(call: &Call<'_>) -> bool {
    call.args.first().is_some_and(|a| a == "watch")
}

/// `ps e`, `ps eww`, `ps auxe`: a BSD-style option word (no dash) holding `e` prints every
/// listed process's environment after its command line (`ps -e`, with a dash, only lists
/// every process). Values of the options that take one (`-o etime`) are skipped.
fn ps_shows_environment(call: &Call<'_>) -> bool {
    const VALUED: &[&str] = &[
        "-o", "-O", "-p", "-q", "-u", "-U", "-g", "-G", "-C", "-t", "-s", "--format", "--pid",
        "--ppid", "--user", "--User", "--group", "--Group", "--sort", "--tty", "--sid", "-k",
    ];
    let mut valued = false;
    call.args.iter().any(|a| {
        let after_option = std::mem::replace(&mut valued, VALUED.contains(&a.as_str()));
        !after_option
            && !a.starts_with('-')
            && a.bytes().all(|b| b.is_ascii_alphabetic())
            && a.contains('e')
    })
}

/// `touch`, `mkdir`, `setfacl` and their kin: options that take a value.
const CREATE_VALUED: &[&str] = &[
    "-r",
    "-d",
    "-t",
    "-s",
    "-m",
    "-M",
    "-x",
    "-X",
    "--reference",
    "--date",
    "--size",
    "--mode",
    "--context",
    "--set",
    "--set-file",
    "--modify",
    "--remove",
    "--modify-file",
    "--remove-file",
];

/// ... and the options among them that name a file read (a reference, an ACL file).
const CREATE_READS: &[(&[&str], Action)] = &[(
    &[
        "-r",
        "--reference",
        "-M",
        "-X",
        "--set-file",
        "--modify-file",
        "--remove-file",
    ],
    Action::Read,
)];

/// Every command the walk knows, in the order their entries are tried.
static TABLE: &[Entry] = &[
    Entry {
        names: &["sudo"],
        when: None,
        does: Does::Handler(wrap::sudo),
    },
    Entry {
        names: &["doas"],
        when: None,
        does: Does::Spec(Spec {
            valued: &["-u", "-C"],
            runs: Some(0),
            ..Spec::NONE
        }),
    },
    Entry {
        names: &[
            "nohup",
            "time",
            "builtin",
            "unbuffer",
            "caffeinate",
            "catchsegv",
            "command",
            "exec",
            "setsid",
            "busybox",
            "toybox",
            "ltrace",
            "strace",
            "torsocks",
            "proxychains",
            "dbus-run-session",
            "pkexec",
            "linux32",
            "linux64",
            "proxychains4",
            "firejail",
            "fakeroot",
            "nocache",
            "eatmydata",
            "setpriv",
            "systemd-run",
            "unshare",
            "nsenter",
            "setarch",
            "xvfb-run",
            "valgrind",
            "fakechroot",
            "ssh-agent",
            "dbus-launch",
            "cgexec",
            "proot",
            "faketime",
            "sg",
        ],
        when: None,
        does: Does::Handler(wrap::wrapper),
    },
    Entry {
        names: &[
            "nice", "ionice", "taskset", "chrt", "numactl", "cpulimit", "prlimit",
        ],
        when: None,
        does: Does::Handler(wrap::scheduler),
    },
    Entry {
        names: &["stdbuf"],
        when: None,
        does: Does::Spec(Spec {
            valued: &["-i", "-o", "-e", "--input", "--output", "--error"],
            runs: Some(0),
            ..Spec::NONE
        }),
    },
    Entry {
        names: &["timeout"],
        when: None,
        does: Does::Spec(Spec {
            valued: &["-s", "-k", "--signal", "--kill-after"],
            runs: Some(1),
            ..Spec::NONE
        }),
    },
    Entry {
        names: &["chroot"],
        when: None,
        does: Does::Spec(Spec {
            valued: &["--userspec", "--groups"],
            operands: Operands::First(&[Action::Execute]),
            runs: Some(1),
            ..Spec::NONE
        }),
    },
    Entry {
        names: &["flock"],
        when: None,
        does: Does::Spec(Spec {
            valued: &[
                "-w",
                "-E",
                "-c",
                "--timeout",
                "--command",
                "--conflict-exit-code",
            ],
            code: &["-c", "--command"],
            runs: Some(1),
            ..Spec::NONE
        }),
    },
    Entry {
        names: &["watch"],
        when: None,
        does: Does::Handler(wrap::watch),
    },
    // `cargo watch -s CMD`: CMD runs in a shell on every change (`-x` runs cargo's own).
    Entry {
        names: &["cargo"],
        when: Some(cargo_watch),
        does: Does::Spec(Spec {
            valued: &[
                "-s",
                "--shell",
                "-x",
                "--exec",
                "-w",
                "--watch",
                "-i",
                "--ignore",
                "-d",
                "--delay",
                "-C",
                "--workdir",
                "--use-shell",
                "-E",
                "--env-var",
                "--env-file",
            ],
            code: &["-s", "--shell"],
            ..Spec::NONE
        }),
    },
    Entry {
        names: &["env"],
        when: None,
        does: Does::Handler(wrap::env),
    },
    Entry {
        names: &["printenv"],
        when: None,
        does: Does::Spec(Spec {
            prints: Prints::Environment,
            ..Spec::NONE
        }),
    },
    Entry {
        names: &["ps"],
        when: Some(ps_shows_environment),
        does: Does::Spec(Spec {
            prints: Prints::Environment,
            ..Spec::NONE
        }),
    },
    Entry {
        names: &["xargs"],
        when: None,
        does: Does::Handler(wrap::xargs),
    },
    Entry {
        names: &["trap"],
        when: None,
        does: Does::Handler(wrap::trap),
    },
    Entry {
        names: &["eval"],
        when: None,
        does: Does::Handler(wrap::eval),
    },
    Entry {
        names: &["su", "runuser"],
        when: None,
        does: Does::Handler(wrap::switch_user),
    },
    Entry {
        names: &["script"],
        when: None,
        does: Does::Handler(wrap::script),
    },
    Entry {
        names: &["find"],
        when: None,
        does: Does::Handler(wrap::find),
    },
    Entry {
        names: &["locate", "plocate", "mlocate", "slocate"],
        when: None,
        does: Does::Handler(wrap::locate),
    },
    Entry {
        names: &["fd", "fdfind"],
        when: None,
        does: Does::Handler(wrap::fd),
    },
    Entry {
        names: SHELLS,
        when: None,
        does: Does::Handler(wrap::shell),
    },
    Entry {
        names: &["source", "."],
        when: None,
        does: Does::Handler(wrap::source),
    },
    Entry {
        names: &["cd", "pushd"],
        when: None,
        does: Does::Handler(state::cd),
    },
    Entry {
        names: &["export", "declare", "typeset", "local", "readonly"],
        when: None,
        does: Does::Handler(state::export),
    },
    Entry {
        names: &["set"],
        when: Some(state::when_set_listing),
        does: Does::Handler(state::set_listing),
    },
    Entry {
        names: &[":", "true", "false"],
        when: None,
        does: Does::Spec(Spec { ..Spec::NONE }),
    },
    Entry {
        names: &["read"],
        when: None,
        does: Does::Handler(state::read),
    },
    Entry {
        names: &["let"],
        when: None,
        does: Does::Handler(state::let_),
    },
    Entry {
        names: &["mapfile", "readarray"],
        when: None,
        does: Does::Handler(state::mapfile),
    },
    Entry {
        names: &["set"],
        when: Some(state::when_set_positional),
        does: Does::Handler(state::set_positional),
    },
    Entry {
        names: &["popd"],
        when: None,
        does: Does::Handler(state::popd),
    },
    Entry {
        names: &["shopt"],
        when: None,
        does: Does::Handler(state::shopt),
    },
    Entry {
        names: &["shift"],
        when: None,
        does: Does::Handler(state::shift),
    },
    Entry {
        names: &["unset"],
        when: None,
        does: Does::Handler(state::unset),
    },
    Entry {
        names: &["alias"],
        when: None,
        does: Does::Handler(state::alias),
    },
    Entry {
        names: &["echo"],
        when: None,
        does: Does::Handler(state::echo),
    },
    Entry {
        names: &["printf"],
        when: None,
        does: Does::Handler(state::printf),
    },
    Entry {
        names: &["base64", "base32", "basenc", "xxd", "uudecode"],
        when: Some(text::when_decoder),
        does: Does::Handler(text::decoder),
    },
    Entry {
        names: &["tr"],
        when: Some(text::when_tr),
        does: Does::Handler(text::tr),
    },
    Entry {
        names: &["rev"],
        when: Some(text::when_rev),
        does: Does::Handler(text::rev),
    },
    Entry {
        names: &["uniq"],
        when: Some(text::when_uniq),
        does: Does::Handler(text::uniq),
    },
    Entry {
        names: &["pwd"],
        when: None,
        does: Does::Handler(text::pwd),
    },
    Entry {
        names: &["mktemp"],
        when: None,
        does: Does::Handler(text::mktemp),
    },
    Entry {
        names: &["dirname", "basename", "realpath", "readlink"],
        when: Some(text::when_path_name),
        does: Does::Handler(text::path_name),
    },
    Entry {
        names: &["head", "tail"],
        when: None,
        does: Does::Reader(&[
            "-n",
            "-c",
            "--lines",
            "--bytes",
            "-s",
            "--sleep-interval",
            "--pid",
        ]),
    },
    Entry {
        names: &["cut"],
        when: None,
        does: Does::Reader(&[
            "-d",
            "-f",
            "-c",
            "-b",
            "--delimiter",
            "--fields",
            "--characters",
            "--bytes",
            "--output-delimiter",
        ]),
    },
    Entry {
        names: &["sort"],
        when: None,
        does: Does::Reader(&[
            "-k",
            "-t",
            "-o",
            "-T",
            "-S",
            "--key",
            "--field-separator",
            "--output",
            "--buffer-size",
            "--temporary-directory",
            "--parallel",
            "--batch-size",
            "--files0-from",
        ]),
    },
    Entry {
        names: &["uniq"],
        when: None,
        does: Does::Reader(&["-f", "-s", "-w"]),
    },
    Entry {
        names: &["xxd"],
        when: None,
        does: Does::Reader(&["-s", "-l", "-c", "-g", "-o", "-n"]),
    },
    Entry {
        names: &["od"],
        when: None,
        does: Does::Reader(&["-A", "-t", "-N", "-j", "-w", "-S"]),
    },
    Entry {
        names: &["hexdump", "hd"],
        when: None,
        does: Does::Reader(&["-n", "-s", "-e", "-f"]),
    },
    Entry {
        names: &["strings"],
        when: None,
        does: Does::Reader(&["-n", "-t", "-e", "-T"]),
    },
    Entry {
        names: &["base64", "base32", "basenc"],
        when: None,
        does: Does::Reader(&["-w", "--wrap"]),
    },
    Entry {
        names: &["ls", "dir", "vdir"],
        when: None,
        does: Does::Reader(&[
            "-I",
            "-w",
            "-T",
            "--hide",
            "--ignore",
            "--width",
            "--format",
            "--sort",
            "--time",
            "--color",
            "--block-size",
            "--quoting-style",
            "--indicator-style",
            "--time-style",
        ]),
    },
    Entry {
        names: &["du"],
        when: None,
        does: Does::Reader(&[
            "-d",
            "-t",
            "-B",
            "-X",
            "--max-depth",
            "--threshold",
            "--block-size",
            "--exclude-from",
            "--files0-from",
            "--exclude",
        ]),
    },
    Entry {
        names: &["tree"],
        when: None,
        does: Does::Reader(&[
            "-L",
            "-I",
            "-P",
            "-o",
            "-H",
            "-T",
            "--filelimit",
            "--charset",
        ]),
    },
    Entry {
        names: &["diff", "sdiff", "diff3"],
        when: None,
        does: Does::Reader(&[
            "-U",
            "-C",
            "-x",
            "-X",
            "-I",
            "-F",
            "-L",
            "-W",
            "--label",
            "--to-file",
            "--from-file",
            "--width",
        ]),
    },
    Entry {
        names: &["file"],
        when: None,
        does: Does::Reader(&["-m", "-F", "-e", "-P", "--magic-file", "--separator"]),
    },
    Entry {
        names: &["stat"],
        when: None,
        does: Does::Reader(&["-c", "--format", "--printf"]),
    },
    Entry {
        names: &["less", "more", "most"],
        when: None,
        does: Does::Reader(&[
            "-b", "-h", "-j", "-k", "-o", "-O", "-p", "-P", "-t", "-T", "-x", "-y", "-z",
        ]),
    },
    Entry {
        names: &["column"],
        when: None,
        does: Does::Reader(&["-s", "-o", "-c", "-N", "-R", "-E", "-H", "-W", "-l"]),
    },
    Entry {
        names: &["fold", "fmt"],
        when: None,
        does: Does::Reader(&["-w", "-p", "-g"]),
    },
    Entry {
        names: &["comm", "join", "paste"],
        when: None,
        does: Does::Reader(&[
            "-d",
            "-t",
            "-1",
            "-2",
            "-j",
            "-o",
            "-e",
            "--output-delimiter",
        ]),
    },
    Entry {
        names: &["iconv"],
        when: None,
        does: Does::Reader(&["-f", "-t", "-o", "--from-code", "--to-code", "--output"]),
    },
    Entry {
        names: &["nl"],
        when: None,
        does: Does::Reader(&["-b", "-d", "-f", "-h", "-i", "-l", "-n", "-s", "-v", "-w"]),
    },
    Entry {
        names: &["bat", "batcat"],
        when: None,
        does: Does::Reader(&[
            "-l",
            "-H",
            "-r",
            "-m",
            "--language",
            "--line-range",
            "--highlight-line",
            "--style",
            "--theme",
            "--tabs",
            "--wrap",
            "--map-syntax",
            "--paging",
            "--color",
            "--decorations",
        ]),
    },
    Entry {
        names: &["split", "csplit"],
        when: None,
        does: Does::Reader(&[
            "-a",
            "-b",
            "-C",
            "-l",
            "-n",
            "-t",
            "-f",
            "--suffix-length",
            "--bytes",
            "--lines",
            "--number",
            "--prefix",
        ]),
    },
    Entry {
        names: &[
            "md5sum",
            "sha1sum",
            "sha256sum",
            "sha512sum",
            "b2sum",
            "cksum",
        ],
        when: None,
        does: Does::Reader(&["-a", "-l", "--algorithm", "--length"]),
    },
    Entry {
        names: &["pr"],
        when: None,
        does: Does::Reader(&["-h", "-l", "-w", "-o", "-N"]),
    },
    Entry {
        names: &[
            "cat",
            "tac",
            "wc",
            "cmp",
            "sha224sum",
            "sha384sum",
            "sum",
            "readlink",
            "realpath",
            "lsattr",
            "getfacl",
            "rev",
            "zcat",
            "bzcat",
            "xzcat",
            "zless",
            "zmore",
            "expand",
            "unexpand",
            "tr",
            "look",
            "view",
            "tsort",
            "shuf",
            "sha1",
            "md5",
            "nm",
            "objdump",
            "readelf",
            "ldd",
            "exiftool",
            "pdftotext",
        ],
        when: None,
        does: Does::Reader(&[]),
    },
    Entry {
        names: &[
            "grep", "egrep", "fgrep", "zgrep", "rg", "ag", "ack", "ugrep",
        ],
        when: None,
        does: Does::Handler(text::grep),
    },
    Entry {
        names: &["sed", "gsed"],
        when: None,
        does: Does::Handler(text::sed),
    },
    Entry {
        names: &["awk", "gawk", "mawk", "nawk"],
        when: None,
        does: Does::Handler(text::awk),
    },
    Entry {
        names: &["jq", "yq", "gojq"],
        when: None,
        does: Does::Handler(text::jq),
    },
    Entry {
        names: INTERPRETERS,
        when: None,
        does: Does::Handler(text::interpreter),
    },
    Entry {
        names: &["apply_patch", "applypatch"],
        when: None,
        does: Does::Handler(text::apply_patch),
    },
    Entry {
        names: &["tee"],
        when: None,
        does: Does::Handler(files::tee),
    },
    Entry {
        names: &["nvme"],
        when: Some(files::when_nvme),
        does: Does::Handler(files::nvme),
    },
    Entry {
        names: &["podman", "podman-remote", "docker", "nerdctl"],
        when: Some(files::when_container_socket),
        does: Does::Handler(files::container_socket),
    },
    Entry {
        names: &["patch"],
        when: Some(files::when_patch_in_dir),
        does: Does::Handler(files::patch_in_dir),
    },
    Entry {
        names: &["patch"],
        when: None,
        does: Does::Spec(Spec {
            valued: PATCH_VALUED,
            option_paths: &[
                (&["-i", "--input"], Action::Read),
                (&["-o", "--output"], Action::Write),
            ],
            operands: Operands::First(&[Action::Write, Action::Read]),
            ..Spec::NONE
        }),
    },
    Entry {
        names: &["setfattr"],
        when: None,
        does: Does::Spec(Spec {
            valued: &[
                "-n",
                "-v",
                "-x",
                "--name",
                "--value",
                "--remove",
                "--restore",
            ],
            operands: Operands::Each(&[Action::Write]),
            ..Spec::NONE
        }),
    },
    Entry {
        names: &["ztcp"],
        when: None,
        does: Does::Handler(files::ztcp),
    },
    Entry {
        names: &["sysctl"],
        when: None,
        does: Does::Handler(files::sysctl),
    },
    Entry {
        names: &["touch", "truncate", "mkdir", "mkfifo", "setfacl"],
        when: None,
        does: Does::Spec(Spec {
            valued: CREATE_VALUED,
            option_paths: CREATE_READS,
            operands: Operands::Each(&[Action::Write]),
            ..Spec::NONE
        }),
    },
    Entry {
        names: &["mknod"],
        when: None,
        does: Does::Spec(Spec {
            valued: CREATE_VALUED,
            option_paths: CREATE_READS,
            operands: Operands::First(&[Action::Write]),
            ..Spec::NONE
        }),
    },
    Entry {
        names: &["chmod", "chown", "chgrp", "chattr", "chcon"],
        when: None,
        does: Does::Handler(files::change_owner),
    },
    Entry {
        names: &["rm", "rmdir", "unlink", "shred", "srm", "wipe"],
        when: None,
        does: Does::Handler(files::remove),
    },
    Entry {
        names: &["cp", "mv", "install", "ln", "link", "rsync", "scp"],
        when: None,
        does: Does::Handler(files::copy),
    },
    // Package runners: the package's command runs with the rest of the line; `-c` is a
    // shell line.
    Entry {
        names: &["npx", "pnpx", "bunx"],
        when: None,
        does: Does::Spec(Spec {
            valued: &["-p", "--package", "-c", "--call"],
            code: &["-c", "--call"],
            runs: Some(0),
            ..Spec::NONE
        }),
    },
    Entry {
        names: &[
            "httpd",
            "http-server",
            "serve",
            "darkhttpd",
            "miniserve",
            "static-web-server",
        ],
        when: None,
        does: Does::Handler(files::file_server),
    },
    Entry {
        names: &["sponge"],
        when: None,
        does: Does::Handler(files::sponge),
    },
    Entry {
        names: &["make", "gmake"],
        when: None,
        does: Does::Handler(files::make),
    },
    Entry {
        names: &["parallel"],
        when: None,
        does: Does::Handler(files::parallel),
    },
    Entry {
        names: &["dd"],
        when: None,
        does: Does::Handler(files::dd),
    },
    Entry {
        names: &[
            "mkfs",
            "mke2fs",
            "mkswap",
            "wipefs",
            "fdisk",
            "sfdisk",
            "cfdisk",
            "parted",
            "gdisk",
            "sgdisk",
            "blkdiscard",
            "mkdosfs",
            "mkntfs",
            "hdparm",
            "badblocks",
            "losetup",
            "cryptsetup",
            "mount",
            "umount",
            "swapon",
            "swapoff",
            "tune2fs",
            "e2fsck",
            "fsck",
            "resize2fs",
        ],
        when: None,
        does: Does::Handler(files::disk_tool),
    },
    Entry {
        names: &[
            "vi", "vim", "nvim", "nano", "emacs", "pico", "ex", "micro", "joe", "mcedit", "gedit",
            "kate", "code", "subl", "vimdiff", "rvim", "jed", "kak", "hx", "helix",
        ],
        when: None,
        does: Does::Spec(Spec {
            valued: &[
                "-c", "--cmd", "-S", "-u", "-U", "-T", "-i", "-t", "-w", "-W", "-s",
            ],
            operands: Operands::Each(&[Action::Read, Action::Write]),
            skip: Some('+'),
            ..Spec::NONE
        }),
    },
    // ed's `-s` is "silent", not vim's `-s SCRIPT`: `printf ',p\nq\n' | ed -s FILE`
    // reads FILE (and its script's `w` writes it).
    Entry {
        names: &["ed", "red"],
        when: None,
        does: Does::Spec(Spec {
            valued: &["-p", "--prompt"],
            operands: Operands::Each(&[Action::Read, Action::Write]),
            ..Spec::NONE
        }),
    },
    Entry {
        names: &["sqlite3", "sqlite"],
        when: None,
        does: Does::Handler(files::sqlite),
    },
    Entry {
        names: &["crontab"],
        when: None,
        does: Does::Handler(files::crontab),
    },
    Entry {
        names: &["systemctl"],
        when: None,
        does: Does::Handler(files::systemctl),
    },
    Entry {
        names: &["tar", "bsdtar"],
        when: None,
        does: Does::Handler(files::tar),
    },
    Entry {
        names: &["zip", "7z", "7za", "rar"],
        when: None,
        does: Does::Handler(files::archiver),
    },
    Entry {
        names: &[
            "unzip", "gunzip", "gzip", "bzip2", "bunzip2", "xz", "unxz", "zstd", "unzstd", "lz4",
            "unrar", "cpio",
        ],
        when: None,
        does: Does::Handler(files::compressor),
    },
    Entry {
        names: &["git"],
        when: None,
        does: Does::Handler(files::git),
    },
    Entry {
        names: &["openssl"],
        when: None,
        does: Does::Handler(files::openssl),
    },
    Entry {
        names: &["gpg", "gpg2"],
        when: None,
        does: Does::Handler(files::gpg),
    },
    Entry {
        names: &["ssh-keygen"],
        when: None,
        does: Does::Handler(files::ssh_keygen),
    },
    Entry {
        names: &["ssh-add"],
        when: None,
        does: Does::Spec(Spec {
            valued: &["-t", "-E", "-S", "-H", "-h"],
            operands: Operands::Each(&[Action::Read]),
            bare: Some((Action::Read, "~/.ssh")),
            ..Spec::NONE
        }),
    },
    Entry {
        names: &[
            "curl",
            "wget",
            "nc",
            "ncat",
            "netcat",
            "socat",
            "ssh",
            "sftp",
            "telnet",
            "ftp",
            "lftp",
            "ping",
            "ping6",
            "dig",
            "nslookup",
            "host",
            "whois",
            "traceroute",
            "tracepath",
            "mtr",
            "http",
            "https",
            "xh",
            "aria2c",
            "ssh-copy-id",
            "mosh",
            "nmap",
            "tftp",
            "openvpn",
            "sshpass",
            "autossh",
            "websocat",
            "grpcurl",
            "wget2",
            "lwp-request",
            "lwp-download",
            "GET",
            "HEAD",
            "POST",
            "curlie",
            "fetch",
            "lynx",
            "links",
            "links2",
            "elinks",
            "w3m",
        ],
        when: None,
        does: Does::Handler(files::network),
    },
    Entry {
        names: &["which"],
        when: None,
        does: Does::Spec(Spec {
            prints: Prints::ProgramPaths,
            ..Spec::NONE
        }),
    },
    Entry {
        names: &["type"],
        when: Some(lookups::when_program_type),
        does: Does::Spec(Spec {
            prints: Prints::ProgramPaths,
            ..Spec::NONE
        }),
    },
    Entry {
        names: &["hash"],
        when: None,
        does: Does::Handler(lookups::hash),
    },
    Entry {
        names: &["pgrep", "pidof"],
        when: Some(lookups::when_pid_lookup),
        does: Does::Handler(lookups::pid_lookup),
    },
    Entry {
        names: &["test", "[", "pgrep", "pidof", "pkill", "killall", "kill"],
        when: None,
        does: Does::Spec(Spec { ..Spec::NONE }),
    },
    // Project runners: `uv run CMD…`, `poetry run CMD…`, `bundle exec CMD…` run the rest
    // of the line as a command in the project's environment.
    Entry {
        names: wrap::PROJECT_RUNNERS,
        when: Some(wrap::when_project_run),
        does: Does::Handler(wrap::project_run),
    },
    Entry {
        names: &["pip", "uv", "npm", "easy_install"],
        when: None,
        does: Does::Handler(lookups::installer),
    },
];

/// Keyed by command name with the fast fixed-seed hash the rule indexes use (names come
/// from the table, not from calls; a name not in it only costs a miss).
type Index = HashMap<&'static str, Vec<&'static Entry>, foldhash::fast::FixedState>;

/// The entries of each name, in table order; built on first use.
fn index() -> &'static Index {
    static INDEX: OnceLock<Index> = OnceLock::new();
    INDEX.get_or_init(|| {
        let mut index = Index::default();
        for entry in TABLE {
            for name in entry.names {
                index.entry(name).or_default().push(entry);
            }
        }
        index
    })
}

impl Walker<'_> {
    /// What the command table says `name` does with these arguments.
    pub(super) fn dispatch(
        &mut self,
        name: &str,
        args: &[String],
        ctx: &mut Context,
        depth: usize,
        stdin: Feed,
    ) -> Feed {
        // Commands an option names (`tar --to-command`, `rsync -e`, `vim -c ':!…'`).
        self.option_commands(name, args, ctx, depth);
        let call = Call {
            name,
            args,
            depth,
            stdin,
        };
        let entry = index()
            .get(name)
            .and_then(|entries| entries.iter().find(|e| e.when.is_none_or(|g| g(&call))));
        match entry.map(|e| &e.does) {
            Some(Does::Spec(spec)) => apply(self, spec, ctx, call),
            Some(Does::Reader(valued)) => self.reader(name, valued, args, ctx, call.stdin),
            Some(Does::Handler(run)) => run(self, ctx, call),
            None => lookups::other(self, ctx, call),
        }
    }
}

/// The one interpreter of [`Spec`]s: paths named by options, then by operands, code the
/// command runs, and then the command it wraps or what it prints.
fn apply(w: &mut Walker<'_>, spec: &Spec, ctx: &mut Context, call: Call<'_>) -> Feed {
    let Call {
        args, depth, stdin, ..
    } = call;
    let o = args::parse(args, spec.valued, spec.runs.is_some());
    for (options, action) in spec.option_paths {
        for f in o.values(options) {
            w.path_op(*action, f, ctx, None);
        }
    }
    // A wrapper's operands before the command are in `rest`, not `operands`.
    let (operands, command): (Vec<&str>, &[String]) = match spec.runs {
        Some(n) => (
            o.rest.iter().take(n).map(String::as_str).collect(),
            o.rest.get(n..).unwrap_or(&[]),
        ),
        None => (o.operands.clone(), &[]),
    };
    let paths = operands
        .iter()
        .filter(|f| spec.skip.is_none_or(|c| !f.starts_with(c)));
    match spec.operands {
        Operands::None => {}
        Operands::Each(actions) => {
            for f in paths {
                for action in actions {
                    w.path_op(*action, f, ctx, None);
                }
            }
        }
        Operands::First(actions) => {
            for (f, action) in paths.zip(actions) {
                w.path_op(*action, f, ctx, None);
            }
        }
    }
    for c in o.values(spec.code) {
        w.script(c, &mut ctx.clone(), depth + 1);
    }
    if let Some((action, path)) = spec.bare.filter(|_| args.is_empty()) {
        w.path_op(action, path, ctx, None);
    }
    if spec.runs.is_some() {
        // A code option where the command would be (`flock FILE -c CODE`) is that option.
        if let Some(first) = command.first() {
            let code = args::parse(command, spec.code, false);
            if spec
                .code
                .iter()
                .any(|c| first == c || first.starts_with(&format!("{c}=")))
            {
                for c in code.values(spec.code) {
                    w.script(c, &mut ctx.clone(), depth + 1);
                }
                return Feed::default();
            }
        }
        return w.wrapped(command, ctx, depth, stdin);
    }
    match spec.prints {
        Prints::Nothing => Feed::default(),
        Prints::Environment => environment_feed(),
        Prints::ProgramPaths => program_paths(args),
    }
}

#[cfg(test)]
mod tests {
    use super::super::super::operation::{Context, Extracted};
    use super::*;

    /// Ops of one command line, walked from `/home/u/p` with home `/home/u`.
    fn ops(cmd: &str) -> Vec<(Action, String)> {
        let ctx = Context {
            cwd: "/home/u/p".into(),
            home: "/home/u".into(),
            env: Vec::new(),
            host: None,
        };
        let mut out = Extracted::new("Bash");
        super::super::extract(cmd, &ctx, &mut out);
        out.ops
            .iter()
            .filter_map(|o| Some((o.action?, o.path.clone()?)))
            .collect()
    }

    #[test]
    fn no_entry_is_shadowed_by_an_earlier_unguarded_one() {
        for (name, entries) in index() {
            if let Some(first) = entries.iter().position(|e| e.when.is_none()) {
                assert_eq!(
                    first + 1,
                    entries.len(),
                    "`{name}` has an entry after an unguarded one: it is never used"
                );
            }
        }
    }

    #[test]
    fn specs_do_what_their_data_says() {
        // Options naming paths, then operands by position.
        let patch = ops("patch -i fix.diff -o out.c orig.c other.diff");
        assert_eq!(
            patch,
            [
                (Action::Read, "/home/u/p/fix.diff".to_owned()),
                (Action::Write, "/home/u/p/out.c".to_owned()),
                (Action::Write, "/home/u/p/orig.c".to_owned()),
                (Action::Read, "/home/u/p/other.diff".to_owned()),
            ]
        );
        // Every operand, each action in turn; `+N` is not a file.
        let vim = ops("vim +10 a.txt");
        assert_eq!(
            vim,
            [
                (Action::Read, "/home/u/p/a.txt".to_owned()),
                (Action::Write, "/home/u/p/a.txt".to_owned()),
            ]
        );
        // A wrapper: its own operand, then the command it runs.
        let chroot = ops("chroot /srv cat /etc/d");
        assert!(
            chroot.contains(&(Action::Execute, "/srv".to_owned())),
            "{chroot:?}"
        );
        assert!(
            chroot.contains(&(Action::Read, "/etc/d".to_owned())),
            "{chroot:?}"
        );
        // With no argument at all: the default path.
        assert_eq!(ops("ssh-add"), [(Action::Read, "/home/u/.ssh".to_owned())]);
        assert!(ops("ssh-add -l").is_empty());
        // mknod writes its first operand only (the rest are a type and numbers).
        assert_eq!(
            ops("mknod pipe p"),
            [(Action::Write, "/home/u/p/pipe".to_owned())]
        );
    }
}
