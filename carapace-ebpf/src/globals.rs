//! Load-time constants the daemon fills in (`EbpfLoader::override_global`): the Carapace
//! cgroup root and struct member offsets read from the running kernel's BTF, because Rust
//! eBPF has no CO-RE relocations. They live in .rodata, so the verifier sees them as
//! constants and can prove the offset loads safe.

macro_rules! global {
    ($name:ident: $ty:ty) => {
        #[unsafe(no_mangle)]
        static $name: $ty = 0;
    };
}

global!(CGROUP_ROOT_LEVEL: u32);
global!(CGROUP_ROOT_ID: u64);
global!(OFF_FILE_F_PATH: u64);
global!(OFF_FILE_F_MODE: u64);
global!(OFF_FILE_F_INODE: u64);
global!(OFF_INODE_I_INO: u64);
global!(OFF_INODE_I_SB: u64);
global!(OFF_INODE_I_FSNOTIFY_MASK: u64);
global!(OFF_SB_S_DEV: u64);
global!(OFF_BPRM_FILE: u64);
global!(OFF_PATH_DENTRY: u64);
global!(OFF_DENTRY_D_NAME: u64);
global!(OFF_QSTR_NAME: u64);
global!(DAEMON_TGID: u32);
global!(OFF_TASK_TGID: u64);
global!(OFF_SB_S_MAGIC: u64);
global!(OFF_DENTRY_D_PARENT: u64);
global!(OFF_DENTRY_D_INODE: u64);
global!(READING_MODULE: u32);
global!(LOADING_MODULE: u32);
global!(OFF_MSGHDR_MSG_NAME: u64);
global!(OFF_UNIX_SOCK_PATH: u64);
global!(OFF_SOCKET_SK: u64);
global!(OFF_PATH_MNT: u64);
global!(OFF_TASK_FS: u64);
global!(OFF_FS_ROOT: u64);
global!(ADDR_RENAME_LOCK: u64);
global!(ADDR_MOUNT_LOCK: u64);
global!(BTF_SEQCOUNT: u32);
global!(OFF_FILE_F_FLAGS: u64);
global!(OFF_VFSMOUNT_MNT_ROOT: u64);
global!(OFF_MOUNT_MNT: u64);
global!(OFF_MOUNT_MNT_PARENT: u64);
global!(OFF_MOUNT_MNT_MOUNTPOINT: u64);
global!(OFF_TASK_CGROUPS: u64);
global!(OFF_CSS_SET_DFL_CGRP: u64);
global!(OFF_SOCK_CGROUP: u64);
global!(OFF_CGROUP_LEVEL: u64);
global!(OFF_CGROUP_ANCESTORS: u64);
global!(OFF_CGROUP_KN: u64);
global!(OFF_KERNFS_NODE_ID: u64);
global!(CGROUP_ANCESTOR_IDS: u64);
global!(OFF_UNIX_SOCK_ADDR: u64);
global!(OFF_SOCK_FAMILY: u64);
global!(OFF_MSGHDR_MSG_CONTROL: u64);
global!(OFF_MSGHDR_MSG_CONTROLLEN: u64);
global!(OFF_UNIX_ADDRESS_NAME: u64);
global!(OFF_DENTRY_D_SB: u64);
global!(OFF_SB_S_MOUNTS: u64);
global!(OFF_MOUNT_MNT_INSTANCE: u64);
global!(OFF_VFSMOUNT_MNT_SB: u64);
global!(OFF_PROC_INODE_PID: u64);
global!(OFF_PROC_INODE_VFS_INODE: u64);
global!(OFF_PID_TASKS: u64);
global!(OFF_TASK_PID_LINKS: u64);
global!(OFF_DENTRY_D_FSDATA: u64);
global!(OFF_TTY_SESSION: u64);
global!(OFF_INODE_I_MODE: u64);
global!(OFF_INODE_I_RDEV: u64);
global!(OFF_TASK_NSPROXY: u64);
global!(OFF_NSPROXY_IPC_NS: u64);
global!(OFF_SB_S_FS_INFO: u64);
global!(OFF_KEY_SERIAL: u64);

/// Reads a global without letting the compiler fold it to its placeholder value.
macro_rules! get {
    ($name:ident) => {
        // SAFETY: reading a plain static; volatile only stops constant folding.
        unsafe { core::ptr::read_volatile(&$name) }
    };
}

