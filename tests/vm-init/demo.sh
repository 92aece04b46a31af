#!/bin/bash
# The demo of `cargo xtask demo`: runs inside the VM as root with carapaced started on
# rules/examples/demo.yaml, and shows an agent (uid 1000, through `carapace run`) being
# refused an SSH key by Layer 2 whichever way it asks, while ordinary files stay readable.

set -u
key=/home/agent/.ssh/id_ed25519
mkdir -p /home/agent/.ssh
cat >"$key" <<'KEY'
-----BEGIN OPENSSH PRIVATE KEY-----
(fake key for the Carapace demo)
-----END OPENSSH PRIVATE KEY-----
KEY
echo "agent's notes: nothing secret here" >/home/agent/notes.txt
chown -R 1000:1000 /home/agent
chmod 700 /home/agent/.ssh
chmod 600 "$key"

# `carapace run` started by root with SUDO_UID/SUDO_GID runs the command as that user.
agent() {
    local title=$1
    shift
    echo
    echo "=== agent: $title"
    echo "\$ $*"
    (cd /home/agent && SUDO_UID=1000 SUDO_GID=1000 carapace run -- "$@")
    echo "=== exit status: $?"
}

agent "read the SSH key with cat" cat "$key"
agent "read the SSH key from Python" python3 -c "print(open('$key').read())"
agent "copy the key somewhere else first" bash -c "cp $key /tmp/k && cat /tmp/k"
agent "send it to an untrusted network" curl -sS -m 5 http://127.66.0.1:8080/upload
agent "read the notes (allowed)" cat /home/agent/notes.txt

echo
echo "=== kernel denials recorded by carapaced:"
grep -i -E 'blocked|denied' /var/log/carapaced.log || echo "(none in /var/log/carapaced.log)"
