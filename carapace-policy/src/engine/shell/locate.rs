//! What `locate` (mlocate, plocate, slocate) prints: paths from a database of the whole
//! file system, hidden directories included, that match its patterns. The analysis does
//! not read the database: the output is any path the patterns allow, written as globs
//! whose directories are `find`'s walk ([`FIND_DEPTH`]), so that rules judge them as they
//! judge what `find / -name …` finds. `fd` (fd-find) is read the same way below its
//! directories.
use super::args;
use super::globopts;
use crate::rules::intersect::FIND_DEPTH;

/// Options that take a value.
const VALUED: &[&str] = &["-d", "--database", "-l", "-n", "--limit", "-r", "--regexp"];

/// What one `locate` command line prints and reads.
pub(super) struct Located<'a> {
    /// Globs of the paths it may print.
    pub names: Vec<String>,
    /// Database files it reads (`-d`).
    pub databases: Vec<&'a str>,
}

pub(super) fn locate(args: &[String]) -> Located<'_> {
    let o = args::parse(args, VALUED, false);
    let databases = o.values(&["-d", "--database"]);
    let mut names = Vec::new();
    // Counts and statistics print numbers, not paths.
    if o.has(&["-c", "--count", "-S", "--statistics"]) {
        return Located { names, databases };
    }
    let any = format!("/{FIND_DEPTH}");
    // A regex may match any path: the analysis does not read regexes as paths.
    let regex = o.has(&["--regex"]);
    if !o.values(&["-r", "--regexp"]).is_empty() || (regex && !o.operands.is_empty()) {
        names.push(any.clone());
    }
    if !regex {
        let caseless = o.has(&["-i", "--ignore-case"]);
        let basename = o.has(&["-b", "--basename"]);
        for pattern in &o.operands {
            for name in pattern_names(pattern, caseless, basename, &any) {
                if !names.contains(&name) {
                    names.push(name);
                }
            }
        }
    }
    Located { names, databases }
}

/// The paths one pattern matches, the pattern's own first (a value that holds one name
/// holds it). A pattern with wildcards must match the whole path (or
/// name, with `-b`), its `*` crossing `/`; a plain one is found anywhere in it, so it also
/// selects every path below a directory whose name holds it (`locate .ssh` lists the keys).
fn pattern_names(pattern: &str, caseless: bool, basename: bool, any: &str) -> Vec<String> {
    let fold = |p: &str| {
        if caseless {
            globopts::caseless(p)
        } else {
            p.to_owned()
        }
    };
    if pattern.is_empty() {
        return vec![any.to_owned()];
    }
    if pattern.contains(['*', '?', '[']) {
        // A `*` that may cross `/` is not a glob of names: any path.
        if pattern.contains('/') && !basename {
            return vec![any.to_owned()];
        }
        return vec![format!("{any}/{}", fold(pattern))];
    }
    let literal = fold(&escape(pattern));
    let Some((first, rest)) = literal.split_once('/') else {
        let name = format!("{any}/*{literal}*");
        let tree = format!("{name}/**");
        return if basename {
            vec![name]
        } else {
            vec![name, tree]
        };
    };
    // `.aws/credentials`: the end of one name, whole names, the start of another.
    let mut dir = format!("{any}/");
    if !first.is_empty() {
        dir.push('*');
        dir.push_str(first);
        dir.push('/');
    }
    let (middle, last) = rest.rsplit_once('/').unwrap_or(("", rest));
    if !middle.is_empty() {
        dir.push_str(middle);
        dir.push('/');
    }
    if last.is_empty() {
        return vec![format!("{dir}**")];
    }
    vec![format!("{dir}{last}*"), format!("{dir}{last}*/**")]
}

/// What `fd ARGS` (fd-find) lists, and the command it runs on each (`-x`/`-X` and the
/// words after it, `{}` standing for the entry).
pub(super) struct Found<'a> {
    pub names: Vec<String>,
    pub exec: &'a [String],
}

/// Options of fd that take a value.
const FD_VALUED: &[&str] = &[
    "-e",
    "--extension",
    "-t",
    "--type",
    "-d",
    "--max-depth",
    "--min-depth",
    "--exact-depth",
    "-E",
    "--exclude",
    "-c",
    "--color",
    "-j",
    "--threads",
    "-S",
    "--size",
    "--changed-within",
    "--changed-before",
    "-o",
    "--owner",
    "--base-directory",
    "--path-separator",
    "--search-path",
    "--max-results",
    "--ignore-file",
    "--format",
];

