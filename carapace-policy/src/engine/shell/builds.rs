//! Builds of a tree downloaded earlier in the same command (`git clone URL && cd r &&
//! make`): a build runs the tree's own code — a Makefile's recipes, `build.rs`, npm's
//! lifecycle scripts, `setup.py`, cmake's `execute_process`, gradle and maven plugins — as
//! surely as `sh r/install.sh` does, so it is running downloaded code too. The same build
//! in a project that was not downloaded in this command is everyday work and stays allowed.

/// The directory whose code `base args…` builds and runs, when it is a build (`-C DIR`,
/// `--prefix DIR`, a path operand, or the working directory: `.`); `None` for any other
/// command.
pub(super) fn build_dir<'a>(base: &str, args: &'a [String]) -> Option<&'a str> {
    let value = |names: &[&str]| value_of(args, names);
    match base {
        "make" | "gmake" | "bmake" | "ninja" | "samu" => Some(
            value(&["-C", "--directory"])
                .or_else(|| {
                    value(&["-f", "--file", "--makefile"])
                        .map(|f| f.rsplit_once('/').map_or(".", |(d, _)| d))
                })
                .unwrap_or("."),
        ),
        "cmake" => Some(
            value(&["--build", "-S", "-B"])
                .or_else(|| {
                    args.iter()
                        .find(|a| !a.starts_with('-'))
                        .map(String::as_str)
                })
                .unwrap_or("."),
        ),
        "meson" | "muon" => Some(args.get(1).map_or(".", String::as_str)),
        "npm" | "pnpm" | "yarn" | "bun" => node_build(args),
        "pip" | "pip3" | "uv" | "pipx" => {
            // `pip install .`, `pip install -e ./r`, `uv pip install r/`: a local tree's
            // build backend runs.
            let tree = args.iter().find(|a| {
                *a == "." || a.starts_with("./") || a.starts_with('/') || a.ends_with('/')
            });
            args.iter()
                .any(|a| a == "install")
                .then_some(())
                .and(tree.map(String::as_str))
        }
        "cargo" => matches!(
            first_operand(args),
            Some(
                "build"
                    | "b"
                    | "run"
                    | "r"
                    | "test"
                    | "t"
                    | "check"
                    | "c"
                    | "bench"
                    | "install"
                    | "doc"
                    | "clippy"
            )
        )
        .then(|| {
            value(&["--manifest-path"])
                .map(|m| m.rsplit_once('/').map_or(".", |(d, _)| d))
                .or_else(|| value(&["--path", "-C"]))
                .unwrap_or(".")
        }),
        "go" => matches!(first_operand(args), Some("generate" | "run" | "test")).then_some("."),
        "mvn" | "mvnw" | "gradle" | "gradlew" | "ant" | "sbt" | "bazel" | "bazelisk" | "scons"
        | "rake" | "just" | "task" | "tox" | "nox" | "pytest" | "py.test" => Some(
            value(&[
                "-f",
                "--file",
                "-p",
                "--project-dir",
                "--directory",
                "--justfile",
            ])
            .map_or(
                ".",
                // A build file names its directory.
                |f| match f.rsplit_once('/') {
                    Some((d, name))
                        if name.contains('.') || name.eq_ignore_ascii_case("justfile") =>
                    {
                        d
                    }
                    _ => f,
                },
            ),
        ),
        _ => None,
    }
}

/// npm, pnpm, yarn and bun: the verbs that run the package's own scripts (install runs its
/// lifecycle scripts), in the directory `--prefix`/`--cwd` names.
fn node_build(args: &[String]) -> Option<&str> {
    let first = first_operand(args);
    let runs = matches!(
        first,
        None | Some(
            "install"
                | "i"
                | "ci"
                | "add"
                | "run"
                | "run-script"
                | "test"
                | "t"
                | "start"
                | "build"
                | "rebuild"
                | "pack"
                | "publish"
                | "exec"
                | "x"
                | "dev"
        )
    );
    // `npm install PKG` runs PKG's scripts in node_modules, not the tree's.
    let after_verb = first
        .and_then(|f| args.iter().position(|a| a == f))
        .map_or(&args[..0], |at| &args[at + 1..]);
    let names_package = matches!(first, Some("install" | "i" | "add"))
        && after_verb
            .iter()
            .any(|a| !a.starts_with('-') && !a.starts_with('.'));
    (runs && !names_package)
        .then(|| value_of(args, &["--prefix", "-C", "--cwd", "--dir"]).unwrap_or("."))
}

