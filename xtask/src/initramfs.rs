//! The VM's initramfs: an in-memory file tree written as a newc cpio archive (uncompressed,
//! so the kernel unpacks it fast). The base userland (busybox, bash, coreutils, python3, curl
//! and their libraries) is cached; each run appends a small second archive (init, command,
//! Carapace binaries, rules, includes), which the kernel unpacks over the first.

use std::{
    collections::{BTreeMap, BTreeSet},
    fs,
    hash::{Hash as _, Hasher as _},
    io::{BufWriter, Write},
    os::unix::fs::{MetadataExt as _, PermissionsExt as _},
    path::{Path, PathBuf},
};

use anyhow::{bail, Context as _, Result};

use crate::util::{try_output, vm_cache_dir};

/// Bump when the base image's contents change in a way the host fingerprint does not show.
const BASE_VERSION: u32 = 2;

const PYTHON: &str = "/usr/bin/python3.11";
const PYTHON_LIB: &str = "/usr/lib/python3.11";
/// Parts of the Python standard library the VM never needs.
const PYTHON_SKIP: &[&str] = &[
    "test",
    "tests",
    "idle_test",
    "__pycache__",
    "idlelib",
    "tkinter",
    "turtledemo",
    "ensurepip",
    "lib2to3",
    "config-3.11-x86_64-linux-gnu",
];
/// Host programs copied into the base image besides coreutils (perl and git for the bypass
/// and benign-workload tests; a missing one is skipped and its tests say so).
const HOST_PROGRAMS: &[&str] = &[
    "/usr/bin/bash",
    "/usr/bin/curl",
    "/usr/bin/setpriv",
    "/usr/bin/perl",
    "/usr/bin/git",
];
/// pip as a self-contained wheel (Debian's python3-pip-whl): `python3 PIP_WHEEL/pip install`
/// runs it straight from the zip, for the VM's local package-install test.
const PIP_WHEEL: &str = "/usr/share/python-wheels/pip-23.0.1-py3-none-any.whl";

pub enum Node {
    Dir(u32),
    File { src: PathBuf, mode: u32 },
    Data { data: Vec<u8>, mode: u32 },
    Symlink(String),
    CharDev { major: u32, minor: u32, mode: u32 },
}

/// A file tree keyed by path relative to `/` (no leading slash). Parents sort before children.
#[derive(Default)]
pub struct Tree {
    nodes: BTreeMap<String, Node>,
}

/// Maps a host path onto the merged-/usr layout of the image (`/lib/x` → `usr/lib/x`).
fn image_path(path: &str) -> String {
    let p = path.trim_start_matches('/');
    for top in ["bin/", "sbin/", "lib/", "lib64/"] {
        if p.starts_with(top) {
            return format!("usr/{p}");
        }
    }
    p.to_owned()
}

impl Tree {
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    pub fn contains(&self, path: &str) -> bool {
        self.nodes.contains_key(&image_path(path))
    }

    fn parents(&mut self, path: &str) {
        let mut cur = String::new();
        let comps: Vec<&str> = path.split('/').filter(|c| !c.is_empty()).collect();
        for c in &comps[..comps.len().saturating_sub(1)] {
            if !cur.is_empty() {
                cur.push('/');
            }
            cur.push_str(c);
            self.nodes.entry(cur.clone()).or_insert(Node::Dir(0o755));
        }
    }

    pub fn insert(&mut self, path: &str, node: Node) {
        let path = image_path(path);
        self.parents(&path);
        self.nodes.insert(path, node);
    }

    pub fn dir(&mut self, path: &str, mode: u32) {
        self.insert(path, Node::Dir(mode));
    }

    pub fn data(&mut self, path: &str, data: impl Into<Vec<u8>>, mode: u32) {
        self.insert(
            path,
            Node::Data {
                data: data.into(),
                mode,
            },
        );
    }

    /// Copies a host file (following symlinks) to `dst`, keeping its permission bits.
    pub fn host_file(&mut self, src: &Path, dst: &str) -> Result<()> {
        let meta = fs::metadata(src).with_context(|| format!("cannot read {}", src.display()))?;
        self.insert(
            dst,
            Node::File {
                src: src.to_path_buf(),
                mode: meta.permissions().mode() & 0o7777,
            },
        );
        Ok(())
    }