/// fd searches directories (the working one by default) for names its pattern, a regex
/// found anywhere in the name (`-g`: a glob of the whole name; `-F`: plain text), matches;
/// hidden ones too with `-H`/`-u`, which the analysis does not tell apart.
pub(super) fn fd(args: &[String]) -> Found<'_> {
    let split = args
        .iter()
        .position(|a| matches!(a.as_str(), "-x" | "--exec" | "-X" | "--exec-batch"))
        .unwrap_or(args.len());
    let exec = args.get(split + 1..).unwrap_or(&[]);
    let o = args::parse(&args[..split], FD_VALUED, false);
    let mut operands = o.operands.iter().copied();
    let pattern = operands.next().unwrap_or("");
    let mut dirs: Vec<&str> = operands.chain(o.values(&["--search-path"])).collect();
    if dirs.is_empty() {
        dirs.push(".");
    }
    let plain = |p: &str| {
        p.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '~'))
    };
    let name = if matches!(pattern, "" | "." | "^") {
        None
    } else if o.has(&["-p", "--full-path"]) {
        Some(None)
    } else if o.has(&["-g", "--glob"]) {
        Some(Some(pattern.to_owned()))
    } else if o.has(&["-F", "--fixed-strings"]) || plain(&pattern.replace("\\.", ".")) {
        Some(Some(format!("*{}*", escape(&pattern.replace("\\.", ".")))))
    } else {
        Some(None)
    };
    let extension = o.value(&["-e", "--extension"]);
    let names = dirs
        .iter()
        .map(|d| {
            let d = d.trim_end_matches('/');
            match (&name, extension) {
                (None, None) => format!("{d}/**"),
                (None, Some(ext)) => format!("{d}/{FIND_DEPTH}/*.{ext}"),
                (Some(None), _) => format!("{d}/{FIND_DEPTH}"),
                (Some(Some(n)), _) => format!("{d}/{FIND_DEPTH}/{n}"),
            }
        })
        .collect();
    Found { names, exec }
}

/// A plain pattern's characters that the glob reader would take as syntax, escaped.
fn escape(pattern: &str) -> String {
    let mut out = String::with_capacity(pattern.len());
    for c in pattern.chars() {
        if matches!(c, '\\' | '{' | '}' | '(' | ')') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(line: &str) -> Vec<String> {
        let args: Vec<String> = line.split_whitespace().map(str::to_owned).collect();
        readable(&locate(&args).names)
    }

    /// The names with find's walk written `+(**)`.
    fn readable(names: &[String]) -> Vec<String> {
        names
            .iter()
            .map(|n| n.replace(FIND_DEPTH, "+(**)"))
            .collect()
    }

    #[test]
    fn patterns_become_globs_of_the_paths_they_match() {
        assert_eq!(names("id_rsa"), ["/+(**)/*id_rsa*", "/+(**)/*id_rsa*/**"]);
        assert_eq!(names("-b id_rsa"), ["/+(**)/*id_rsa*"]);
        assert_eq!(
            names(".aws/credentials"),
            ["/+(**)/*.aws/credentials*", "/+(**)/*.aws/credentials*/**"]
        );
        assert_eq!(names("/root/.ssh/"), ["/+(**)/root/.ssh/**"]);
        assert_eq!(names("*.pem"), ["/+(**)/*.pem"]);
        assert_eq!(names("*/.ssh/*"), ["/+(**)"]);
        assert_eq!(names("-r ssh$"), ["/+(**)"]);
        assert_eq!(names("--regex ssh"), ["/+(**)"]);
        assert_eq!(names("-c id_rsa"), Vec::<String>::new());
        assert_eq!(names("-i -b ID"), ["/+(**)/*[iI][dD]*"]);
        assert_eq!(names("-b a{b}"), ["/+(**)/*a\\{b\\}*"]);
        let args: Vec<String> = ["-d", "/tmp/db", "x"].map(str::to_owned).to_vec();
        assert_eq!(locate(&args).databases, ["/tmp/db"]);
    }

    #[test]
    fn fd_lists_what_its_pattern_matches_below_its_directories() {
        let fd_names = |line: &str| {
            let args: Vec<String> = line.split_whitespace().map(str::to_owned).collect();
            readable(&fd(&args).names)
        };
        assert_eq!(fd_names("-H id_rsa /r"), ["/r/+(**)/*id_rsa*"]);
        assert_eq!(fd_names("-g *.pem"), ["./+(**)/*.pem"]);
        assert_eq!(fd_names("-H . /r"), ["/r/**"]);
        assert_eq!(fd_names("^id_.*$ /r"), ["/r/+(**)"]);
        assert_eq!(fd_names("-e py"), ["./+(**)/*.py"]);
        let args: Vec<String> = ["x", "-x", "cat", "{}"].map(str::to_owned).to_vec();
        assert_eq!(fd(&args).exec, ["cat", "{}"]);
    }
}
