//! Struct member offsets from the running kernel's BTF (`/sys/kernel/btf/vmlinux`).
//!
//! Rust eBPF has no CO-RE relocations, so the programs take every offset they need as a
//! load-time global. This is a small reader of the BTF type section: enough to find a named
//! struct and a member's byte offset, looking through anonymous structs and unions.

use std::collections::HashMap;

#[derive(Debug, thiserror::Error)]
pub enum BtfError {
    #[error("BTF data is malformed: {0}")]
    Malformed(&'static str),
    #[error("kernel BTF has no struct `{0}`")]
    NoStruct(String),
    #[error("kernel BTF struct `{0}` has no member `{1}`")]
    NoMember(String, String),
    #[error("kernel BTF has no enumerator `{1}` in enum `{0}`")]
    NoEnumerator(String, String),
}

const MAGIC: u16 = 0xeb9f;

const KIND_INT: u32 = 1;
const KIND_ARRAY: u32 = 3;
const KIND_STRUCT: u32 = 4;
const KIND_UNION: u32 = 5;
const KIND_ENUM: u32 = 6;
const KIND_FUNC: u32 = 12;
const KIND_FUNC_PROTO: u32 = 13;
const KIND_VAR: u32 = 14;
const KIND_DATASEC: u32 = 15;
const KIND_DECL_TAG: u32 = 17;
const KIND_ENUM64: u32 = 19;

struct Member {
    name_off: u32,
    type_id: u32,
    bit_offset: u32,
}

struct Composite {
    members: Vec<Member>,
}

/// The structs and unions of a BTF blob, by type id, with their names; its named enums;
/// and the parameter counts of the LSM hooks' BPF attach points (`bpf_lsm_*`).
pub struct Btf {
    strings: Vec<u8>,
    composites: HashMap<u32, Composite>,
    by_name: HashMap<String, u32>,
    /// Enum name → (enumerator name offset, value).
    enums: HashMap<String, Vec<(u32, i64)>>,
    /// Hook name (without `bpf_lsm_`) → number of parameters.
    lsm_params: HashMap<String, u32>,
    /// The type id of the `bpf_rdonly_cast` kfunc (Linux 6.2+).
    rdonly_cast: Option<u32>,
}

fn u32_at(data: &[u8], at: usize) -> Result<u32, BtfError> {
    data.get(at..at + 4)
        .and_then(|b| b.try_into().ok())
        .map(u32::from_le_bytes)
        .ok_or(BtfError::Malformed("truncated"))
}

impl Btf {
    pub fn from_sys_fs() -> std::io::Result<Result<Self, BtfError>> {
        let data = std::fs::read("/sys/kernel/btf/vmlinux")?;
        Ok(Self::parse(&data))
    }