    /// Copies a host file or directory tree to `dst`, skipping directory names in `skip`.
    pub fn host_tree(&mut self, src: &Path, dst: &str, skip: &[&str]) -> Result<()> {
        let meta = fs::metadata(src).with_context(|| format!("cannot read {}", src.display()))?;
        if !meta.is_dir() {
            return self.host_file(src, dst);
        }
        self.dir(dst, meta.permissions().mode() & 0o7777);
        let mut entries: Vec<_> = fs::read_dir(src)
            .with_context(|| format!("cannot list {}", src.display()))?
            .filter_map(Result::ok)
            .collect();
        entries.sort_by_key(fs::DirEntry::file_name);
        for e in entries {
            let name = e.file_name().to_string_lossy().into_owned();
            let path = e.path();
            let child = format!("{}/{name}", dst.trim_end_matches('/'));
            let Ok(meta) = fs::metadata(&path) else {
                continue; // dangling symlink
            };
            if meta.is_dir() {
                if skip.contains(&name.as_str()) || e.file_type()?.is_symlink() {
                    continue;
                }
                self.host_tree(&path, &child, skip)?;
            } else if meta.is_file() {
                self.host_file(&path, &child)?;
            }
        }
        Ok(())
    }

    /// Copies the shared libraries (and the dynamic loader) that the ELF files of the tree
    /// need and that are not in `base`.
    pub fn add_libraries(&mut self, base: Option<&Tree>) -> Result<()> {
        let elves: Vec<PathBuf> = self
            .nodes
            .values()
            .filter_map(|n| match n {
                Node::File { src, .. } if is_elf(src) => Some(src.clone()),
                _ => None,
            })
            .collect();
        let mut libs = BTreeSet::new();
        for elf in &elves {
            libs.extend(needed_libraries(elf));
        }
        for lib in libs {
            let in_base = base.is_some_and(|b| b.contains(&lib));
            if !in_base && !self.contains(&lib) {
                self.host_file(Path::new(&lib), &lib)?;
            }
        }
        Ok(())
    }

    /// Writes the tree as a newc cpio archive (without compression).
    pub fn write_cpio(&self, out: impl Write) -> Result<()> {
        let mut w = BufWriter::new(out);
        let mut ino = 1000u32;
        for (path, node) in &self.nodes {
            ino += 1;
            let (mode, data): (u32, std::borrow::Cow<[u8]>) = match node {
                Node::Dir(m) => (0o040_000 | m, (&[][..]).into()),
                Node::File { src, mode } => (
                    0o100_000 | mode,
                    fs::read(src)
                        .with_context(|| format!("cannot read {}", src.display()))?
                        .into(),
                ),
                Node::Data { data, mode } => (0o100_000 | mode, data.as_slice().into()),
                Node::Symlink(target) => (0o120_777, target.as_bytes().into()),
                Node::CharDev { mode, .. } => (0o020_000 | mode, (&[][..]).into()),
            };
            let (rmaj, rmin) = match node {
                Node::CharDev { major, minor, .. } => (*major, *minor),
                _ => (0, 0),
            };
            entry(&mut w, path, ino, mode, rmaj, rmin, &data)?;
        }
        entry(&mut w, "TRAILER!!!", 0, 0, 0, 0, &[])?;
        w.flush()?;
        Ok(())
    }
}

fn entry(
    w: &mut impl Write,
    name: &str,
    ino: u32,
    mode: u32,
    rmajor: u32,
    rminor: u32,
    data: &[u8],
) -> Result<()> {
    let nlink = if mode & 0o170_000 == 0o040_000 { 2 } else { 1 };
    let size = u32::try_from(data.len()).context("file too large for cpio")?;
    let namesize = name.len() + 1;
    write!(
        w,
        "070701{ino:08x}{mode:08x}{:08x}{:08x}{nlink:08x}{:08x}{size:08x}{:08x}{:08x}{rmajor:08x}{rminor:08x}{namesize:08x}{:08x}",
        0, 0, 0, 0, 0, 0
    )?;
    w.write_all(name.as_bytes())?;
    w.write_all(&[0])?;
    pad(w, 110 + namesize)?;
    w.write_all(data)?;
    pad(w, data.len())?;
    Ok(())
}

fn pad(w: &mut impl Write, len: usize) -> Result<()> {
    let n = (4 - len % 4) % 4;
    w.write_all(&[0u8; 3][..n])?;
    Ok(())
}

pub fn is_elf(path: &Path) -> bool {
    let mut magic = [0u8; 4];
    fs::File::open(path)
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut magic))
        .is_ok()
        && magic == *b"\x7fELF"
}

/// The absolute paths of the shared libraries `ldd` reports for an ELF file (empty for
/// static binaries).
fn needed_libraries(elf: &Path) -> Vec<String> {
    let Some(out) = try_output("ldd", [elf]) else {
        return Vec::new();
    };
    out.lines()
        .filter_map(|l| {
            let l = l.trim();
            let path = match l.split_once("=>") {
                Some((_, rhs)) => rhs.split_whitespace().next()?,
                None => l.split_whitespace().next()?,
            };
            path.starts_with('/').then(|| path.to_owned())
        })
        .collect()
}