/// The files whose code a build by `base` runs, in its directory.
pub(super) fn build_files(base: &str) -> &'static [&'static str] {
    match base {
        "make" | "gmake" | "bmake" => &["Makefile", "makefile", "GNUmakefile"],
        "ninja" | "samu" => &["build.ninja"],
        "cmake" => &["CMakeLists.txt"],
        "meson" | "muon" => &["meson.build"],
        "npm" | "pnpm" | "yarn" | "bun" => &["package.json", ".npmrc", ".yarnrc.yml"],
        "pip" | "pip3" | "uv" | "pipx" => &["setup.py", "pyproject.toml", "setup.cfg"],
        "cargo" => &["build.rs", "Cargo.toml", ".cargo/config.toml"],
        "go" => &["go.mod"],
        "mvn" | "mvnw" => &["pom.xml"],
        "gradle" | "gradlew" => &["build.gradle", "build.gradle.kts", "settings.gradle"],
        "rake" => &["Rakefile", "rakefile", "Rakefile.rb"],
        "pytest" | "py.test" => &["conftest.py", "tests/conftest.py"],
        "just" => &["justfile", "Justfile"],
        "tox" => &["tox.ini"],
        "nox" => &["noxfile.py"],
        _ => &[],
    }
}

/// The build file a runner is told to read (`make -f m.mk`, `just --justfile F`), which
/// [`build_files`] does not name.
pub(super) fn named_build_file<'a>(base: &str, args: &'a [String]) -> Option<&'a str> {
    match base {
        "make" | "gmake" | "bmake" => value_of(args, &["-f", "--file", "--makefile"]),
        "just" => value_of(args, &["-f", "--justfile"]),
        "rake" => value_of(args, &["-f", "--rakefile"]),
        _ => None,
    }
}

/// How a runner reads a build file.
pub(super) enum Kind {
    /// Rules whose indented lines are shell commands (make, just).
    Recipes,
    /// JSON whose `scripts` are shell commands (package.json).
    Scripts,
    /// Code of the runner's language (build.rs, setup.py, conftest.py, Rakefile).
    Code,
    /// Settings only.
    Data,
}

/// What kind of build file `path` is, by its name.
pub(super) fn file_kind(path: &str) -> Kind {
    let name = path.rsplit('/').next().unwrap_or(path).to_ascii_lowercase();
    let ext = name.rsplit_once('.').map_or("", |(_, e)| e);
    if name == "package.json" {
        Kind::Scripts
    } else if name.contains("makefile") || name == "justfile" || ext == "mk" {
        Kind::Recipes
    } else if matches!(ext, "rs" | "py") || name.starts_with("rakefile") {
        Kind::Code
    } else if matches!(ext, "json" | "toml" | "cfg" | "ini" | "yml") || name.starts_with('.') {
        Kind::Data
    } else {
        // A makefile by another name (`make -f rules`).
        Kind::Recipes
    }
}

/// The shell commands of a makefile or justfile: its indented lines, without make's
/// line prefixes (`@`, `-`, `+`) and with `$$` as the shell's `$`.
pub(super) fn recipe_lines(text: &str) -> Vec<String> {
    text.lines()
        .filter(|l| l.starts_with(['\t', ' ']))
        .map(|l| {
            l.trim_start()
                .trim_start_matches(['@', '-', '+'])
                .replace("$$", "$")
        })
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .take(64)
        .collect()
}

