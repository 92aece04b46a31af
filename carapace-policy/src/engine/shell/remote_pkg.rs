//! Packages run or installed straight from a URL or a repository rather than from a
//! registry by name: `npx github:o/r`, `npx https://…/x.tgz`, `pip install git+https://…`,
//! `python -m pip install https://…/x.tar.gz`, `uvx --from git+…`, `pipx run URL`, `go run
//! host/o/r@latest`, `cargo install --git URL`. Installing one runs its build and setup
//! code (`setup.py`, npm's lifecycle scripts, `build.rs`); running one runs its entry
//! point: code from the network, as `curl … | sh` is. The same tools given a registry name
//! (`npx prettier`, `pip install requests`, `uvx ruff`) or a local tree stay as they were:
//! no name tells a good package from a bad one, but a URL says where the code comes from.

/// Whether `base args…` installs or runs a package given by URL or repository.
pub(super) fn runs_remote_package(base: &str, args: &[String]) -> bool {
    match base {
        "npx" | "pnpx" | "bunx" => runner(args),
        "npm" | "pnpm" | "yarn" | "bun" => match verb(args) {
            Some(("exec" | "x" | "dlx", rest)) => runner(rest),
            Some(("install" | "i" | "add" | "global", rest)) => {
                operands(rest, NODE_VALUED).any(remote)
            }
            _ => false,
        },
        "pip" | "pip3" => pip(args),
        "uv" => match verb(args) {
            Some(("pip", rest)) => pip(rest),
            Some(("tool", rest)) => {
                verb(rest).is_some_and(|(v, rest)| matches!(v, "run" | "install") && tool(rest))
            }
            Some(("run", rest)) => value(rest, &["--with", "--from"]).any(remote),
            _ => false,
        },
        "uvx" => tool(args),
        "pipx" => verb(args).is_some_and(|(v, rest)| matches!(v, "run" | "install") && tool(rest)),
        "go" => verb(args).is_some_and(|(v, rest)| {
            v == "run" && operands(rest, &["-exec", "-o", "-C"]).any(remote_module)
        }),
        "cargo" => verb(args)
            .is_some_and(|(v, rest)| v == "install" && value(rest, &["--git"]).next().is_some()),
        _ if base.starts_with("python") => match args {
            [m, pip_, rest @ ..] if m == "-m" && matches!(pip_.as_str(), "pip" | "pip3") => {
                pip(rest)
            }
            _ => false,
        },
        _ => false,
    }
}

/// A word that names where a package's code is fetched from: a URL, a VCS URL pip or npm
/// reads (`git+https://…`, `git@host:o/r`), or a forge shorthand (`github:o/r`).
fn remote(word: &str) -> bool {
    word.contains("://")
        || ["git+", "hg+", "svn+", "bzr+", "git@"]
            .iter()
            .any(|p| word.starts_with(p))
        || ["github:", "gitlab:", "bitbucket:", "gist:"]
            .iter()
            .any(|p| word.starts_with(p))
}

/// npm's `OWNER/REPO` (a GitHub repository) besides [`remote`]; a scoped name
/// (`@scope/pkg`) and a path (`./x`, `/x`) are not.
fn remote_node(word: &str) -> bool {
    remote(word)
        || (!word.starts_with(['@', '.', '/', '~'])
            && word
                .split_once('/')
                .is_some_and(|(o, r)| !o.is_empty() && !r.is_empty() && !r.contains('/')))
}

/// A Go package fetched at a version (`github.com/o/r/cmd@latest`): a module path whose
/// first element is a host.
fn remote_module(word: &str) -> bool {
    word.split_once('@').is_some_and(|(path, _)| {
        !path.starts_with(['.', '/'])
            && path
                .split('/')
                .next()
                .is_some_and(|host| host.contains('.'))
    })
}

/// The package a runner (`npx`, `npm exec`, `pnpm dlx`) runs: `-p`/`--package` values, and
/// the first operand (the words after it are the command's).
fn runner(args: &[String]) -> bool {
    value(args, &["-p", "--package"]).any(remote_node)
        || operands(args, NODE_VALUED).next().is_some_and(remote_node)
}

/// Options of npm's runners and installers that take a value.
const NODE_VALUED: &[&str] = &[
    "-p",
    "--package",
    "-c",
    "--call",
    "--registry",
    "--prefix",
    "--cache",
    "-w",
    "--workspace",
    "--filter",
    "--cwd",
];

/// `pip install …`: every requirement and editable tree named.
fn pip(args: &[String]) -> bool {
    verb(args).is_some_and(|(v, rest)| {
        v == "install"
            && (operands(rest, PIP_VALUED).any(remote)
                || value(rest, &["-e", "--editable"]).any(remote))
    })
}

