#!/bin/bash
# The kernel-overhead benchmark of `cargo xtask bench`, run inside the VM as root. Measures
# open+close of one file with no programs and with the programs attached, outside a session
# and inside one, under the kernel test rules, the built-in packs and 10,000 rules; then the
# same for a create+rename+unlink of a file (`OPENCLOSE_OPS=names`: the name hooks).
#
# Two baselines, because a session changes more than the programs: its process runs as the
# invoking user (uid 1000 here) in a cgroup with the memory and pids controllers, which
# alone cost ~8 % per open+close (memcg accounting of each `struct file`). The programs' own
# overhead is the session against the "agent" baseline: uid 1000 in a memory+pids cgroup at
# a session's depth, no programs — where an agent on a systemd machine already runs. The
# session against root in the root cgroup is printed too: what moving into a session costs
# in all.
#
# The clock (CARAPACE_BENCH_CLOCK, set by `cargo xtask bench`):
# - icount (default): QEMU counts guest instructions as nanoseconds (`xtask vm --icount`), so
#   each figure is instructions per open+close, whatever the host's load: rounds agree to
#   0.1, and only the kernel's own state (slab, RCU work) moves a configuration by ~1 %
#   between daemon restarts. One repetition of three rounds is plenty.
# - wall: TCG's wall time, which the host's load and QEMU's translation caches swing by
#   ±10 %: each figure is the fastest of ROUNDS rounds (noise only adds time), and each
#   configuration is measured REPS times, alternating with its baselines, so that a slow
#   stretch spoils one repetition instead of one configuration. The median is reported.
#
# "No programs" means the kernel has dropped them: unpinning the links frees them only after
# an RCU grace period and the trampolines' teardown, seconds under TCG, and a baseline taken
# before that measures the programs themselves.
set -euo pipefail
bench=/opt/carapace-bench/openclose
clock=${CARAPACE_BENCH_CLOCK:-wall}
if [ "$clock" = icount ]; then
    unit="guest instructions"
    n=${CARAPACE_BENCH_N:-5000}
    reps=${CARAPACE_BENCH_REPS:-1}
    export OPENCLOSE_ROUNDS=${CARAPACE_BENCH_ROUNDS:-3}
else
    unit="ns"
    n=${CARAPACE_BENCH_N:-20000}
    reps=${CARAPACE_BENCH_REPS:-3}
    export OPENCLOSE_ROUNDS=${CARAPACE_BENCH_ROUNDS:-15}
fi
export OPENCLOSE_STAT=min
target=/srv/bench/file
mkdir -p /srv/bench && echo bench >$target && chmod 644 $target
names_dir=/srv/bench/names
mkdir -p $names_dir && chmod 777 $names_dir

daemon_pids() {
    for p in /proc/[0-9]*; do
        if [ "$(cat "$p/comm" 2>/dev/null)" = carapaced ] && ! grep -q ') Z' "$p/stat" 2>/dev/null; then
            echo "${p#/proc/}"
        fi
    done
}

# JIT-compiled programs and trampolines in the kernel (this VM runs no other BPF).
programs_in_kernel() {
    grep -c '\[bpf\]$' /proc/kallsyms || true
}

# Stops the daemon and removes its pins, then waits until the kernel has dropped the programs.
stop_daemon() {
    local waited=0
    for pid in $(daemon_pids); do kill "$pid"; done
    while [ -n "$(daemon_pids)" ]; do sleep 0.1; done
    rm -rf /sys/fs/bpf/carapace
    while [ "$(programs_in_kernel)" != 0 ]; do
        if [ $waited -ge 600 ]; then
            echo "bench: the kernel still holds $(programs_in_kernel) BPF symbols 60 s after the pins went" >&2
            exit 1
        fi
        sleep 0.1
        waited=$((waited + 1))
    done
}

start_daemon() {
    local t0
    t0=$(date +%s%N)
    carapaced --data-dir /var/lib/carapace --socket /run/carapace/carapace.sock --rules "$1" \
        >>/var/log/carapaced.log 2>&1 &
    until [ -S /run/carapace/carapace.sock ]; do sleep 0.05; done
    started_ms=$(( ($(date +%s%N) - t0) / 1000000 ))
}

agent_cgroup=/sys/fs/cgroup/carapace-bench/agent
mkdir -p "${agent_cgroup%/*}"
echo "+memory +pids" >"${agent_cgroup%/*}/cgroup.subtree_control"
mkdir -p $agent_cgroup

