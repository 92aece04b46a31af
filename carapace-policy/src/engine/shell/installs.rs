//! Where package installers put what they install, when the command line says: `pip
//! install --user` writes the user's site-packages (which Python imports, `.pth` files
//! included, before the user's own code), `--target`/`--prefix`/`--root` the directories
//! named, `npm install --prefix` a `node_modules` there. A plain `pip install` writes the
//! active environment (a virtualenv, or the system's, which rules name on their own), not a
//! place this can know better than the rules' patterns: nothing is added for it.
use super::super::operation::Context;
use super::args;

/// pip's options, before and after the subcommand, that take a value.
const PIP_VALUED: &[&str] = &[
    "-r",
    "--requirement",
    "-c",
    "--constraint",
    "-e",
    "--editable",
    "-t",
    "--target",
    "--prefix",
    "--root",
    "-i",
    "--index-url",
    "--extra-index-url",
    "-f",
    "--find-links",
    "--platform",
    "--python-version",
    "--implementation",
    "--abi",
    "--src",
    "--upgrade-strategy",
    "--install-option",
    "--global-option",
    "-C",
    "--config-settings",
    "--progress-bar",
    "--report",
    "--proxy",
    "--retries",
    "--timeout",
    "--exists-action",
    "--trusted-host",
    "--cert",
    "--client-cert",
    "--cache-dir",
    "--log",
    "--log-file",
    "--python",
    "--keyring-provider",
    "--use-feature",
    "--use-deprecated",
    "--only-binary",
    "--no-binary",
    "--root-user-action",
];

/// Long options whose abbreviations matter here, with the shortest prefix taken for each
/// (pip's option parser takes any prefix that names one option; a prefix it finds
/// ambiguous fails there, and reading it as the option only adds writes).
const PIP_ABBREVIATED: &[(&str, usize)] = &[("user", 2), ("target", 2), ("prefix", 4), ("root", 3)];

/// `--ta=DIR` as `--target=DIR`, `--us` as `--user`.
fn pip_long(arg: &str) -> String {
    let Some(body) = arg.strip_prefix("--") else {
        return arg.to_owned();
    };
    let (name, value) = body
        .split_once('=')
        .map_or((body, None), |(n, v)| (n, Some(v)));
    let full = PIP_ABBREVIATED
        .iter()
        .find(|(full, min)| name.len() >= *min && full.starts_with(name))
        .map_or(name, |(full, _)| full);
    match value {
        Some(v) => format!("--{full}={v}"),
        None => format!("--{full}"),
    }
}

/// The user's site directories: `PYTHONUSERBASE`, by default `~/.local`.
fn user_site(ctx: &Context) -> Vec<String> {
    let base = ctx
        .var("PYTHONUSERBASE")
        .filter(|v| !v.is_empty())
        .unwrap_or("~/.local")
        .trim_end_matches('/')
        .to_owned();
    vec![
        format!("{base}/lib/python*/site-packages"),
        format!("{base}/bin"),
    ]
}

/// `python setup.py install` (and `easy_install`) with `--user`, `--prefix`, `--home`,
/// `--root`, `--install-lib` or `--install-dir`/`-d`.
pub(super) fn setup_py(args: &[String], ctx: &Context) -> Vec<String> {
    let o = args::parse(
        args,
        &[
            "--prefix",
            "--home",
            "--root",
            "--install-lib",
            "--install-dir",
            "--install-scripts",
            "-d",
            "-s",
        ],
        false,
    );
    let mut dirs = Vec::new();
    if o.has(&["--user"]) {
        dirs.extend(user_site(ctx));
    }
    for prefix in o.values(&["--prefix", "--home"]) {
        let prefix = prefix.trim_end_matches('/');
        dirs.push(format!("{prefix}/lib/python*/site-packages"));
        dirs.push(format!("{prefix}/lib/python"));
        dirs.push(format!("{prefix}/bin"));
    }
    dirs.extend(
        o.values(&[
            "--root",
            "--install-lib",
            "--install-dir",
            "--install-scripts",
            "-d",
            "-s",
        ])
        .into_iter()
        .map(str::to_owned),
    );
    dirs
}

