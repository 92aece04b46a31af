# Self-protection attacks, run by tests/vm/self_protection.rs as root with every capability:
#   python3 self_protection.py CGROUP_DIR|- DAEMON_PID
# With a cgroup directory the script first moves itself into that session cgroup (from
# outside, where nothing stops it), so what answers is the kernel hook, not missing
# privileges. Prints one `name=errno` line per attack (0: it worked).
import ctypes
import os
import signal
import struct
import sys

libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
cgroup, daemon = sys.argv[1], int(sys.argv[2])
inside = cgroup != "-"
if inside:
    with open(cgroup + "/cgroup.procs", "w") as f:
        f.write(str(os.getpid()))

AT_FDCWD = -100


def syscall(nr, *args):
    # Variadic: every integer must travel as a full long.
    args = [ctypes.c_long(a) if isinstance(a, int) else a for a in args]
    r = libc.syscall(ctypes.c_long(nr), *args)
    if r < 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))
    return r


def report(name, attack):
    try:
        attack()
        print(f"{name}=0", flush=True)
    except OSError as e:
        print(f"{name}={e.errno}", flush=True)


def kill():
    os.kill(daemon, signal.SIGCONT)


def ptrace_read():
    with open(f"/proc/{daemon}/environ", "rb") as f:
        f.read()


def bpf_map_create():
    attr = ctypes.create_string_buffer(struct.pack("IIII", 2, 4, 4, 1).ljust(128, b"\0"))
    os.close(syscall(321, 0, attr, 128))


def bpf_obj_get():
    path = ctypes.create_string_buffer(b"/sys/fs/bpf/carapace/maps/SESSIONS")
    attr = ctypes.create_string_buffer(
        struct.pack("QII", ctypes.addressof(path), 0, 0).ljust(128, b"\0"))
    os.close(syscall(321, 7, attr, 128))


def mount_tmpfs():
    syscall(165, b"none", b"/mnt/sp-new", b"tmpfs", 0, None)
    syscall(166, b"/mnt/sp-new", 0)


def move_mount():
    fd = syscall(428, AT_FDCWD, b"/mnt/sp-keep", 1)  # open_tree(OPEN_TREE_CLONE)
    try:
        syscall(429, fd, b"", AT_FDCWD, b"/mnt/sp-target", 4)  # MOVE_MOUNT_F_EMPTY_PATH
        syscall(166, b"/mnt/sp-target", 0)
    finally:
        os.close(fd)


def pivot_root():
    syscall(155, b"/mnt/sp-keep", b"/mnt/sp-keep/old")


def umount():
    syscall(166, b"/mnt/sp-keep", 0)


def finit_module():
    fd = os.open("/bin/true", os.O_RDONLY)
    try:
        syscall(313, fd, b"", 0)
    finally:
        os.close(fd)


def init_module():
    image = ctypes.create_string_buffer(b"\x7fELF".ljust(256, b"\0"))
    syscall(175, image, 256, b"")


def clone_into_cgroup():
    fd = os.open("/sys/fs/cgroup", os.O_RDONLY | os.O_DIRECTORY)
    try:
        args = ctypes.create_string_buffer(
            struct.pack("11Q", 0x200000000, 0, 0, 0, signal.SIGCHLD, 0, 0, 0, 0, 0, fd))
        pid = syscall(435, args, 88)
        if pid == 0:
            os._exit(0)
        os.waitpid(pid, 0)
    finally:
        os.close(fd)


def write_daemon_binary():
    with open("/usr/local/sbin/carapaced", "ab"):
        pass


def read_data_dir():
    os.listdir("/var/lib/carapace")


def leave_cgroup():
    with open("/sys/fs/cgroup/cgroup.procs", "w") as f:
        f.write(str(os.getpid()))


def unpin():
    os.unlink("/sys/fs/bpf/carapace/links/file_open")


def rename_pins():
    os.rename("/sys/fs/bpf/carapace", "/sys/fs/bpf/carapace-moved")


def rewrite(path):
    # The value it holds, written back: outside a session this changes nothing.
    with open(path) as f:
        value = f.read()
    with open(path, "w") as f:
        f.write(value)


report("kill", kill)
report("ptrace", ptrace_read)
report("bpf_map_create", bpf_map_create)
report("bpf_obj_get", bpf_obj_get)
report("mount", mount_tmpfs)
report("move_mount", move_mount)
if inside:
    # Outside a session pivot_root would fail on the initramfs root anyway (EINVAL), or
    # worse, succeed: only the refusal inside is checked.
    report("pivot_root", pivot_root)
report("umount", umount)
report("finit_module", finit_module)
report("init_module", init_module)
report("clone_into_cgroup", clone_into_cgroup)
report("write_daemon_binary", write_daemon_binary)
report("read_data_dir", read_data_dir)
report("leave_cgroup", leave_cgroup)
if inside:
    # Outside a session these would really unpin (a daemon restart would then not adopt).
    report("unpin", unpin)
    report("rename_pins", rename_pins)
report("core_pattern", lambda: rewrite("/proc/sys/kernel/core_pattern"))
report("modprobe", lambda: rewrite("/proc/sys/kernel/modprobe"))