# uid 1000 in the agent cgroup, no capabilities, as a session's process but without one.
agent_baseline() {
    sh -c "echo \$\$ >$agent_cgroup/cgroup.procs &&
        exec setpriv --reuid 1000 --regid 1000 --clear-groups $bench $n $path"
}

session() {
    SUDO_UID=1000 SUDO_GID=1000 carapace run -- "$bench" "$n" "$path" 2>/dev/null
}

# A session that waits on a FIFO, so that the programs are attached while the bench measures
# a process outside it: they are attached only while some session runs. No polling, so it
# adds no instructions of its own to the measured window.
fifo=/tmp/bench-session-fifo
# Measuring starts once the session's shell waits and everything its start set off has
# settled: under icount every instruction of the guest counts, the daemon's and the
# session's start-up too.
start_idle_session() {
    rm -f $fifo /tmp/bench-session-ready
    mkfifo -m 666 $fifo
    SUDO_UID=1000 SUDO_GID=1000 carapace run -- \
        sh -c "echo >/tmp/bench-session-ready; read x <$fifo" 2>/dev/null &
    idle_session=$!
    until [ -e /tmp/bench-session-ready ] && [ -e /sys/fs/bpf/carapace/links/file_open ]; do
        sleep 0.05
    done
    sleep 2
}

stop_idle_session() {
    echo done >$fifo
    wait "$idle_session"
}

ratio() {
    awk -v a="$1" -v b="$2" 'BEGIN { printf "%+.1f %%", (a / b - 1) * 100 }'
}

# The median of the arguments.
median() {
    printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'
}

# One figure of the open+close loop, or of create+rename+unlink (`names`), by `runner`
# (`$bench`, `agent_baseline` or `session`).
figure() {
    local kind=$1 runner=$2
    if [ "$kind" = names ]; then
        OPENCLOSE_OPS=names path=$names_dir "$runner"
    else
        path=$target "$runner"
    fi
}

plain() {
    $bench "$n" "$path"
}

# measure NAME RULES-FILE BUDGET: REPS alternations of baselines and programs, each phase
# measuring both loops (one daemon start per repetition).
measure() {
    local name=$1 rules=$2 budget=$3 rep kind what
    declare -A base agent idle outside inside
    declare -A r_idle r_out r_in r_root lines
    for rep in $(seq 1 "$reps"); do
        stop_daemon
        for kind in open names; do base[$kind]=$(figure $kind plain); done
        for kind in open names; do agent[$kind]=$(figure $kind agent_baseline); done
        start_daemon "$rules"
        for kind in open names; do idle[$kind]=$(figure $kind plain); done
        start_idle_session
        for kind in open names; do outside[$kind]=$(figure $kind plain); done
        for kind in open names; do inside[$kind]=$(figure $kind session); done
        stop_idle_session
        for kind in open names; do
            lines[$kind]+="base ${base[$kind]}, agent ${agent[$kind]}, no session ${idle[$kind]}, outside one ${outside[$kind]}, inside ${inside[$kind]}"$'\n'
            r_idle[$kind]+=" $(awk -v a="${idle[$kind]}" -v b="${base[$kind]}" 'BEGIN { print a / b }')"
            r_out[$kind]+=" $(awk -v a="${outside[$kind]}" -v b="${base[$kind]}" 'BEGIN { print a / b }')"
            r_in[$kind]+=" $(awk -v a="${inside[$kind]}" -v b="${agent[$kind]}" 'BEGIN { print a / b }')"
            r_root[$kind]+=" $(awk -v a="${inside[$kind]}" -v b="${base[$kind]}" 'BEGIN { print a / b }')"
        done
    done
    # Under icount the guest clock counts instructions and skips idle time: no start-up time.
    if [ "$clock" = wall ]; then
        echo "bench: $name: daemon up in $started_ms ms (program load and verification under TCG)"
    fi
    for kind in open names; do
        if [ $kind = open ]; then what=open+close; else what=create+rename+unlink; fi
        while IFS= read -r l; do
            [ -n "$l" ] && echo "bench: $name: $unit per $what: $l"
        done <<<"${lines[$kind]}"
        # shellcheck disable=SC2086
        echo "bench: $name: $what: daemon running, no session (programs loaded, not attached): $(ratio "$(median ${r_idle[$kind]})" 1) (budget +1 %)"
        # shellcheck disable=SC2086
        echo "bench: $name: $what: outside a session while one runs (programs attached): $(ratio "$(median ${r_out[$kind]})" 1) (budget +1 %)"
        # shellcheck disable=SC2086
        echo "bench: $name: $what: inside a session: $(ratio "$(median ${r_in[$kind]})" 1) vs the agent baseline (budget $budget); $(ratio "$(median ${r_root[$kind]})" 1) vs root in the root cgroup"
    done
}