/// Settings of pip's configuration files (`key = value` lines of an INI file) that say
/// where it installs: `user`, `target`, `prefix`, `root`, as the `PIP_…` variables that
/// set them.
pub(super) fn pip_config(text: &str) -> Vec<(String, String)> {
    text.lines()
        .filter_map(|line| line.split_once('='))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .filter(|(k, _)| matches!(k.as_str(), "user" | "target" | "prefix" | "root"))
        .map(|(k, v)| (format!("PIP_{}", k.to_ascii_uppercase()), v))
        .collect()
}

/// `pip config set SECTION.KEY VALUE`: the setting, as [`pip_config`] gives it.
pub(super) fn pip_config_set(args: &[String]) -> Option<(String, String)> {
    let o = args::parse(args, PIP_VALUED, false);
    let [config, set, key, value, ..] = o.operands.as_slice() else {
        return None;
    };
    if (*config, *set) != ("config", "set") {
        return None;
    }
    let key = key.rsplit('.').next().unwrap_or(key);
    pip_config(&format!("{key} = {value}")).pop()
}

/// The directories `pip ARGS` (or `python -m pip ARGS`, `uv pip ARGS`) installs into, as
/// the command wrote them; each is written whole. `config`: settings of configuration
/// files whose text is known ([`pip_config`]).
pub(super) fn pip(args: &[String], ctx: &Context, config: &[(String, String)]) -> Vec<String> {
    let args: Vec<String> = args.iter().map(|a| pip_long(a)).collect();
    let o = args::parse(&args, PIP_VALUED, false);
    if o.operands.first() != Some(&"install") {
        return Vec::new();
    }
    // `--isolated` ignores PIP_* variables and configuration files.
    let env = |name: &str| {
        ctx.var(name)
            .or_else(|| {
                config
                    .iter()
                    .rev()
                    .find(|(k, _)| k == name)
                    .map(|(_, v)| v.as_str())
            })
            .filter(|_| !o.has(&["--isolated"]))
            .filter(|v| !v.is_empty())
    };
    let mut dirs: Vec<String> = Vec::new();
    let user = o.has(&["--user"])
        || env("PIP_USER").is_some_and(|v| {
            matches!(v.to_ascii_lowercase().as_str(), "1" | "true" | "yes" | "on")
        });
    if user {
        dirs.extend(user_site(ctx));
    }
    let target = o.values(&["-t", "--target"]);
    dirs.extend(
        target
            .iter()
            .map(|t| (*t).to_owned())
            .chain(env("PIP_TARGET").map(str::to_owned)),
    );
    for prefix in o.values(&["--prefix"]).into_iter().chain(env("PIP_PREFIX")) {
        let prefix = prefix.trim_end_matches('/');
        dirs.push(format!("{prefix}/lib/python*/site-packages"));
        dirs.push(format!("{prefix}/bin"));
    }
    dirs.extend(
        o.values(&["--root"])
            .into_iter()
            .chain(env("PIP_ROOT"))
            .map(str::to_owned),
    );
    dirs
}

/// The directories `npm ARGS` installs into when its prefix is named (`--prefix`, or
/// `npm_config_prefix` in its environment): `PREFIX/lib/node_modules` and `PREFIX/bin`
/// with `-g`, `PREFIX/node_modules` without.
/// The config file `npm config set|delete|edit …` (or `npm set …`) writes: the user's
/// `~/.npmrc` (where registry tokens live) unless `--userconfig F`, the project's with
/// `--location=project`; the global one's place is npm's prefix, not known here.
pub(super) fn npm_config_file(args: &[String]) -> Option<String> {
    let o = args::parse(
        args,
        &["--location", "--userconfig", "-L", "--prefix", "-C"],
        false,
    );
    let writes = match o.operands.as_slice() {
        ["config" | "c", verb, ..] => matches!(*verb, "set" | "delete" | "rm" | "edit" | "fix"),
        ["set", ..] => true,
        _ => false,
    };
    if !writes || o.has(&["-g", "--global"]) {
        return None;
    }
    match o.value(&["--location", "-L"]) {
        Some("global") => None,
        Some("project") => Some("./.npmrc".to_owned()),
        _ => Some(o.value(&["--userconfig"]).unwrap_or("~/.npmrc").to_owned()),
    }
}