/// Host files whose change should rebuild the base image.
fn fingerprint() -> u64 {
    let mut h = std::hash::DefaultHasher::new();
    BASE_VERSION.hash(&mut h);
    for p in ["/usr/bin/busybox", PYTHON, PYTHON_LIB, PIP_WHEEL]
        .iter()
        .chain(HOST_PROGRAMS)
    {
        if let Ok(m) = fs::metadata(p) {
            (p, m.mtime(), m.size()).hash(&mut h);
        }
    }
    h.finish()
}

/// The base userland, as a tree (for library lookups) and the path of its cached archive.
pub struct Base {
    pub tree: Tree,
    pub cpio: PathBuf,
}

pub fn base() -> Result<Base> {
    let tree = base_tree()?;
    let cpio = vm_cache_dir()?.join(format!("base-{:016x}.cpio", fingerprint()));
    if !cpio.exists() {
        println!("vm: building base image {}", cpio.display());
        let tmp = cpio.with_extension(format!("tmp{}", std::process::id()));
        tree.write_cpio(fs::File::create(&tmp)?)
            .with_context(|| format!("writing {}", tmp.display()))?;
        fs::rename(&tmp, &cpio)?;
    }
    Ok(Base { tree, cpio })
}

fn base_tree() -> Result<Tree> {
    let mut t = Tree::default();
    for d in [
        "proc",
        "sys",
        "dev",
        "run",
        "root",
        "home",
        "etc",
        "opt",
        "mnt",
        "var/log",
        "var/lib",
        "usr/bin",
        "usr/sbin",
        "usr/lib",
        "usr/lib64",
        "usr/local/bin",
    ] {
        t.dir(d, 0o755);
    }
    t.dir("tmp", 0o1777);
    t.dir("root", 0o700);
    // merged /usr, as on the host
    for top in ["bin", "sbin", "lib", "lib64"] {
        t.nodes
            .insert(top.to_owned(), Node::Symlink(format!("usr/{top}")));
    }
    // the kernel opens /dev/console for init before devtmpfs is mounted
    t.insert(
        "dev/console",
        Node::CharDev {
            major: 5,
            minor: 1,
            mode: 0o600,
        },
    );

    for p in HOST_PROGRAMS {
        if Path::new(p).exists() {
            t.host_file(Path::new(p), p)?;
        }
    }
    let coreutils = try_output("dpkg-query", ["-L", "coreutils"])
        .context("cannot list coreutils (dpkg-query -L coreutils)")?;
    for p in coreutils.lines().filter(|p| p.contains("bin/")) {
        if fs::metadata(p).is_ok_and(|m| m.is_file()) {
            t.host_file(Path::new(p), p)?;
        }
    }
    t.host_file(Path::new(PYTHON), PYTHON)?;
    t.insert("/usr/bin/python3", Node::Symlink("python3.11".into()));
    t.insert("/usr/bin/python", Node::Symlink("python3.11".into()));
    t.host_tree(Path::new(PYTHON_LIB), PYTHON_LIB, PYTHON_SKIP)?;
    t.insert("/usr/bin/sh", Node::Symlink("bash".into()));
    if Path::new(PIP_WHEEL).exists() {
        t.host_file(Path::new(PIP_WHEEL), PIP_WHEEL)?;
    }
    for ca in ["/etc/ssl/certs/ca-certificates.crt"] {
        if Path::new(ca).exists() {
            t.host_file(Path::new(ca), ca)?;
        }
    }
    t.add_libraries(None)?;

    // busybox fills in whatever the host programs do not provide (mount, ip, ps, …)
    let busybox = Path::new("/usr/bin/busybox");
    if !is_elf(busybox) || !needed_libraries(busybox).is_empty() {
        bail!("/usr/bin/busybox is missing or not static (install busybox-static)");
    }
    t.host_file(busybox, "/usr/bin/busybox")?;
    let applets =
        try_output("/usr/bin/busybox", ["--list-full"]).context("busybox --list-full failed")?;
    for applet in applets.lines().map(str::trim).filter(|a| !a.is_empty()) {
        if !t.contains(applet) {
            t.insert(applet, Node::Symlink("/usr/bin/busybox".into()));
        }
    }
    Ok(t)
}

/// Concatenates the base archive and an overlay tree into one initrd file.
pub fn write_initrd(base: &Base, overlay: &mut Tree, out: &Path) -> Result<()> {
    overlay.add_libraries(Some(&base.tree))?;
    fs::copy(&base.cpio, out)
        .with_context(|| format!("cannot copy {} to {}", base.cpio.display(), out.display()))?;
    let f = fs::OpenOptions::new().append(true).open(out)?;
    overlay.write_cpio(f)
}