packs=/tmp/rules-builtin.yaml
echo "version: 1" >$packs
big=/tmp/rules-10k.yaml
{
    echo "version: 1"
    echo "builtin: none"
    echo "rules:"
    for i in $(seq 1 5000); do
        echo "  - block: \"/bench/deny/file-$i.txt\""
        echo "  - block: \"/bench/tree-$i/**\""
    done
} >$big

# Connect overhead inside a session with 1,000 learned addresses (issue 19): a UDP
# socket+connect+close to 198.18.0.1:9 in a session that looked b0…b999.bench.test up first
# (through its resolver, from this DNS server: bN.bench.test is 198.18.N/256.N%256), against
# the same loop in a session that looked nothing up; both under the test rules, whose
# `tls: sni` rule makes every address a session learns an entry of the kernel's map.
# Repeated (CARAPACE_BENCH_CONNECT_REPS, default 5: one repetition moved by ~1 % between
# runs), each process waiting CARAPACE_BENCH_SETTLE seconds (default 3) before its loop, so
# that the daemon's work on the session's start and on the lookups is over (`-icount`
# counts it); the median and the spread of the ratios are reported.
connect_measure() {
    local rep learned fresh agent r_learned="" r_fresh=""
    local reps=${CARAPACE_BENCH_CONNECT_REPS:-5}
    export OPENCLOSE_SETTLE=${CARAPACE_BENCH_SETTLE:-3}
    ip addr add 198.18.0.1/15 dev lo 2>/dev/null || true
    python3 - <<'PY' &
import socket, struct
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("127.0.0.53", 53))
while True:
    q, peer = s.recvfrom(1500)
    at, labels = 12, []
    while q[at]:
        labels.append(q[at + 1:at + 1 + q[at]].decode().lower())
        at += 1 + q[at]
    end = at + 5
    qtype = struct.unpack(">H", q[at + 1:at + 3])[0]
    name = ".".join(labels)
    out = bytearray(q[:end])
    out[2], out[3] = 0x80 | (q[2] & 1), 0x80
    out[8:12] = b"\0\0\0\0"
    if name.endswith(".bench.test") and name[1:-11].isdigit() and qtype == 1:
        i = int(name[1:-11])
        out[6:8] = b"\0\1"
        out += bytes([0xC0, 12, 0, 1, 0, 1, 0, 0, 0x0E, 0x10, 0, 4, 198, 18, i // 256, i % 256])
    else:
        out[6:8] = b"\0\0"
    s.sendto(bytes(out), peer)
PY
    local dns=$!
    stop_daemon
    start_daemon /etc/carapace/rules.yaml
    for rep in $(seq 1 "$reps"); do
        agent=$(OPENCLOSE_OPS=connect path=198.18.0.1:9 agent_baseline)
        fresh=$(OPENCLOSE_OPS=connect path=198.18.0.1:9 session)
        learned=$(OPENCLOSE_OPS=connect OPENCLOSE_LEARN=1000 path=198.18.0.1:9 session)
        echo "bench: connect: $unit per socket+connect+close: agent $agent, inside a session $fresh, inside one with 1,000 learned addresses $learned"
        r_learned+=" $(awk -v a="$learned" -v b="$fresh" 'BEGIN { print a / b }')"
        r_fresh+=" $(awk -v a="$fresh" -v b="$agent" 'BEGIN { print a / b }')"
    done
    kill $dns
    unset OPENCLOSE_SETTLE
    # shellcheck disable=SC2086
    echo "bench: connect: inside a session: $(ratio "$(median $r_fresh)" 1) vs the agent baseline ($(spread $r_fresh))"
    # shellcheck disable=SC2086
    echo "bench: connect: inside a session with 1,000 learned addresses: $(ratio "$(median $r_learned)" 1) vs inside one with none ($(spread $r_learned); budget +1 %)"
}

# The lowest and highest of ratios, as percentages.
spread() {
    printf '%s\n' "$@" | sort -g | awk 'NR == 1 { lo = $1 } { hi = $1 } END { printf "%+.1f … %+.1f %%", (lo - 1) * 100, (hi - 1) * 100 }'
}

if [ "${CARAPACE_BENCH_ONLY:-}" = connect ]; then
    connect_measure
    exit 0
fi
measure "test rules ($(grep -c '^  - ' /etc/carapace/rules.yaml))" /etc/carapace/rules.yaml "+5 %"
measure "built-in packs" $packs "+5 %"
measure "10,000 rules" $big "+10 %"
connect_measure