/// The commands of a package.json's `scripts`.
pub(super) fn package_scripts(text: &str) -> Vec<String> {
    let Ok(json) = serde_json::from_str::<serde_json::Value>(text) else {
        return Vec::new();
    };
    json.get("scripts")
        .and_then(serde_json::Value::as_object)
        .map(|scripts| {
            scripts
                .values()
                .filter_map(serde_json::Value::as_str)
                .take(64)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

/// The first word that is neither an option nor the value of one that names a place
/// (`npm --prefix r install`).
fn first_operand(args: &[String]) -> Option<&str> {
    args.iter()
        .enumerate()
        .find(|(i, a)| {
            !a.starts_with('-')
                && !i
                    .checked_sub(1)
                    .and_then(|p| args.get(p))
                    .is_some_and(|p| PLACE_OPTIONS.contains(&p.as_str()))
        })
        .map(|(_, a)| a.as_str())
}

/// Options that take a directory or file as their value.
const PLACE_OPTIONS: &[&str] = &[
    "-C",
    "--prefix",
    "--cwd",
    "--dir",
    "--directory",
    "--manifest-path",
    "--path",
    "-f",
    "--file",
    "-p",
    "--project-dir",
];

/// The value of the first of `names` (`-C DIR`, `-CDIR` for one letter, `--name=DIR`).
fn value_of<'a>(args: &'a [String], names: &[&str]) -> Option<&'a str> {
    let mut words = args.iter();
    while let Some(a) = words.next() {
        for n in names {
            if a == n {
                return words.next().map(String::as_str);
            }
            if let Some(v) = a.strip_prefix(n) {
                if let Some(v) = v.strip_prefix('=') {
                    return Some(v);
                }
                if n.len() == 2 && !v.is_empty() && !n.starts_with("--") {
                    return Some(v);
                }
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::build_dir;

    fn dir(cmd: &str) -> Option<String> {
        let words: Vec<String> = cmd.split(' ').map(str::to_owned).collect();
        let (base, args) = words.split_first()?;
        build_dir(base, args).map(str::to_owned)
    }

    #[test]
    fn builds_name_the_tree_they_run() {
        assert_eq!(dir("make").as_deref(), Some("."));
        assert_eq!(dir("make -C r all").as_deref(), Some("r"));
        assert_eq!(dir("make -Cr").as_deref(), Some("r"));
        assert_eq!(dir("cmake -S r -B build").as_deref(), Some("r"));
        assert_eq!(dir("npm --prefix r install").as_deref(), Some("r"));
        assert_eq!(dir("npm install lodash"), None);
        assert_eq!(dir("npm view lodash"), None);
        assert_eq!(dir("pip install ./r").as_deref(), Some("./r"));
        assert_eq!(dir("pip install requests"), None);
        assert_eq!(
            dir("cargo build --manifest-path r/Cargo.toml").as_deref(),
            Some("r")
        );
        assert_eq!(dir("cargo search x"), None);
        assert_eq!(dir("mvn -f r/pom.xml package").as_deref(), Some("r"));
        assert_eq!(dir("ls"), None);
    }
}

#[cfg(test)]
mod build_file_tests {
    use super::*;

    #[test]
    fn recipes_and_scripts_are_the_commands() {
        let make = "CC = cc\nall: x\n\t@cat ~/.netrc\n\t-rm -f $$HOME/x\n# note\nx:\n\techo hi\n";
        assert_eq!(
            recipe_lines(make),
            ["cat ~/.netrc", "rm -f $HOME/x", "echo hi"]
        );
        let just = "test:\n    cargo test\n";
        assert_eq!(recipe_lines(just), ["cargo test"]);
        let pkg = r#"{"name":"x","scripts":{"test":"jest","b":"rm -rf dist"}}"#;
        let mut scripts = package_scripts(pkg);
        scripts.sort();
        assert_eq!(scripts, ["jest", "rm -rf dist"]);
        assert!(package_scripts("not json").is_empty());
        assert!(matches!(file_kind("./Makefile"), Kind::Recipes));
        assert!(matches!(file_kind("m.mk"), Kind::Recipes));
        assert!(matches!(file_kind("./package.json"), Kind::Scripts));
        assert!(matches!(file_kind("./build.rs"), Kind::Code));
        assert!(matches!(file_kind("./conftest.py"), Kind::Code));
        assert!(matches!(file_kind("./Cargo.toml"), Kind::Data));
    }
}
