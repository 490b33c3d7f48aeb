#!/usr/bin/env bash
# The README's main job (`make demo`, after scripts/setup-host.sh and the venv): build the Debian 12
# image (once; later runs find it cached), start `ironpool up` in the background with its local OCI
# registry, publish the image there, declare the example machines from it with `ansible-playbook
# examples/ansible/site.yml` (the ironpool.iaas collection from this repository), which then
# configures them over SSH through the machines inventory - facts, a page, a systemd service - and
# checks that the service answers; show them Running on this host's pool, and print how long it took
# from the start to the service answering.
#   IRONPOOL_DATA_DIR       data directory (default: /var/lib/ironpool as root, ~/.local/share/ironpool else)
#   IRONPOOL_LISTEN         apiserver address (default 127.0.0.1:6443)
#   IRONPOOL_REGISTRY_PORT  the local registry's port on 127.0.0.1 (default 5000)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
IRONPOOL="$ROOT/.venv/bin/ironpool"
if [ "$(id -u)" = 0 ]; then default_dir=/var/lib/ironpool; else default_dir="${XDG_DATA_HOME:-$HOME/.local/share}/ironpool"; fi
DATA_DIR=${IRONPOOL_DATA_DIR:-$default_dir}
LISTEN=${IRONPOOL_LISTEN:-127.0.0.1:6443}
REGISTRY=127.0.0.1:${IRONPOOL_REGISTRY_PORT:-5000}
IMAGE="$REGISTRY/os/debian:12"
OUT="$DATA_DIR/logs/up.out"
START=$(date +%s.%N)
elapsed() { awk -v s="$START" -v e="$(date +%s.%N)" 'BEGIN { printf "%.0f", e - s }'; }

step() { printf '\n==> %s\n' "$*"; }
fail() { echo "demo: $*" >&2; exit 1; }

mkdir -p "$DATA_DIR/images" "$DATA_DIR/logs"
step "ironpool image build debian-12   (mmdebstrap from Debian's mirror; cached once built)"
"$IRONPOOL" image build debian-12 --images "$DATA_DIR/images"
image_ready=$(elapsed)

# An `ironpool up` already serving this data dir (a second `make demo`) is reused as it is.
up_pid=""
if [ -s "$DATA_DIR/up.lock" ]; then
  pid=$(head -n1 "$DATA_DIR/up.lock")
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null && tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q ' up '; then
    up_pid=$pid
  fi
fi
if [ -n "$up_pid" ]; then
  step "ironpool up is already running (PID $up_pid); using it"
  curl -fsS -o /dev/null "http://$REGISTRY/v2/" ||
    fail "no registry answers on $REGISTRY: stop ironpool up (PID $up_pid) and run make demo again, which starts it with --registry"
else
  step "starting: ironpool up --data-dir $DATA_DIR --listen $LISTEN --registry ${REGISTRY##*:}   (output: $OUT)"
  nohup "$IRONPOOL" up --data-dir "$DATA_DIR" --listen "$LISTEN" --registry "${REGISTRY##*:}" >"$OUT" 2>&1 </dev/null &
  up_pid=$!
  for _ in $(seq 1 1200); do
    grep -q "ironpool is up" "$OUT" 2>/dev/null && break
    kill -0 "$up_pid" 2>/dev/null || { cat "$OUT" >&2; fail "ironpool up exited; see $DATA_DIR/logs/ironpool.log"; }
    sleep 0.1
  done
  grep -q "ironpool is up" "$OUT" || { cat "$OUT" >&2; fail "ironpool up was not ready within 120s"; }
  cat "$OUT"
fi

step "ironpool image push $IMAGE $DATA_DIR/images/debian-12.qcow2   (IronCore's image format; what is there already is not sent again)"
"$IRONPOOL" image push "$IMAGE" "$DATA_DIR/images/debian-12.qcow2"

# The collection straight from the repository; the modules find the apiserver in the client
# configuration `ironpool up` wrote.
export ANSIBLE_COLLECTIONS_PATH="$ROOT/ansible_collection" ANSIBLE_LOCALHOST_WARNING=false ANSIBLE_INVENTORY_UNPARSED_WARNING=false
step "ansible-playbook -i examples/ansible/machines.ironpool.yml examples/ansible/site.yml -e image=$IMAGE   (classes, a network, a volume, two Debian machines from the registry; then a systemd service on each, configured by Ansible)"
"$ROOT/.venv/bin/ansible-playbook" -i examples/ansible/machines.ironpool.yml examples/ansible/site.yml -e "image=$IMAGE"
answered=$(elapsed)

step "ironpool get machines -o wide"
"$IRONPOOL" get machines -o wide
step "ironpool get machinepools -o wide"
"$IRONPOOL" get machinepools -o wide
step "ironpool get volumes -o wide"
"$IRONPOOL" get volumes -o wide

machine_id=$("$IRONPOOL" get machine web-1 -o json | "$ROOT/.venv/bin/python" -c \
  'import json,sys; print(json.load(sys.stdin)["status"]["machineID"].split("://")[-1])')
console="$DATA_DIR/machine-runtime/machines/$machine_id/console.log"
step "web-1's serial console, last lines ($console)"
tail -n 5 "$console" 2>/dev/null || true

step "time from the start of make demo to the service answering on every machine: ${answered}s (the image was ready after ${image_ready}s)"
cat <<EOF

Done: Machines web-1 and web-2 run Debian 12 from $IMAGE as libvirt domains (virsh -c qemu:///system
list); web-1 is ironpool-$machine_id. Each has an address on the Network lab, answers SSH on a port of 127.0.0.1
with the key cloud-init handed over, and serves a page from the systemd service Ansible set up.
ironpool up is still running with PID $up_pid (output: $OUT, log: $DATA_DIR/logs/ironpool.log).
  SSH:       .venv/bin/ironpool ssh web-1   (or: ironpool ssh web-1 -- systemctl status hello)
  Browser:   https://$LISTEN/ui/   (the web console: sign in with the token in $DATA_DIR/tokens.csv; the CA is $DATA_DIR/pki/ca.crt)
  Again:     ANSIBLE_COLLECTIONS_PATH=ansible_collection .venv/bin/ansible-playbook -i examples/ansible/machines.ironpool.yml examples/ansible/site.yml -e image=$IMAGE   (0 changed)
  Preview:   ... examples/ansible/site.yml --check --diff
  Inventory: ANSIBLE_COLLECTIONS_PATH=ansible_collection .venv/bin/ansible-inventory -i examples/ansible/machines.ironpool.yml --graph
  Tear down: ANSIBLE_COLLECTIONS_PATH=ansible_collection .venv/bin/ansible-playbook examples/ansible/teardown.yml
  Stop:      .venv/bin/ironpool down --data-dir $DATA_DIR   (running 'ironpool up' again resumes)
  Remove:    .venv/bin/ironpool down --data-dir $DATA_DIR --purge   (its domains, volumes, storage pool, data dir)
EOF