pub fn root_level() -> u32 {
    get!(CGROUP_ROOT_LEVEL)
}
pub fn root_id() -> u64 {
    get!(CGROUP_ROOT_ID)
}
pub fn file_f_path() -> usize {
    get!(OFF_FILE_F_PATH) as usize
}
pub fn file_f_mode() -> usize {
    get!(OFF_FILE_F_MODE) as usize
}
pub fn file_f_inode() -> usize {
    get!(OFF_FILE_F_INODE) as usize
}
pub fn inode_i_ino() -> usize {
    get!(OFF_INODE_I_INO) as usize
}
pub fn inode_i_sb() -> usize {
    get!(OFF_INODE_I_SB) as usize
}
pub fn inode_i_fsnotify_mask() -> usize {
    get!(OFF_INODE_I_FSNOTIFY_MASK) as usize
}
pub fn sb_s_dev() -> usize {
    get!(OFF_SB_S_DEV) as usize
}
pub fn bprm_file() -> usize {
    get!(OFF_BPRM_FILE) as usize
}
pub fn path_dentry() -> usize {
    get!(OFF_PATH_DENTRY) as usize
}
pub fn dentry_d_name() -> usize {
    get!(OFF_DENTRY_D_NAME) as usize
}
pub fn qstr_name() -> usize {
    get!(OFF_QSTR_NAME) as usize
}
pub fn daemon_tgid() -> u32 {
    get!(DAEMON_TGID)
}
pub fn task_tgid() -> usize {
    get!(OFF_TASK_TGID) as usize
}
pub fn sb_s_magic() -> usize {
    get!(OFF_SB_S_MAGIC) as usize
}
pub fn dentry_d_parent() -> usize {
    get!(OFF_DENTRY_D_PARENT) as usize
}
pub fn dentry_d_inode() -> usize {
    get!(OFF_DENTRY_D_INODE) as usize
}
pub fn reading_module() -> u32 {
    get!(READING_MODULE)
}
pub fn loading_module() -> u32 {
    get!(LOADING_MODULE)
}
pub fn msghdr_msg_name() -> usize {
    get!(OFF_MSGHDR_MSG_NAME) as usize
}
pub fn unix_sock_path() -> usize {
    get!(OFF_UNIX_SOCK_PATH) as usize
}
pub fn socket_sk() -> usize {
    get!(OFF_SOCKET_SK) as usize
}
pub fn path_mnt() -> usize {
    get!(OFF_PATH_MNT) as usize
}
pub fn task_fs() -> usize {
    get!(OFF_TASK_FS) as usize
}
pub fn fs_root() -> usize {
    get!(OFF_FS_ROOT) as usize
}
pub fn rename_lock() -> u64 {
    get!(ADDR_RENAME_LOCK)
}
pub fn mount_lock() -> u64 {
    get!(ADDR_MOUNT_LOCK)
}
pub fn btf_seqcount() -> u32 {
    get!(BTF_SEQCOUNT)
}
pub fn file_f_flags() -> usize {
    get!(OFF_FILE_F_FLAGS) as usize
}
pub fn vfsmount_mnt_root() -> usize {
    get!(OFF_VFSMOUNT_MNT_ROOT) as usize
}
pub fn mount_mnt() -> u64 {
    get!(OFF_MOUNT_MNT)
}
pub fn mount_mnt_parent() -> usize {
    get!(OFF_MOUNT_MNT_PARENT) as usize
}
pub fn mount_mnt_mountpoint() -> usize {
    get!(OFF_MOUNT_MNT_MOUNTPOINT) as usize
}
pub fn task_cgroups() -> usize {
    get!(OFF_TASK_CGROUPS) as usize
}
pub fn css_set_dfl_cgrp() -> usize {
    get!(OFF_CSS_SET_DFL_CGRP) as usize
}
pub fn sock_cgroup() -> usize {
    get!(OFF_SOCK_CGROUP) as usize
}
pub fn cgroup_level() -> usize {
    get!(OFF_CGROUP_LEVEL) as usize
}
pub fn cgroup_ancestors() -> usize {
    get!(OFF_CGROUP_ANCESTORS) as usize
}
pub fn cgroup_kn() -> usize {
    get!(OFF_CGROUP_KN) as usize
}
pub fn kernfs_node_id() -> usize {
    get!(OFF_KERNFS_NODE_ID) as usize
}
pub fn cgroup_ancestor_ids() -> bool {
    get!(CGROUP_ANCESTOR_IDS) != 0
}
pub fn unix_sock_addr() -> usize {
    get!(OFF_UNIX_SOCK_ADDR) as usize
}
pub fn unix_address_name() -> usize {
    get!(OFF_UNIX_ADDRESS_NAME) as usize
}
pub fn sock_family() -> usize {
    get!(OFF_SOCK_FAMILY) as usize
}
pub fn msghdr_msg_control() -> usize {
    get!(OFF_MSGHDR_MSG_CONTROL) as usize
}
pub fn msghdr_msg_controllen() -> usize {
    get!(OFF_MSGHDR_MSG_CONTROLLEN) as usize
}
pub fn dentry_d_sb() -> usize {
    get!(OFF_DENTRY_D_SB) as usize
}
pub fn sb_s_mounts() -> u64 {
    get!(OFF_SB_S_MOUNTS)
}
pub fn mount_mnt_instance() -> u64 {
    get!(OFF_MOUNT_MNT_INSTANCE)
}
pub fn vfsmount_mnt_sb() -> usize {
    get!(OFF_VFSMOUNT_MNT_SB) as usize
}
pub fn proc_inode_pid() -> usize {
    get!(OFF_PROC_INODE_PID) as usize
}
pub fn proc_inode_vfs_inode() -> usize {
    get!(OFF_PROC_INODE_VFS_INODE) as usize
}
pub fn pid_tasks() -> usize {
    get!(OFF_PID_TASKS) as usize
}
pub fn task_pid_links() -> usize {
    get!(OFF_TASK_PID_LINKS) as usize
}
pub fn dentry_d_fsdata() -> usize {
    get!(OFF_DENTRY_D_FSDATA) as usize
}
pub fn tty_session() -> usize {
    get!(OFF_TTY_SESSION) as usize
}
pub fn inode_i_mode() -> usize {
    get!(OFF_INODE_I_MODE) as usize
}
pub fn inode_i_rdev() -> usize {
    get!(OFF_INODE_I_RDEV) as usize
}
pub fn task_nsproxy() -> usize {
    get!(OFF_TASK_NSPROXY) as usize
}
pub fn nsproxy_ipc_ns() -> usize {
    get!(OFF_NSPROXY_IPC_NS) as usize
}
pub fn sb_s_fs_info() -> usize {
    get!(OFF_SB_S_FS_INFO) as usize
}
pub fn key_serial() -> usize {
    get!(OFF_KEY_SERIAL) as usize
}
