//! Shapes of userspace-only path globs that the rule packs use a lot, matched with string
//! comparisons instead of a regex: `**/.git/hooks/**` (a run of directories anywhere),
//! `**/.claude/settings.json` (a path ending), `**/*.pem` (a name ending), and `/dev/sd*`,
//! `~/*` (an entry of one
//! directory by the start of its name). The kernel forms (`pattern::KernelForm`) cover
//! exact paths, `/dir/**` and `**/name`; these are what kept a regex set on the path of
//! nearly every write.
/// Characters that make a glob more than a literal path.
pub(super) const GLOB_META: &[char] = &['*', '?', '[', ']', '{', '}', '\\'];

/// A glob of one of the shapes, with the same answer as `globset` gives for it
/// (checked by `tests::shapes_match_like_their_globs`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Shape {
    /// `**/DIRS/**`: holds `within` = `DIRS/`; a path that starts with it or contains
    /// `/DIRS/`.
    Within { within: String, inner: String },
    /// `DIR/NAME*` (`DIR` absolute): an entry of `dir` (ending in `/`) whose name starts
    /// with `name`.
    Entry { dir: String, name: String },
    /// `**/DIRS/NAME`: a path that is `DIRS/NAME` or ends with `/DIRS/NAME` (`suffix`).
    Suffix { whole: String, suffix: String },
    /// `**/*.EXT`: a path whose name ends with `.EXT` (held with its dot).
    Extension(String),
}

impl Shape {
    /// The shape of `glob`, if it has one.
    #[must_use]
    pub fn of(glob: &str) -> Option<Self> {
        let literal = |s: &str| !s.is_empty() && !s.contains(GLOB_META);
        if let Some(dirs) = glob.strip_prefix("**/").and_then(|g| g.strip_suffix("/**")) {
            if literal(dirs) && !dirs.starts_with('/') && !dirs.ends_with('/') {
                return Some(Self::Within {
                    within: format!("{dirs}/"),
                    inner: format!("/{dirs}/"),
                });
            }
        }
        if let Some(ext) = glob.strip_prefix("**/*.") {
            if literal(ext) && !ext.contains('/') {
                return Some(Self::Extension(format!(".{ext}")));
            }
        }
        if let Some(tail) = glob.strip_prefix("**/") {
            if literal(tail) && !tail.starts_with('/') {
                return Some(Self::Suffix {
                    whole: tail.to_owned(),
                    suffix: format!("/{tail}"),
                });
            }
        }
        let stem = glob.strip_suffix('*')?;
        let (dir, name) = stem.rsplit_once('/')?;
        let dir = format!("{dir}/");
        (dir.starts_with('/') && literal(&dir) && (name.is_empty() || literal(name))).then(|| {
            Self::Entry {
                dir,
                name: name.to_owned(),
            }
        })
    }

    #[must_use]
    pub fn matches(&self, path: &str) -> bool {
        match self {
            Self::Within { within, inner } => {
                path.starts_with(within.as_str()) || path.contains(inner.as_str())
            }
            Self::Suffix { whole, suffix } => path == whole || path.ends_with(suffix.as_str()),
            Self::Extension(ext) => path
                .rsplit('/')
                .next()
                .is_some_and(|name| name.ends_with(ext.as_str())),
            Self::Entry { dir, name } => path
                .strip_prefix(dir.as_str())
                .is_some_and(|rest| rest.starts_with(name.as_str()) && !rest.contains('/')),
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::super::pattern::build_glob;
    use super::Shape;

    #[test]
    fn the_packs_shapes_are_recognised() {
        for glob in [
            "**/.git/hooks/**",
            "**/a/**",
            "/*",
            "/home/*",
            "/dev/sd*",
            "/a/b/x-*",
            "**/a/b.json",
            "**/x",
            "**/*.pem",
            "**/*.tar.gz",
        ] {
            assert!(Shape::of(glob).is_some(), "{glob}");
        }
        for glob in [
            "/a/**",
            "/a/*/b",
            "/a/*.c",
            "**/a*/**",
            "a/*",
            "/a/[x]*",
            "**//**",
            "**/a/**/b/**",
            "/a/**/*",
            "**/*.{a,b}",
            "**/*.a/b",
        ] {
            assert!(Shape::of(glob).is_none(), "{glob}");
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        #[test]
        fn shapes_match_like_their_globs(
            glob in "\\*\\*/[ab./]{1,5}(/\\*\\*)?|\\*\\*/\\*[ab./]{0,4}|(/[ab.]{0,3}){1,3}/[ab.-]{0,2}\\*|[/ab.*]{1,8}",
            path in "[/ab.\\n-]{0,14}",
        ) {
            if let Some(shape) = Shape::of(&glob) {
                let full = build_glob(&glob).expect("a shaped glob is a glob").compile_matcher();
                prop_assert_eq!(shape.matches(&path), full.is_match(&path), "{} on {:?}", glob, path);
            }
        }
    }
}