    /// Parses little-endian BTF (the only kind this project's targets produce).
    pub fn parse(data: &[u8]) -> Result<Self, BtfError> {
        let magic = data.get(0..2).map(|b| u16::from_le_bytes([b[0], b[1]]));
        if magic != Some(MAGIC) {
            return Err(BtfError::Malformed("bad magic"));
        }
        let hdr_len = u32_at(data, 4)? as usize;
        let type_off = u32_at(data, 8)? as usize;
        let type_len = u32_at(data, 12)? as usize;
        let str_off = u32_at(data, 16)? as usize;
        let str_len = u32_at(data, 20)? as usize;
        let types = data
            .get(hdr_len + type_off..hdr_len + type_off + type_len)
            .ok_or(BtfError::Malformed("type section out of bounds"))?;
        let strings = data
            .get(hdr_len + str_off..hdr_len + str_off + str_len)
            .ok_or(BtfError::Malformed("string section out of bounds"))?
            .to_vec();

        let mut btf = Self {
            strings,
            composites: HashMap::new(),
            by_name: HashMap::new(),
            enums: HashMap::new(),
            lsm_params: HashMap::new(),
            rdonly_cast: None,
        };
        // FUNC_PROTO type id → parameter count, and the hooks' FUNC → FUNC_PROTO links,
        // resolved after the pass (a prototype may come after its function).
        let mut proto_params: HashMap<u32, u32> = HashMap::new();
        let mut hook_protos: Vec<(String, u32)> = Vec::new();
        let mut at = 0;
        let mut id = 1u32;
        while at < types.len() {
            let name_off = u32_at(types, at)?;
            let info = u32_at(types, at + 4)?;
            let vlen = (info & 0xffff) as usize;
            let kind = (info >> 24) & 0x1f;
            let kind_flag = info >> 31 == 1;
            at += 12;
            let extra = match kind {
                KIND_INT | KIND_VAR | KIND_DECL_TAG => 4,
                KIND_ARRAY => 12,
                KIND_STRUCT | KIND_UNION | KIND_DATASEC | KIND_ENUM64 => 12 * vlen,
                KIND_ENUM | KIND_FUNC_PROTO => 8 * vlen,
                _ => 0,
            };
            if kind == KIND_FUNC_PROTO {
                proto_params.insert(id, vlen as u32);
            }
            if kind == KIND_FUNC {
                let name = btf.string(name_off);
                if let Some(hook) = name.strip_prefix("bpf_lsm_") {
                    let hook = hook.to_owned();
                    hook_protos.push((hook, u32_at(types, at - 4)?));
                } else if name == "bpf_rdonly_cast" {
                    btf.rdonly_cast = Some(id);
                }
            }
            if kind == KIND_ENUM && name_off != 0 {
                let mut values = Vec::with_capacity(vlen);
                for v in 0..vlen {
                    let base = at + 8 * v;
                    let raw = u32_at(types, base + 4)?;
                    // Signed or not, the enumerators the programs need are small.
                    values.push((u32_at(types, base)?, i64::from(raw.cast_signed())));
                }
                let name = btf.string(name_off).to_owned();
                btf.enums.entry(name).or_insert(values);
            }
            if kind == KIND_STRUCT || kind == KIND_UNION {
                let mut members = Vec::with_capacity(vlen);
                for m in 0..vlen {
                    let base = at + 12 * m;
                    let offset = u32_at(types, base + 8)?;
                    members.push(Member {
                        name_off: u32_at(types, base)?,
                        type_id: u32_at(types, base + 4)?,
                        // With kind_flag the top 8 bits are a bitfield size.
                        bit_offset: if kind_flag {
                            offset & 0x00ff_ffff
                        } else {
                            offset
                        },
                    });
                }
                if name_off != 0 && kind == KIND_STRUCT {
                    let name = btf.string(name_off).to_owned();
                    btf.by_name.entry(name).or_insert(id);
                }
                btf.composites.insert(id, Composite { members });
            }
            at += extra;
            id += 1;
        }
        for (hook, proto) in hook_protos {
            if let Some(&n) = proto_params.get(&proto) {
                btf.lsm_params.insert(hook, n);
            }
        }
        Ok(btf)
    }

    /// The type ids of the `bpf_rdonly_cast` kfunc and of `struct seqcount`, where the kernel
    /// has both (the path cache's direct reads of the dcache and mount sequences).
    #[must_use]
    pub fn seqcount_cast(&self) -> Option<(u32, u32)> {
        Some((self.rdonly_cast?, *self.by_name.get("seqcount")?))
    }

    /// The value of enumerator `member` of `enum name`.
    pub fn enum_value(&self, name: &str, member: &str) -> Result<i64, BtfError> {
        self.enums
            .get(name)
            .and_then(|values| {
                values
                    .iter()
                    .find(|(off, _)| self.string(*off) == member)
                    .map(|(_, v)| *v)
            })
            .ok_or_else(|| BtfError::NoEnumerator(name.to_owned(), member.to_owned()))
    }

    /// How many parameters LSM hook `hook` takes on this kernel (`None`: no such hook).
    #[must_use]
    pub fn lsm_hook_params(&self, hook: &str) -> Option<u32> {
        self.lsm_params.get(hook).copied()
    }

    fn string(&self, off: u32) -> &str {
        let start = off as usize;
        let rest = self.strings.get(start..).unwrap_or_default();
        let end = rest.iter().position(|&b| b == 0).unwrap_or(rest.len());
        std::str::from_utf8(&rest[..end]).unwrap_or("")
    }

    /// Byte offset of `member` in `struct strct`.
    pub fn member_offset(&self, strct: &str, member: &str) -> Result<u64, BtfError> {
        let id = *self
            .by_name
            .get(strct)
            .ok_or_else(|| BtfError::NoStruct(strct.to_owned()))?;
        self.find_member(id, member, 0)
            .map(|bits| bits / 8)
            .ok_or_else(|| BtfError::NoMember(strct.to_owned(), member.to_owned()))
    }

