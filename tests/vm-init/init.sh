#!/bin/bash
# /init of the Carapace test VM, written into the initramfs by `cargo xtask vm`
# (xtask/src/vm.rs). Mounts the kernel filesystems, creates the users, starts carapaced,
# runs /etc/carapace-vm/cmd.sh with bash as root and prints its exit status as
# CARAPACE-VM-EXIT:<status>, which the host turns into its own exit status.

export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export HOME=/root LANG=C.UTF-8 TERM=dumb
umask 022

mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mkdir -p /dev/pts /dev/shm
mount -t devpts devpts /dev/pts
mount -t tmpfs -o mode=1777 tmpfs /dev/shm
mount -t securityfs securityfs /sys/kernel/security
mount -t cgroup2 cgroup2 /sys/fs/cgroup
mount -t bpf bpf /sys/fs/bpf
mount -t tmpfs -o mode=1777 tmpfs /tmp
mount -t tmpfs -o mode=755 tmpfs /run
# Controllers for session limits (memory, pids); the root cgroup may always delegate.
for c in $(cat /sys/fs/cgroup/cgroup.controllers 2>/dev/null); do
    echo "+$c" >/sys/fs/cgroup/cgroup.subtree_control 2>/dev/null
done
ip link set lo up
# No network: tests that need DNS serve it themselves on 127.0.0.53 (tests/vm/dns.rs).
printf 'nameserver 127.0.0.53\noptions timeout:2 attempts:2\n' >/etc/resolv.conf
hostname carapace-vm
echo carapace-vm >/etc/hostname

cat >/etc/passwd <<'PASSWD'
root:x:0:0:root:/root:/bin/bash
agent:x:1000:1000:agent:/home/agent:/bin/bash
nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin
PASSWD
cat >/etc/group <<'GROUP'
root:x:0:
agent:x:1000:
nogroup:x:65534:
GROUP
mkdir -p /home/agent /var/lib/carapace /var/log /run/carapace
chown 1000:1000 /home/agent
chmod 755 /home/agent
printf '127.0.0.1 localhost carapace-vm\n::1 localhost\n' >/etc/hosts

. /etc/carapace-vm/config

finish() {
    echo
    echo "CARAPACE-VM-EXIT:$1"
    sync
    poweroff -f
    echo o >/proc/sysrq-trigger
    sleep 10
}

if [ "$CARAPACE_VM_DAEMON" = 1 ]; then
    daemon=(carapaced --data-dir /var/lib/carapace --socket /run/carapace/carapace.sock)
    if [ -f /etc/carapace/rules.yaml ]; then
        daemon+=(--rules /etc/carapace/rules.yaml)
    fi
    # Loading the programs takes seconds under TCG (up to a minute for 6.1 on a busy host).
    # Tests restart the daemon the same way: sh -c "$(cat daemon.cmd) >>LOG 2>&1 &"
    echo "${daemon[*]}" >/run/carapace/daemon.cmd
    "${daemon[@]}" >>/var/log/carapaced.log 2>&1 &
    pid=$!
    up=0
    for _ in $(seq 2400); do
        if [ -S /run/carapace/carapace.sock ]; then
            up=1
            break
        fi
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    if [ "$up" != 1 ]; then
        echo "carapace-vm: carapaced did not create /run/carapace/carapace.sock; its log:"
        cat /var/log/carapaced.log
        finish 125
    fi
fi

echo "CARAPACE-VM-START"
cd /root
bash /etc/carapace-vm/cmd.sh </dev/null
status=$?
if [ "$status" != 0 ] && [ "$CARAPACE_VM_DAEMON" = 1 ]; then
    echo "--- /var/log/carapaced.log ---"
    cat /var/log/carapaced.log
    echo "--- end of /var/log/carapaced.log ---"
fi
finish "$status"
