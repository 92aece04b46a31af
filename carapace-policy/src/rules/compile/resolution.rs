//! What the literal paths of a rule set resolve to on this machine: the links on their way
//! and the other names bind mounts give them. The kernel sees resolved names, so the image
//! holds these too (`with_link_targets`), and their digest tells the daemon when a path now
//! leads elsewhere (`image::Resolution::moved`). Reads the machine only through [`Host`].
use std::path::Path;

use carapace_common::PATH_MAX;

use crate::host::Host;
use crate::rules::pattern::{symlink_target, KernelForm};

/// `forms` plus, for each literal path or tree that leads through a symlink when the rules
/// load (`~/.ssh` linked into a dotfiles checkout, `~/.bashrc` managed by stow), the same
/// form at the link's target: the kernel sees the target's name, and the target's
/// directories are ancestors to keep in place; and the same forms under every other name a
/// bind mount gives them (`/home` mounted again at `/mnt/home`). Exceptions never get this
/// (a planted link must not widen them).
pub(crate) fn with_link_targets(
    forms: &[KernelForm],
    mounts: &Mounts,
    host: &dyn Host,
) -> Vec<KernelForm> {
    let mut out = forms.to_vec();
    let add = |t: KernelForm, out: &mut Vec<KernelForm>| {
        if form_len(&t) < PATH_MAX && !out.contains(&t) {
            out.push(t);
        }
    };
    for form in forms {
        let target = match form {
            KernelForm::Exact(path) => symlink_target(host, path)
                .and_then(|t| t.to_str().map(str::to_owned))
                .map(KernelForm::Exact),
            KernelForm::Prefix(prefix) => symlink_target(host, prefix.trim_end_matches('/'))
                .and_then(|t| t.to_str().map(|t| format!("{}/", t.trim_end_matches('/'))))
                .map(KernelForm::Prefix),
            KernelForm::Name(_) => None,
        };
        let links = match form {
            KernelForm::Exact(p) | KernelForm::Prefix(p) => links_on(host, p.trim_end_matches('/')),
            KernelForm::Name(_) => Vec::new(),
        };
        let aliases: Vec<KernelForm> = std::iter::once(form)
            .chain(target.as_ref())
            .flat_map(|f| mounts.aliases(f))
            .collect();
        // Every link the path is resolved through is a name to keep: replacing one in the
        // middle of a chain (`~/.ssh` → `~/dots/ssh` → …) would point the path elsewhere.
        let links = links.into_iter().map(KernelForm::Exact);
        for t in target.into_iter().chain(links).chain(aliases) {
            add(t, &mut out);
        }
    }
    out
}

/// What the literal paths of a rule set resolve to now (links followed, other names of bind
/// mounts), hashed: when it changes, the kernel image no longer names what the rules mean.
pub(crate) fn digest(forms: &[KernelForm], mounts: &Mounts, host: &dyn Host) -> u64 {
    use std::hash::{Hash as _, Hasher as _};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    with_link_targets(forms, mounts, host).hash(&mut hasher);
    hasher.finish()
}

/// The mount table as `/proc/self/mountinfo` gives it: enough to find the other names a
/// bind mount gives a path.
#[derive(Debug, Default)]
pub(crate) struct Mounts(Vec<Mount>);

#[derive(Debug)]
struct Mount {
    /// `major:minor` of the file system.
    dev: String,
    /// The directory of the file system mounted here (`/` for a whole file system).
    root: String,
    /// Where it is mounted.
    point: String,
}

impl Mounts {
    /// This process's mount table; empty when it cannot be read (no aliases then).
    pub(crate) fn read(host: &dyn Host) -> Self {
        host.read_to_string(Path::new("/proc/self/mountinfo"))
            .map(|text| Self::parse(&text))
            .unwrap_or_default()
    }

    fn parse(text: &str) -> Self {
        Self(
            text.lines()
                .filter_map(|line| {
                    let mut fields = line.split(' ').skip(2);
                    Some(Mount {
                        dev: fields.next()?.to_owned(),
                        root: unescape(fields.next()?),
                        point: unescape(fields.next()?),
                    })
                })
                .collect(),
        )
    }

