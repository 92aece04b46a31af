//! Structured command rules (`run:`) decide by what a command means to its tool: the order
//! of its options, `--x=v` or `--x v`, a short alias or the long name, shorts bundled, a
//! unique prefix, the case of what the tool reads without case, and the wrappers around it
//! never change the decision of the built-in packs.
use std::sync::OnceLock;

use proptest::prelude::*;
use serde_json::json;

use super::{check, Activation, Context, ToolCall};
use crate::rules::{Homes, Mode, Options, RuleSet};

fn rules() -> &'static RuleSet {
    static RULES: OnceLock<RuleSet> = OnceLock::new();
    RULES.get_or_init(|| {
        let opts = Options {
            homes: Homes::fixed(["/home/alice"]),
            resolver: |_| None,
            host: crate::host::real::host(),
        };
        RuleSet::parse_with("t", "version: 1\n", &opts).expect("the built-in packs compile")
    })
}

/// The decision on a Bash call, and whether `rule` is among its matches.
fn decide(command: &str, rule: &str) -> (Mode, bool) {
    let ctx = Context {
        cwd: "/home/alice/project".into(),
        home: "/home/alice".into(),
        env: Vec::new(),
        host: None,
    };
    let call = ToolCall::from_json(&json!({"tool": "Bash", "input": {"command": command}}))
        .expect("a call");
    let d = check(rules(), &call, &ctx, &Activation::default());
    let hit = d.matches.iter().any(|m| m.id == rule);
    (d.decision, hit)
}

