#!/bin/bash
# The kernel-overhead benchmark of `cargo xtask bench`, run inside the VM as root. Measures
# open+close with no programs, with programs but outside a session, inside a session with
# the kernel test rules, with the built-in packs and with 10,000 rules, and prints the ratios.
set -euo pipefail
bench=/opt/carapace-bench/openclose
n=${CARAPACE_BENCH_N:-100000}
target=/srv/bench/file
mkdir -p /srv/bench && echo bench >$target && chmod 644 $target

daemon_pids() {
    for p in /proc/[0-9]*; do
        if [ "$(cat "$p/comm" 2>/dev/null)" = carapaced ] && ! grep -q ') Z' "$p/stat" 2>/dev/null; then
            echo "${p#/proc/}"
        fi
    done
}

stop_daemon() {
    for pid in $(daemon_pids); do kill "$pid"; done
    while [ -n "$(daemon_pids)" ]; do sleep 0.1; done
}

start_daemon() {
    local t0
    t0=$(date +%s%N)
    carapaced --data-dir /var/lib/carapace --socket /run/carapace/carapace.sock --rules "$1" \
        >>/var/log/carapaced.log 2>&1 &
    until [ -S /run/carapace/carapace.sock ]; do sleep 0.05; done
    echo "bench: daemon with ${2:-$(grep -c '^  - ' "$1") rules} up in $(( ($(date +%s%N) - t0) / 1000000 )) ms (program load and verification under TCG included)"
}

session() {
    SUDO_UID=1000 SUDO_GID=1000 carapace run -- "$bench" "$n" "$target" 2>/dev/null
}

ratio() {
    awk -v a="$1" -v b="$2" 'BEGIN { printf "%+.1f %%", (a / b - 1) * 100 }'
}

# No programs: stop the daemon and remove its pins, which detaches the programs.
stop_daemon
rm -rf /sys/fs/bpf/carapace
base=$($bench "$n" "$target")
echo "bench: no programs:               $base ns per open+close"

start_daemon /etc/carapace/rules.yaml
outside=$($bench "$n" "$target")
inside=$(session)
echo "bench: programs, outside session: $outside ns ($(ratio "$outside" "$base"); budget +1 %)"
echo "bench: inside session, test rules: $inside ns ($(ratio "$inside" "$base"); budget +5 %)"

# The budget's own configuration: the built-in packs (a file with no rules of its own).
stop_daemon
packs=/tmp/rules-builtin.yaml
echo "version: 1" >$packs
start_daemon $packs "the built-in packs"
inside_packs=$(session)
echo "bench: inside session, built-in packs: $inside_packs ns ($(ratio "$inside_packs" "$base"); budget +5 %)"

stop_daemon
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
start_daemon $big
inside_big=$(session)
echo "bench: inside session, 10,000 rules: $inside_big ns ($(ratio "$inside_big" "$base"); budget +10 %)"
