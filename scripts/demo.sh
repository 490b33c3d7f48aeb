#!/usr/bin/env bash
# The README's main job (`make demo`, after scripts/setup-host.sh and the venv): build the tiny
# image, start `ironpool up` in the background, apply examples/manifests/ and show the Machine
# Running on this host's pool, with what its guest printed on the serial console.
#   IRONPOOL_DATA_DIR  data directory (default: /var/lib/ironpool as root, ~/.local/share/ironpool else)
#   IRONPOOL_LISTEN    apiserver address (default 127.0.0.1:6443)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
IRONPOOL="$ROOT/.venv/bin/ironpool"
if [ "$(id -u)" = 0 ]; then default_dir=/var/lib/ironpool; else default_dir="${XDG_DATA_HOME:-$HOME/.local/share}/ironpool"; fi
DATA_DIR=${IRONPOOL_DATA_DIR:-$default_dir}
LISTEN=${IRONPOOL_LISTEN:-127.0.0.1:6443}
OUT="$DATA_DIR/logs/up.out"
INIT_LINE="ironpool-tiny-image: init started"

step() { printf '\n==> %s\n' "$*"; }
fail() { echo "demo: $*" >&2; exit 1; }

mkdir -p "$DATA_DIR/images" "$DATA_DIR/logs"
step "building the tiny image (Debian cloud kernel + busybox initramfs)"
bash scripts/build-tiny-image.sh "$DATA_DIR/images"

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
else
  step "starting: ironpool up --data-dir $DATA_DIR --listen $LISTEN   (output: $OUT)"
  nohup "$IRONPOOL" up --data-dir "$DATA_DIR" --listen "$LISTEN" >"$OUT" 2>&1 </dev/null &
  up_pid=$!
  for _ in $(seq 1 1200); do
    grep -q "ironpool is up" "$OUT" 2>/dev/null && break
    kill -0 "$up_pid" 2>/dev/null || { cat "$OUT" >&2; fail "ironpool up exited; see $DATA_DIR/logs/ironpool.log"; }
    sleep 0.1
  done
  grep -q "ironpool is up" "$OUT" || { cat "$OUT" >&2; fail "ironpool up was not ready within 120s"; }
  cat "$OUT"
fi

step "ironpool apply -f examples/manifests/"
"$IRONPOOL" apply -f examples/manifests/

step "ironpool wait machine/web --for=jsonpath={.status.state}=Running --timeout=120s"
"$IRONPOOL" wait machine/web --for=jsonpath='{.status.state}=Running' --timeout=120s

step "ironpool get machines -o wide"
"$IRONPOOL" get machines -o wide
step "ironpool get machinepools -o wide"
"$IRONPOOL" get machinepools -o wide
step "ironpool get volumes -o wide"
"$IRONPOOL" get volumes -o wide

machine_id=$("$IRONPOOL" get machine web -o json | "$ROOT/.venv/bin/python" -c \
  'import json,sys; print(json.load(sys.stdin)["status"]["machineID"].split("://")[-1])')
console="$DATA_DIR/machine-runtime/machines/$machine_id/console.log"
step "the guest's serial console ($console)"
for _ in $(seq 1 600); do
  grep -q "$INIT_LINE" "$console" 2>/dev/null && break
  sleep 0.1
done
grep -q "$INIT_LINE" "$console" 2>/dev/null || fail "the guest did not print its init line within 60s"
tail -n 5 "$console"

cat <<EOF

Done: Machine web runs as libvirt domain ironpool-$machine_id (virsh -c qemu:///system list).
ironpool up is still running with PID $up_pid (output: $OUT, log: $DATA_DIR/logs/ironpool.log).
  Try:   .venv/bin/ironpool describe machine web
         .venv/bin/ironpool delete -f examples/manifests/web.yaml
  Stop:  kill $up_pid      (running 'ironpool up' again resumes with the same state)
EOF