    /// Byte offset of `path[0].path[1]…` in `struct strct`, where each member but the last
    /// is itself a struct or union (named or not).
    pub fn member_path(&self, strct: &str, path: &[&str]) -> Result<u64, BtfError> {
        let mut id = *self
            .by_name
            .get(strct)
            .ok_or_else(|| BtfError::NoStruct(strct.to_owned()))?;
        let mut bits = 0;
        for (i, member) in path.iter().enumerate() {
            let missing = || BtfError::NoMember(strct.to_owned(), path[..=i].join("."));
            let (at, type_id) = self.find_typed(id, member, 0).ok_or_else(missing)?;
            bits += at;
            id = type_id;
        }
        Ok(bits / 8)
    }

    /// A member's bit offset and type id, looking through anonymous members.
    fn find_typed(&self, id: u32, member: &str, depth: u32) -> Option<(u64, u32)> {
        // Anonymous members nest only a few levels deep in practice.
        if depth > 8 {
            return None;
        }
        let composite = self.composites.get(&id)?;
        for m in &composite.members {
            if m.name_off != 0 && self.string(m.name_off) == member {
                return Some((u64::from(m.bit_offset), m.type_id));
            }
        }
        for m in composite.members.iter().filter(|m| m.name_off == 0) {
            if let Some((off, ty)) = self.find_typed(m.type_id, member, depth + 1) {
                return Some((u64::from(m.bit_offset) + off, ty));
            }
        }
        None
    }