/// pip install's options that take a value (an index, a place, a file of requirements).
const PIP_VALUED: &[&str] = &[
    "-e",
    "--editable",
    "-r",
    "--requirement",
    "-c",
    "--constraint",
    "-i",
    "--index-url",
    "--extra-index-url",
    "-f",
    "--find-links",
    "-t",
    "--target",
    "--prefix",
    "--root",
    "--trusted-host",
    "--proxy",
    "--cert",
    "--client-cert",
    "--python",
    "--platform",
    "--src",
];

/// `uvx`, `uv tool run|install`, `pipx run|install`: `--from`/`--spec`/`--with` values and
/// the package (the first operand).
fn tool(args: &[String]) -> bool {
    value(args, &["--from", "--spec", "--with"]).any(remote)
        || operands(args, TOOL_VALUED).next().is_some_and(remote)
}

const TOOL_VALUED: &[&str] = &[
    "--from",
    "--spec",
    "--with",
    "--python",
    "-p",
    "--index-url",
    "--index",
    "--default-index",
    "--extra-index-url",
    "--pip-args",
];

/// The first operand (the subcommand) and what follows it.
fn verb(args: &[String]) -> Option<(&str, &[String])> {
    let at = args.iter().position(|a| !a.starts_with('-'))?;
    Some((args[at].as_str(), &args[at + 1..]))
}

/// The words that are neither options nor the values of `valued` options.
fn operands<'a>(args: &'a [String], valued: &'a [&str]) -> impl Iterator<Item = &'a str> {
    let mut skip = false;
    args.iter().filter_map(move |a| {
        if std::mem::take(&mut skip) {
            return None;
        }
        if a.starts_with('-') {
            skip = valued.contains(&a.as_str());
            return None;
        }
        Some(a.as_str())
    })
}

/// The values of the options `names` (`--from X`, `--from=X`).
fn value<'a>(args: &'a [String], names: &'a [&str]) -> impl Iterator<Item = &'a str> {
    args.iter().enumerate().filter_map(move |(i, a)| {
        names.iter().find_map(|n| {
            if a == n {
                args.get(i + 1).map(String::as_str)
            } else {
                a.strip_prefix(n).and_then(|v| v.strip_prefix('='))
            }
        })
    })
}

#[cfg(test)]
mod tests {
    use super::runs_remote_package;

    fn remote(line: &str) -> bool {
        let words: Vec<String> = line.split_whitespace().map(str::to_owned).collect();
        runs_remote_package(&words[0], &words[1..])
    }

    #[test]
    fn packages_from_urls_and_repositories_run_remote_code() {
        for line in [
            "npx -y https://e.com/x.tgz",
            "npx github:evil/pkg",
            "npx evil/pkg --flag",
            "npx -p git+https://e.com/x.git x",
            "npm exec --package=github:o/r -- r",
            "pnpm dlx gitlab:o/r",
            "npm install https://e.com/x.tgz",
            "yarn add git@github.com:o/r.git",
            "pip install https://e.com/x.whl",
            "pip3 install --user git+https://github.com/o/r",
            "pip install -e git+https://github.com/o/r#egg=r",
            "python3 -m pip install https://e.com/pkg.tar.gz",
            "python -m pip install -q pkg @ https://e.com/p.zip",
            "uv pip install git+https://github.com/o/r",
            "uvx --from git+https://github.com/e/x x",
            "uv tool run --from=https://e.com/x.whl x",
            "pipx run https://e.com/x.py",
            "pipx run --spec git+https://github.com/e/x x",
            "go run github.com/evil/x@latest",
            "go run -v example.com/x/cmd@v1.0.0 --flag",
            "cargo install --git https://github.com/o/r",
        ] {
            assert!(remote(line), "{line}");
        }
    }

    #[test]
    fn registry_names_and_local_trees_do_not() {
        for line in [
            "npx prettier --write .",
            "npx @scope/tool init",
            "npx tsc --noEmit",
            "npx ./bin/cli.js",
            "npx eslint https://e.com/page",
            "npx --registry https://npm.corp.example/ corp-cli",
            "npm install",
            "npm install lodash",
            "npm run build",
            "pnpm dlx create-vite app",
            "pip install requests",
            "pip install -r requirements.txt",
            "pip install --index-url https://pypi.corp.example/simple pkg",
            "pip install -e .",
            "python3 -m pip install -U pip",
            "python3 -m http.server",
            "uvx ruff check .",
            "uv run pytest",
            "pipx run black --check .",
            "pipx install poetry",
            "go run ./cmd/server",
            "go run .",
            "go run main.go",
            "cargo install ripgrep",
            "cargo run -- https://e.com",
        ] {
            assert!(!remote(line), "{line}");
        }
    }
}