    /// `form` under the other names mounts give its path: the file system's own path of it
    /// (through the mount it is on, the last of those stacked on one point) spelled through
    /// every other mount of that file system whose root lies above it.
    fn aliases(&self, form: &KernelForm) -> Vec<KernelForm> {
        let (path, tree) = match form {
            KernelForm::Exact(p) => (p.as_str(), false),
            KernelForm::Prefix(p) => (p.trim_end_matches('/'), true),
            KernelForm::Name(_) => return Vec::new(),
        };
        let Some(home) = self
            .0
            .iter()
            .filter(|m| below(path, &m.point).is_some())
            .max_by_key(|m| m.point.len())
        else {
            return Vec::new();
        };
        let Some(rest) = below(path, &home.point) else {
            return Vec::new();
        };
        let inside = join(&home.root, rest);
        self.0
            .iter()
            .filter(|m| m.dev == home.dev && !std::ptr::eq(*m, home))
            .filter_map(|m| below(&inside, &m.root).map(|rest| join(&m.point, rest)))
            .filter(|alias| alias != path)
            .map(|alias| {
                if tree {
                    KernelForm::Prefix(format!("{}/", alias.trim_end_matches('/')))
                } else {
                    KernelForm::Exact(alias)
                }
            })
            .collect()
    }
}

/// What follows directory `dir` in `path` ("" for `dir` itself), if `path` is in it.
fn below<'a>(path: &'a str, dir: &str) -> Option<&'a str> {
    if dir == "/" {
        return path.strip_prefix('/');
    }
    let rest = path.strip_prefix(dir)?;
    if rest.is_empty() {
        Some("")
    } else {
        rest.strip_prefix('/')
    }
}

fn join(dir: &str, rest: &str) -> String {
    match (dir.trim_end_matches('/'), rest) {
        ("", "") => "/".to_owned(),
        (d, "") => d.to_owned(),
        (d, r) => format!("{d}/{r}"),
    }
}