/// One command in the ways its tool reads as the same: each option in any of its
/// spellings, all of them bundled into one word, each operand in any of its forms.
struct Case {
    /// Program and subcommand, as written first.
    head: &'static str,
    /// Per option: its spellings (an option with its value may be two words).
    options: &'static [&'static [&'static str]],
    /// The options all at once, bundled (empty: no bundled spelling).
    bundled: &'static [&'static str],
    /// Per operand: its forms.
    operands: &'static [&'static [&'static str]],
    /// The tool reads options after operands too (GNU getopt, git, kubectl, gh).
    interleave: bool,
    /// The decision and the rule that makes it (`Allow`: the rule stays out).
    want: Mode,
    rule: &'static str,
}

const CASES: &[Case] = &[
    Case {
        head: "git push",
        options: &[
            // (`--forc` is ambiguous to git: not a force.)
            &[
                "--force",
                "-f",
                "--force-with-lease",
                "--force-with",
                "--force-if",
            ],
            &["--set-upstream", "-u", "--set-up"],
            &["--verbose", "-v"],
        ],
        bundled: &["-fuv", "-vfu", "-uvf"],
        operands: &[
            &["origin"],
            &["main", "refs/heads/main", "HEAD:main", "+main"],
        ],
        interleave: true,
        want: Mode::Approve,
        rule: "git-force-push-shared",
    },
    Case {
        head: "git push",
        options: &[&["--set-upstream", "-u"], &["--verbose", "-v"]],
        bundled: &["-uv", "-vu"],
        operands: &[&["origin"], &["feature/x", "refs/heads/feature/x"]],
        interleave: true,
        want: Mode::Allow,
        rule: "git-force-push-shared",
    },
    Case {
        head: "git branch",
        options: &[&[
            "-D",
            "--delete --force",
            "-d -f",
            "--delete -f",
            "--force -d",
        ]],
        bundled: &["-df", "-fd"],
        operands: &[&["feature/old"]],
        interleave: true,
        want: Mode::Approve,
        rule: "git-delete-history",
    },
    Case {
        head: "git clean",
        options: &[&["-f", "--force", "--for"], &["-d"], &["-x"]],
        bundled: &["-fdx", "-xdf", "-dfx"],
        operands: &[],
        interleave: true,
        want: Mode::Approve,
        rule: "git-discard-work",
    },
    Case {
        head: "git reset",
        options: &[&["--hard", "--har"], &["-q", "--quiet"]],
        bundled: &[],
        operands: &[&["HEAD~1", "HEAD^", "abc1234"]],
        interleave: true,
        want: Mode::Approve,
        rule: "git-discard-work",
    },
    Case {
        head: "kubectl get",
        options: &[
            &[
                "-o yaml",
                "--output yaml",
                "--output=yaml",
                "-oyaml",
                "-o=yaml",
                "-o json",
                "-ojsonpath={.data}",
            ],
            &["-n prod", "--namespace prod", "--namespace=prod", "-nprod"],
        ],
        bundled: &[],
        operands: &[&[
            "secret",
            "secrets",
            "SECRET",
            "Secrets",
            "secret/db",
            "configmaps,secrets",
        ]],
        interleave: true,
        want: Mode::Block,
        rule: "kube-secret-values",
    },
    Case {
        head: "kubectl get",
        options: &[
            &["-o wide", "--output wide", "--output=wide", "-owide"],
            &["-n prod", "--namespace prod", "--namespace=prod"],
        ],
        bundled: &[],
        operands: &[&["secrets", "SECRETS", "secret"]],
        interleave: true,
        want: Mode::Allow,
        rule: "kube-secret-values",
    },
    Case {
        head: "kubectl config view",
        options: &[
            &["--raw", "--raw=true", "--raw=1", "--flatten"],
            &["--minify"],
        ],
        bundled: &[],
        operands: &[],
        interleave: true,
        want: Mode::Block,
        rule: "kube-raw-config",
    },
    Case {
        head: "gh auth status",
        options: &[
            &["--show-token", "-t", "--show-token=true"],
            &[
                "--hostname github.com",
                "-h github.com",
                "--hostname=github.com",
                "-hgithub.com",
            ],
        ],
        bundled: &["-th github.com"],
        operands: &[],
        interleave: true,
        want: Mode::Block,
        rule: "cli-auth-tokens",
    },
    Case {
        head: "chmod",
        options: &[&["-R", "--recursive", "--recur"], &["-v", "--verbose"]],
        bundled: &["-Rv", "-vR"],
        operands: &[&["777", "u+rwx", "a=rwx"], &["/", "/etc", "/usr/", "~"]],
        interleave: true,
        want: Mode::Block,
        rule: "recursive-chmod-chown-root",
    },
    Case {
        head: "docker run",
        options: &[
            &[
                "-v /:/host",
                "--volume /:/host",
                "--volume=/:/host",
                "-v=/:/host",
                "-v/:/host",
            ],
            &["--rm"],
            &["-e A=1", "--env A=1", "--env=A=1"],
        ],
        bundled: &[],
        operands: &[&["alpine"]],
        interleave: false,
        want: Mode::Block,
        rule: "privileged-container",
    },
    Case {
        head: "podman run",
        options: &[
            &[
                "--cap-add=SYS_ADMIN",
                "--cap-add sys_admin",
                "--cap-add=CAP_SYS_ADMIN",
                "--cap-add=NET_RAW,SYS_ADMIN",
            ],
            &["-it", "-i -t", "--interactive --tty"],
        ],
        bundled: &[],
        operands: &[&["alpine"]],
        interleave: false,
        want: Mode::Block,
        rule: "privileged-container",
    },
    Case {
        head: "gpg",
        options: &[
            &[
                "--export-secret-keys",
                "--export-secret-k",
                "--export-secret-key",
            ],
            &["-a", "--armor"],
        ],
        bundled: &[],
        operands: &[&["ABCD1234"]],
        interleave: true,
        want: Mode::Block,
        rule: "gpg-secret-export",
    },
    Case {
        head: "systemctl",
        options: &[&["--no-block"], &["-q", "--quiet"]],
        bundled: &[],
        operands: &[
            &["stop", "restart", "disable"],
            &["carapaced", "carapaced.service", "carapace"],
        ],
        interleave: true,
        want: Mode::Block,
        rule: "stop-carapace",
    },
    Case {
        head: "terraform output",
        options: &[
            &["-json", "-json=true", "--json", "-json=t"],
            &["-no-color"],
        ],
        bundled: &[],
        operands: &[],
        interleave: true,
        want: Mode::Approve,
        rule: "deploy-secret-outputs",
    },
];

/// Ways a command is run that leave it the same command.
const WRAPPERS: &[&str] = &[
    "",
    "sudo ",
    "sudo -u root ",
    "env ",
    "env FOO=1 ",
    "timeout 5 ",
    "nice -n 5 ",
    "command ",
    "exec ",
    "nohup ",
    "sh -c -- ",
];

/// The command line of `case` with the choices made by `pick` (one number per choice).
fn spell(case: &Case, pick: &[usize], wrapper: &str, absolute: bool) -> String {
    let mut choice = pick.iter().copied();
    let mut next = |n: usize| choice.next().unwrap_or(0) % n.max(1);
    let bundle = next(3) == 0 && !case.bundled.is_empty();
    let mut options: Vec<String> = if bundle {
        vec![case.bundled[next(case.bundled.len())].to_owned()]
    } else {
        case.options
            .iter()
            .map(|alts| alts[next(alts.len())].to_owned())
            .collect()
    };
    // Options in any order: rotate and swap by the picks.
    let n = options.len().max(1);
    options.rotate_left(next(n));
    if options.len() > 1 {
        let (a, b) = (next(n), next(n));
        options.swap(a, b);
    }
    let operands: Vec<String> = case
        .operands
        .iter()
        .map(|alts| alts[next(alts.len())].to_owned())
        .collect();
    let mut words: Vec<String> = Vec::new();
    if case.interleave {
        // Operands in order, options spread among and after them.
        let mut options = options.into_iter();
        for o in &operands {
            if next(2) == 0 {
                words.extend(options.next());
            }
            words.push(o.clone());
        }
        words.extend(options);
    } else {
        words.extend(options);
        words.extend(operands);
    }
    let head = if absolute {
        format!("/usr/bin/{}", case.head)
    } else {
        case.head.to_owned()
    };
    let line = format!("{head} {}", words.join(" "));
    if wrapper == "sh -c -- " {
        format!("sh -c '{line}'")
    } else {
        format!("{wrapper}{line}")
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn equivalent_spellings_of_a_command_decide_alike(
        case in 0..CASES.len(),
        pick in prop::collection::vec(any::<usize>(), 24),
        wrapper in prop::sample::select(WRAPPERS),
        absolute in any::<bool>(),
    ) {
        let case = &CASES[case];
        let command = spell(case, &pick, wrapper, absolute);
        let (decision, hit) = decide(&command, case.rule);
        if case.want == Mode::Allow {
            prop_assert!(!hit, "{} matched {}", command, case.rule);
        } else {
            prop_assert!(hit, "{} did not match {}", command, case.rule);
            prop_assert!(decision >= case.want, "{}: {:?}", command, decision);
        }
    }
}

/// Every spelling of every case in turn, without wrappers: a table that fails on the first
/// spelling the matcher misreads, whatever proptest happens to draw.
#[test]
fn every_listed_spelling_decides_alike() {
    for case in CASES {
        for (i, alts) in case.options.iter().enumerate() {
            for alt in *alts {
                let mut pick = vec![0; 24];
                pick[1 + i] = alts.iter().position(|a| a == alt).unwrap_or(0);
                // No bundle: the first choice is 1 (of 3).
                pick[0] = 1;
                let command = spell(case, &pick, "", false);
                let (_, hit) = decide(&command, case.rule);
                assert_eq!(hit, case.want != Mode::Allow, "{command} for {}", case.rule);
            }
        }
        for bundle in case.bundled {
            let operands: Vec<&str> = case.operands.iter().map(|o| o[0]).collect();
            let command = format!("{} {bundle} {}", case.head, operands.join(" "));
            let (_, hit) = decide(&command, case.rule);
            assert_eq!(hit, case.want != Mode::Allow, "{command} for {}", case.rule);
        }
    }
}

/// Every way git is given one config entry for one command: `-c`, the environment's
/// numbered pairs (any case of the key), `GIT_CONFIG_PARAMETERS` in both quotings,
/// `--config-env` in both forms, and a config file included or named by the environment
/// (written earlier in the line). The key decides, never the entry point.
fn git_config_spellings(key: &str, value: &str, verb: &str) -> Vec<String> {
    let upper = key.to_ascii_uppercase();
    let (section, name) = key.split_once('.').unwrap_or((key, ""));
    let file = format!("printf '[{section}]\\n\\t{name} = {value}\\n' > /tmp/c.cfg");
    vec![
        format!("git -c {key}={value} {verb}"),
        format!("GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0={key} GIT_CONFIG_VALUE_0={value} git {verb}"),
        format!("GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0={upper} GIT_CONFIG_VALUE_0={value} git {verb}"),
        format!("export GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0={key} GIT_CONFIG_VALUE_0={value}; git {verb}"),
        format!("GIT_CONFIG_PARAMETERS=\"'{key}'='{value}'\" git {verb}"),
        format!("GIT_CONFIG_PARAMETERS=\"'{key}={value}'\" git {verb}"),
        format!("V={value} git --config-env={key}=V {verb}"),
        format!("V={value} git --config-env {key}=V {verb}"),
        format!("{file}; git -c include.path=/tmp/c.cfg {verb}"),
        format!("{file}; GIT_CONFIG_GLOBAL=/tmp/c.cfg git {verb}"),
        format!("{file}; GIT_CONFIG_SYSTEM=/tmp/c.cfg git {verb}"),
    ]
}

#[test]
fn every_git_config_entry_point_decides_alike() {
    for (key, value, verb, rule, want) in [
        (
            "core.hooksPath",
            "/tmp/h",
            "commit -m x",
            "git-hooks-path",
            true,
        ),
        ("core.hookspath", ".hooks", "pull", "git-hooks-path", true),
        (
            "core.sshCommand",
            "/tmp/x/netrc-reader",
            "fetch",
            "git-hooks-path",
            false,
        ),
        ("user.name", "bot", "commit -m x", "git-hooks-path", false),
        (
            "alias.w",
            "reset",
            "w --hard HEAD~2",
            "git-discard-work",
            true,
        ),
    ] {
        for command in git_config_spellings(key, value, verb) {
            let (_, hit) = decide(&command, rule);
            assert_eq!(hit, want, "{command} for {rule}");
        }
    }
}

/// A wrapper's command is found under every spelling of its value-taking options: the
/// spec (`canon/specs.rs`) is the one list of them, read by the wrapper and by the rules.
#[test]
fn a_wrapped_command_is_found_under_every_option_spelling() {
    let spellings = crate::engine::shell::canon::valued_spellings("systemd-run");
    assert!(spellings.len() > 40, "{spellings:?}");
    for spelling in spellings {
        let line = format!("systemd-run --user {spelling} sh -c 'cat ~/.ssh/id_rsa'");
        let (mode, hit) = decide(&line, "ssh-private-keys");
        // Were `V` or a value-less option misread, `V` or `sh` would be the value or the
        // command, and the read of the key would go unseen.
        assert!(mode == Mode::Block && hit, "{line}: {mode:?}");
    }
}

/// git config given through the environment inline code sets for the git it starts is the
/// same config, in every language's spelling of that environment: set (`os.environ[…] =`,
/// `process.env.X =`, `ENV[…] =`, `$ENV{…} =`, `putenv`) or handed to the call (`env=…`,
/// `{env: …}`, Ruby's leading hash).
#[test]
fn every_spelling_of_a_code_environment_decides_alike() {
    const SPELLINGS: &[&str] = &[
        "python3 -c \"import os,subprocess;subprocess.run(['git','commit','-m','x'],env=dict(os.environ,GIT_CONFIG_COUNT='1',GIT_CONFIG_KEY_0='@K@',GIT_CONFIG_VALUE_0='/tmp/h'))\"",
        "python3 -c \"import os;os.environ['GIT_CONFIG_COUNT']='1';os.environ['GIT_CONFIG_KEY_0']='@K@';os.environ['GIT_CONFIG_VALUE_0']='/tmp/h';os.system('git commit -m x')\"",
        "node -e \"process.env.GIT_CONFIG_COUNT='1';process.env.GIT_CONFIG_KEY_0='@K@';process.env.GIT_CONFIG_VALUE_0='/tmp/h';require('child_process').execSync('git commit -m x')\"",
        "node -e \"require('child_process').execSync('git commit -m x',{env:{GIT_CONFIG_COUNT:'1',GIT_CONFIG_KEY_0:'@K@',GIT_CONFIG_VALUE_0:'/tmp/h'}})\"",
        "ruby -e \"ENV['GIT_CONFIG_COUNT']='1'; ENV['GIT_CONFIG_KEY_0']='@K@'; ENV['GIT_CONFIG_VALUE_0']='/tmp/h'; system('git commit -m x')\"",
        "ruby -e \"system({'GIT_CONFIG_COUNT'=>'1','GIT_CONFIG_KEY_0'=>'@K@','GIT_CONFIG_VALUE_0'=>'/tmp/h'}, 'git commit -m x')\"",
        "perl -e '$ENV{GIT_CONFIG_COUNT}=\"1\";$ENV{GIT_CONFIG_KEY_0}=\"@K@\";$ENV{GIT_CONFIG_VALUE_0}=\"/tmp/h\";system(\"git commit -m x\")'",
        "php -r 'putenv(\"GIT_CONFIG_COUNT=1\");putenv(\"GIT_CONFIG_KEY_0=@K@\");putenv(\"GIT_CONFIG_VALUE_0=/tmp/h\");system(\"git commit -m x\");'",
    ];
    for spelling in SPELLINGS {
        let hooks = spelling.replace("@K@", "core.hooksPath");
        let (mode, hit) = decide(&hooks, "git-hooks-path");
        assert!(mode == Mode::Block && hit, "{hooks}: {mode:?}");
        // The same environment with a key that runs nothing stays allowed.
        let name = spelling.replace("@K@", "user.name");
        let (mode, _) = decide(&name, "git-hooks-path");
        assert!(matches!(mode, Mode::Allow | Mode::Log), "{name}: {mode:?}");
    }
}