/// The scripts `npm pkg set scripts.NAME=CMD …` or `npm set-script NAME CMD` writes into
/// package.json, where `npm run NAME` runs them.
pub(super) fn npm_set_scripts(args: &[String]) -> Vec<&str> {
    let o = args::parse(args, &["--prefix", "-C", "-w", "--workspace"], false);
    match o.operands.as_slice() {
        ["pkg", "set", pairs @ ..] => pairs
            .iter()
            .filter_map(|p| p.strip_prefix("scripts."))
            .filter_map(|p| p.split_once('=').map(|(_, cmd)| cmd))
            .collect(),
        ["set-script", _, cmd, ..] => vec![cmd],
        _ => Vec::new(),
    }
}

pub(super) fn npm(args: &[String], ctx: &Context) -> Vec<String> {
    let o = args::parse(
        args,
        &["--prefix", "-C", "--cache", "--registry", "-w"],
        false,
    );
    if !matches!(
        o.operands.first().copied(),
        Some(
            "install"
                | "i"
                | "add"
                | "in"
                | "ins"
                | "inst"
                | "insta"
                | "instal"
                | "isnt"
                | "isntall"
                | "update"
                | "up"
                | "link"
                | "ln"
                | "ci"
        )
    ) {
        return Vec::new();
    }
    let global = o.has(&["-g", "--global"]);
    let prefix = o
        .value(&["--prefix", "-C"])
        .or_else(|| ctx.var("npm_config_prefix"))
        .or_else(|| ctx.var("NPM_CONFIG_PREFIX"))
        .filter(|p| !p.is_empty());
    let Some(prefix) = prefix else {
        return Vec::new();
    };
    let prefix = prefix.trim_end_matches('/');
    if global {
        vec![
            format!("{prefix}/lib/node_modules"),
            format!("{prefix}/bin"),
        ]
    } else {
        vec![format!("{prefix}/node_modules")]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(line: &str) -> Vec<String> {
        line.split_whitespace().map(str::to_owned).collect()
    }

    #[test]
    fn pip_installs_where_the_line_says() {
        let ctx = Context::default();
        assert_eq!(
            pip(&words("install --user requests"), &ctx, &[]),
            ["~/.local/lib/python*/site-packages", "~/.local/bin"]
        );
        assert_eq!(
            pip(&words("-q install -t /tmp/x requests"), &ctx, &[]),
            ["/tmp/x"]
        );
        assert_eq!(
            pip(&words("install --prefix=/opt/p x"), &ctx, &[]),
            ["/opt/p/lib/python*/site-packages", "/opt/p/bin"]
        );
        assert!(pip(&words("install -r requirements.txt"), &ctx, &[]).is_empty());
        assert_eq!(pip(&words("install --ta=/x y"), &ctx, &[]), ["/x"]);
        assert_eq!(pip(&words("install --us y"), &ctx, &[]).len(), 2);
        assert!(pip(&words("install --pre y"), &ctx, &[]).is_empty());
        assert_eq!(
            setup_py(&words("install --user"), &ctx),
            ["~/.local/lib/python*/site-packages", "~/.local/bin"]
        );
        assert!(pip(&words("download --user x"), &ctx, &[]).is_empty());
        assert!(pip(&words("show --user"), &ctx, &[]).is_empty());
        assert_eq!(
            npm(&words("install -g --prefix ~/.node_modules x"), &ctx),
            ["~/.node_modules/lib/node_modules", "~/.node_modules/bin"]
        );
        assert_eq!(
            npm(&words("i --prefix=/tmp/p x"), &ctx),
            ["/tmp/p/node_modules"]
        );
        assert!(npm(&words("install -g x"), &ctx).is_empty());
        let config = pip_config("[install]\nuser = true\n");
        assert_eq!(pip(&words("install x"), &ctx, &config).len(), 2);
        assert_eq!(
            pip_config_set(&words("config set global.target /t")),
            Some(("PIP_TARGET".to_owned(), "/t".to_owned()))
        );
    }
}