/// mountinfo escapes space, tab, newline and backslash as `\ooo`.
fn unescape(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes
            .get(i + 1..i + 4)
            .filter(|d| bytes[i] == b'\\' && d.iter().all(|c| (b'0'..=b'7').contains(c)));
        if let Some(d) = octal {
            out.push((d[0] - b'0') * 64 + (d[1] - b'0') * 8 + (d[2] - b'0'));
            i += 4;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Links followed when `path` is resolved, hops bounded as the kernel bounds them.
fn links_on(host: &dyn Host, path: &str) -> Vec<String> {
    let mut links = Vec::new();
    let mut resolved = std::path::PathBuf::from("/");
    let mut rest: Vec<std::ffi::OsString> = std::path::Path::new(path)
        .components()
        .rev()
        .filter_map(|c| match c {
            std::path::Component::Normal(n) => Some(n.to_owned()),
            _ => None,
        })
        .collect();
    let mut hops = 0;
    while let Some(name) = rest.pop() {
        let next = resolved.join(&name);
        match host.read_link(&next) {
            Some(target) if hops < MAX_LINK_HOPS => {
                hops += 1;
                if let Some(l) = next.to_str() {
                    links.push(l.to_owned());
                }
                if target.is_absolute() {
                    resolved = std::path::PathBuf::from("/");
                }
                for c in target.components().rev() {
                    match c {
                        std::path::Component::Normal(n) => rest.push(n.to_owned()),
                        std::path::Component::ParentDir => rest.push("..".into()),
                        _ => {}
                    }
                }
            }
            _ if name == ".." => {
                resolved.pop();
            }
            _ => resolved = next,
        }
    }
    links
}

/// The kernel's own limit on links followed in one lookup.
const MAX_LINK_HOPS: usize = 40;

fn form_len(form: &KernelForm) -> usize {
    match form {
        KernelForm::Exact(p) | KernelForm::Prefix(p) | KernelForm::Name(p) => p.len(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::real::host;

    const MOUNTINFO: &str = "\
21 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
22 21 0:5 / /proc rw - proc proc rw
40 21 8:1 /home /mnt/home\\040alias rw,relatime shared:1 - ext4 /dev/sda1 rw
41 21 8:2 / /srv rw - ext4 /dev/sdb rw
42 21 8:2 /secret /mnt/s rw - ext4 /dev/sdb rw
43 21 8:2 /other /mnt/o rw - ext4 /dev/sdb rw
";

    #[test]
    fn bind_mounts_give_protected_paths_their_other_names() {
        let mounts = Mounts::parse(MOUNTINFO);
        let exact = |p: &str| KernelForm::Exact(p.to_owned());
        let tree = |p: &str| KernelForm::Prefix(p.to_owned());
        assert_eq!(
            mounts.aliases(&exact("/home/u/.zprofile")),
            [exact("/mnt/home alias/u/.zprofile")]
        );
        // A tree on a second file system, mounted again below its root; a sibling mount of
        // another directory is no alias.
        assert_eq!(mounts.aliases(&tree("/srv/secret/")), [tree("/mnt/s/")]);
        assert_eq!(mounts.aliases(&exact("/srv/secret/a")), [exact("/mnt/s/a")]);
        // From the alias back to the original, too.
        assert_eq!(mounts.aliases(&exact("/mnt/s/a")), [exact("/srv/secret/a")]);
        assert!(mounts.aliases(&exact("/proc/sys/x")).is_empty());
        assert!(mounts.aliases(&exact("/etc/passwd")).is_empty());
        let forms = with_link_targets(&[exact("/srv/secret/a")], &mounts, &*host());
        assert!(forms.contains(&exact("/mnt/s/a")), "{forms:?}");
        // Garbage lines are skipped, not a panic.
        assert!(Mounts::parse("x\n\n1 2\n").0.is_empty());
    }

    #[test]
    fn a_path_that_resolves_elsewhere_changes_the_digest() {
        let dir = tempfile::tempdir().expect("tempdir");
        let aws = dir.path().join(".aws");
        std::fs::create_dir(&aws).expect("mkdir");
        let forms = [KernelForm::Prefix(format!("{}/", aws.display()))];
        let none = Mounts::default();
        let before = digest(&forms, &none, &*host());
        assert_eq!(before, digest(&forms, &none, &*host()), "stable");
        // The directory is replaced by a link into a dotfiles checkout after the rules loaded.
        let real = dir.path().join("dots-aws");
        std::fs::rename(&aws, &real).expect("move");
        std::os::unix::fs::symlink(&real, &aws).expect("link");
        assert_ne!(before, digest(&forms, &none, &*host()));
        // And a new bind mount is seen as well.
        let mounts = Mounts::parse(MOUNTINFO);
        let home = [KernelForm::Exact("/home/u/.zprofile".to_owned())];
        assert_ne!(
            digest(&home, &none, &*host()),
            digest(&home, &mounts, &*host())
        );
    }

    #[test]
    fn paths_through_a_symlink_are_protected_at_its_target_too() {
        let dir = tempfile::tempdir().expect("tempdir");
        let real = dir.path().join("dotfiles/ssh");
        std::fs::create_dir_all(&real).expect("mkdir");
        std::fs::write(real.join("id_rsa"), "k").expect("write");
        let link = dir.path().join(".ssh");
        std::os::unix::fs::symlink(&real, &link).expect("symlink");
        let (link, real) = (link.display().to_string(), real.display().to_string());
        let forms = with_link_targets(
            &[
                KernelForm::Prefix(format!("{link}/")),
                KernelForm::Exact(format!("{link}/id_rsa")),
            ],
            &Mounts::default(),
            &*host(),
        );
        assert!(forms.contains(&KernelForm::Prefix(format!("{real}/"))));
        assert!(forms.contains(&KernelForm::Exact(format!("{real}/id_rsa"))));
        // The link itself is a name to keep.
        assert!(forms.contains(&KernelForm::Exact(link.clone())));
        assert_eq!(forms.len(), 5);
    }

    #[test]
    fn a_protected_tree_not_made_yet_behind_a_link_is_protected_at_the_target() {
        let dir = tempfile::tempdir().expect("tempdir");
        let real = dir.path().join("dotfiles/config");
        std::fs::create_dir_all(&real).expect("mkdir");
        let link = dir.path().join(".config");
        std::os::unix::fs::symlink(&real, &link).expect("symlink");
        let forms = with_link_targets(
            &[KernelForm::Prefix(format!("{}/autostart/", link.display()))],
            &Mounts::default(),
            &*host(),
        );
        assert!(forms.contains(&KernelForm::Prefix(format!(
            "{}/autostart/",
            real.display()
        ))));
    }

    #[test]
    fn every_link_of_a_chain_is_kept() {
        let dir = tempfile::tempdir().expect("tempdir");
        let real = dir.path().join("data/ssh");
        std::fs::create_dir_all(&real).expect("mkdir");
        std::fs::create_dir_all(dir.path().join("dots")).expect("mkdir");
        let middle = dir.path().join("dots/ssh");
        std::os::unix::fs::symlink("../data/ssh", &middle).expect("relative link");
        let link = dir.path().join(".ssh");
        std::os::unix::fs::symlink(&middle, &link).expect("link");
        let links = links_on(&*host(), &format!("{}/id_rsa", link.display()));
        assert_eq!(
            links,
            [link.display().to_string(), middle.display().to_string()]
        );
        assert!(links_on(&*host(), &real.display().to_string()).is_empty());
    }
}
