#!/usr/bin/env bash
# A multi-host ironpool rig on this machine: 3 etcd members, 2 apiservers (HTTPS), 2 leader-elected
# schedulers, and 3 hosts joined with `ironpool join` (one libvirtd, a storage pool and pool name each).
#
#   scripts/rig.sh up      start it and print where everything is (client config, kubeconfig, logs)
#   scripts/rig.sh status  what runs, where, and which scheduler leads
#   scripts/rig.sh down    stop it and remove every domain, volume, storage pool and file it made
#
# Options after the command: --dir DIR (default $IRONPOOL_RIG_DIR or /var/tmp/ironpool-rig),
# --hosts N, --images DIR. It runs `ironpool rig` (ironpool/rig/) from the checkout's virtualenv.
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${VENV:-$REPO/.venv}"
if [ ! -x "$VENV/bin/ironpool" ]; then
  echo "no virtualenv at $VENV: run 'make venv' first" >&2
  exit 1
fi
if [ $# -lt 1 ]; then
  sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
fi
exec "$VENV/bin/ironpool" rig "$@"