    fn find_member(&self, id: u32, member: &str, depth: u32) -> Option<u64> {
        self.find_typed(id, member, depth).map(|(bits, _)| bits)
    }
}

/// Every offset the programs take, by global name (see `carapace_common::globals`).
pub fn program_offsets(btf: &Btf) -> Result<Vec<(&'static str, u64)>, BtfError> {
    use carapace_common::globals as g;
    let wanted: [(&str, &str, &str); 49] = [
        (g::OFF_FILE_F_PATH, "file", "f_path"),
        (g::OFF_FILE_F_MODE, "file", "f_mode"),
        (g::OFF_FILE_F_INODE, "file", "f_inode"),
        (g::OFF_INODE_I_INO, "inode", "i_ino"),
        (g::OFF_INODE_I_SB, "inode", "i_sb"),
        (g::OFF_INODE_I_FSNOTIFY_MASK, "inode", "i_fsnotify_mask"),
        (g::OFF_SB_S_DEV, "super_block", "s_dev"),
        (g::OFF_BPRM_FILE, "linux_binprm", "file"),
        (g::OFF_PATH_DENTRY, "path", "dentry"),
        (g::OFF_DENTRY_D_NAME, "dentry", "d_name"),
        (g::OFF_QSTR_NAME, "qstr", "name"),
        (g::OFF_TASK_TGID, "task_struct", "tgid"),
        (g::OFF_SB_S_MAGIC, "super_block", "s_magic"),
        (g::OFF_DENTRY_D_PARENT, "dentry", "d_parent"),
        (g::OFF_DENTRY_D_INODE, "dentry", "d_inode"),
        (g::OFF_MSGHDR_MSG_NAME, "msghdr", "msg_name"),
        (g::OFF_UNIX_SOCK_PATH, "unix_sock", "path"),
        (g::OFF_SOCKET_SK, "socket", "sk"),
        (g::OFF_PATH_MNT, "path", "mnt"),
        (g::OFF_TASK_FS, "task_struct", "fs"),
        (g::OFF_FS_ROOT, "fs_struct", "root"),
        (g::OFF_FILE_F_FLAGS, "file", "f_flags"),
        (g::OFF_VFSMOUNT_MNT_ROOT, "vfsmount", "mnt_root"),
        (g::OFF_MOUNT_MNT, "mount", "mnt"),
        (g::OFF_MOUNT_MNT_PARENT, "mount", "mnt_parent"),
        (g::OFF_MOUNT_MNT_MOUNTPOINT, "mount", "mnt_mountpoint"),
        (g::OFF_TASK_CGROUPS, "task_struct", "cgroups"),
        (g::OFF_CSS_SET_DFL_CGRP, "css_set", "dfl_cgrp"),
        (g::OFF_CGROUP_LEVEL, "cgroup", "level"),
        (g::OFF_KERNFS_NODE_ID, "kernfs_node", "id"),
        (g::OFF_UNIX_SOCK_ADDR, "unix_sock", "addr"),
        (g::OFF_UNIX_ADDRESS_NAME, "unix_address", "name"),
        (g::OFF_SOCK_FAMILY, "sock_common", "skc_family"),
        (g::OFF_MSGHDR_MSG_CONTROL, "msghdr", "msg_control"),
        (g::OFF_MSGHDR_MSG_CONTROLLEN, "msghdr", "msg_controllen"),
        (g::OFF_DENTRY_D_SB, "dentry", "d_sb"),
        (g::OFF_SB_S_MOUNTS, "super_block", "s_mounts"),
        (g::OFF_VFSMOUNT_MNT_SB, "vfsmount", "mnt_sb"),
        (g::OFF_PROC_INODE_PID, "proc_inode", "pid"),
        (g::OFF_PROC_INODE_VFS_INODE, "proc_inode", "vfs_inode"),
        (g::OFF_PID_TASKS, "pid", "tasks"),
        (g::OFF_TASK_PID_LINKS, "task_struct", "pid_links"),
        (g::OFF_DENTRY_D_FSDATA, "dentry", "d_fsdata"),
        (g::OFF_INODE_I_MODE, "inode", "i_mode"),
        (g::OFF_INODE_I_RDEV, "inode", "i_rdev"),
        (g::OFF_TASK_NSPROXY, "task_struct", "nsproxy"),
        (g::OFF_NSPROXY_IPC_NS, "nsproxy", "ipc_ns"),
        (g::OFF_SB_S_FS_INFO, "super_block", "s_fs_info"),
        (g::OFF_KEY_SERIAL, "key", "serial"),
    ];
    let mut offsets = wanted
        .iter()
        .map(|&(global, strct, member)| Ok((global, btf.member_offset(strct, member)?)))
        .collect::<Result<Vec<_>, BtfError>>()?;
    // A socket's cgroup is a member of a member; the programs take the sum.
    let sock_cgroup = btf.member_offset("sock", "sk_cgrp_data")?
        + btf.member_offset("sock_cgroup_data", "cgroup")?;
    offsets.push((g::OFF_SOCK_CGROUP, sock_cgroup));
    // A terminal's session sits in a named member of an anonymous struct (`ctrl`).
    offsets.push((
        g::OFF_TTY_SESSION,
        btf.member_path("tty_struct", &["ctrl", "session"])?,
    ));
    // A super block's mounts: a list through `mount::mnt_instance`, or from Linux 6.18 a
    // pointer to the first `struct mount` (linked by `mnt_next_for_sb`), which the same
    // arithmetic reads with an offset of 0.
    let instance = match btf.member_offset("mount", "mnt_instance") {
        Ok(at) => at,
        Err(e) => btf
            .member_offset("mount", "mnt_next_for_sb")
            .map(|_| 0)
            .map_err(|_| e)?,
    };
    offsets.push((g::OFF_MOUNT_MNT_INSTANCE, instance));
    // Linux 6.0 replaced the ancestors' ids with pointers to them.
    match btf.member_offset("cgroup", "ancestors") {
        Ok(at) => offsets.extend([
            (g::OFF_CGROUP_ANCESTORS, at),
            (g::OFF_CGROUP_KN, btf.member_offset("cgroup", "kn")?),
            (g::CGROUP_ANCESTOR_IDS, 0),
        ]),
        Err(_) => offsets.extend([
            (
                g::OFF_CGROUP_ANCESTORS,
                btf.member_offset("cgroup", "ancestor_ids")?,
            ),
            (g::OFF_CGROUP_KN, 0),
            (g::CGROUP_ANCESTOR_IDS, 1),
        ]),
    }
    Ok(offsets)
}

/// Enumerator values the programs compare with, by global name (u32 globals).
pub fn program_enums(btf: &Btf) -> Result<Vec<(&'static str, u32)>, BtfError> {
    use carapace_common::globals as g;
    let wanted: [(&str, &str, &str); 2] = [
        (g::READING_MODULE, "kernel_read_file_id", "READING_MODULE"),
        (g::LOADING_MODULE, "kernel_load_data_id", "LOADING_MODULE"),
    ];
    wanted
        .iter()
        .map(|&(global, name, member)| {
            let value = btf.enum_value(name, member)?;
            let value = u32::try_from(value)
                .map_err(|_| BtfError::NoEnumerator(name.to_owned(), member.to_owned()))?;
            Ok((global, value))
        })
        .collect()
}

/// The type id of the function `name` (`BTF_KIND_FUNC`) in a BTF blob, e.g. the
/// `bpf_lsm_file_open` an LSM program attaches to; `Ok(None)` when there is none.
pub fn func_id(data: &[u8], name: &[u8]) -> Result<Option<u32>, BtfError> {
    let magic = data.get(0..2).map(|b| u16::from_le_bytes([b[0], b[1]]));
    if magic != Some(MAGIC) {
        return Err(BtfError::Malformed("bad magic"));
    }
    let hdr_len = u32_at(data, 4)? as usize;
    let (type_off, type_len) = (u32_at(data, 8)? as usize, u32_at(data, 12)? as usize);
    let (str_off, str_len) = (u32_at(data, 16)? as usize, u32_at(data, 20)? as usize);
    let section = |off: usize, len: usize| {
        let start = hdr_len.checked_add(off)?;
        data.get(start..start.checked_add(len)?)
    };
    let types =
        section(type_off, type_len).ok_or(BtfError::Malformed("type section out of bounds"))?;
    let strings =
        section(str_off, str_len).ok_or(BtfError::Malformed("string section out of bounds"))?;
    let (mut at, mut id) = (0usize, 1u32);
    while at < types.len() {
        let name_off = u32_at(types, at)? as usize;
        let info = u32_at(types, at + 4)?;
        let vlen = (info & 0xffff) as usize;
        let kind = (info >> 24) & 0x1f;
        if kind == KIND_FUNC {
            let here = strings.get(name_off..).unwrap_or_default();
            if here.starts_with(name) && here.get(name.len()) == Some(&0) {
                return Ok(Some(id));
            }
        }
        at += 12
            + match kind {
                KIND_INT | KIND_VAR | KIND_DECL_TAG => 4,
                KIND_ARRAY => 12,
                KIND_STRUCT | KIND_UNION | KIND_DATASEC | KIND_ENUM64 => 12 * vlen,
                KIND_ENUM | KIND_FUNC_PROTO => 8 * vlen,
                _ => 0,
            };
        id += 1;
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reads the host kernel's BTF: the offsets must exist and be plausible.
    #[test]
    fn host_kernel_offsets() {
        let Ok(Ok(btf)) = Btf::from_sys_fs() else {
            eprintln!("no /sys/kernel/btf/vmlinux here; skipping");
            return;
        };
        let offsets = program_offsets(&btf).expect("every member the programs need");
        let get = |name| offsets.iter().find(|(n, _)| *n == name).map(|(_, o)| *o);
        assert_eq!(get(carapace_common::globals::OFF_PATH_DENTRY), Some(8));
        assert_eq!(get(carapace_common::globals::OFF_QSTR_NAME), Some(8));
        let f_path = get(carapace_common::globals::OFF_FILE_F_PATH).expect("f_path");
        assert!(f_path > 0 && f_path < 256, "f_path at {f_path}");
        // procfs finds its process at the start of `proc_inode`; a terminal's session is
        // a member of `ctrl`, well inside `tty_struct`.
        assert_eq!(get(carapace_common::globals::OFF_PROC_INODE_PID), Some(0));
        let session = get(carapace_common::globals::OFF_TTY_SESSION).expect("tty session");
        assert!(
            session > 64 && session < 1024,
            "tty_struct.ctrl.session at {session}"
        );
        assert!(matches!(
            btf.member_path("tty_struct", &["ctrl", "no_such"]),
            Err(BtfError::NoMember(_, m)) if m == "ctrl.no_such"
        ));
        let enums = program_enums(&btf).expect("module enumerators");
        assert!(
            enums.iter().all(|(_, v)| *v == 2),
            "READING_MODULE and LOADING_MODULE are 2 on every kernel since 5.10: {enums:?}"
        );
        assert_eq!(btf.lsm_hook_params("file_open"), Some(1));
        assert_eq!(btf.lsm_hook_params("task_kill"), Some(4));
        assert_eq!(btf.lsm_hook_params("no_such_hook"), None);
        // The kfunc came with Linux 6.2; `struct seqcount` is older.
        let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
        let mut version = release
            .split(['.', '-'])
            .map(|n| n.parse::<u32>().unwrap_or(0));
        if (version.next(), version.next()) >= (Some(6), Some(2)) {
            let (kfunc, seqcount) = btf.seqcount_cast().expect("bpf_rdonly_cast and seqcount");
            assert!(kfunc > 0 && seqcount > 0 && kfunc != seqcount);
        }
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        assert!(Btf::parse(b"").is_err());
        assert!(Btf::parse(&[0x9f, 0xeb, 1, 0, 24, 0, 0, 0, 0xff, 0xff, 0xff, 0xff]).is_err());
    }
}
