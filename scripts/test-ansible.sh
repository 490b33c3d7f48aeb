#!/usr/bin/env bash
# The Ansible collection's own checks, from `make test` (scripts/test.sh) or alone:
#   lint            ruff and mypy over the collection
#   sanity          ansible-test sanity (docs vs argument specs, pylint, import guard, yamllint, ...)
#   units           ansible-test units (modules and inventory plugin against an in-memory apiserver)
#   molecule        the Molecule scenario against a private `ironpool up` on this host's libvirtd
# With no argument, all four in that order. Needs the venv (`make venv`) and, for molecule,
# libvirtd (`make host`). ansible-test sanity installs its pinned linters from PyPI into its own
# venvs under ~/.ansible/test (the first run takes a minute).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
VENV="$ROOT/.venv"
COLLECTION="$ROOT/ansible_collection/ansible_collections/ironpool/iaas"
export PATH="$VENV/bin:$PATH"
export ANSIBLE_COLLECTIONS_PATH="$ROOT/ansible_collection"
export ANSIBLE_NOCOLOR=1 ANSIBLE_FORCE_COLOR=0 NO_COLOR=1 PY_COLORS=0
# The classes `ironpool up` seeds and the tiny image the scenario's machines boot.
export IRONPOOL_TEST_IMAGES="${IRONPOOL_TEST_IMAGES:-/var/cache/ironpool/test-images}"
# Never talk to an apiserver configured in this shell: every step brings its own.
unset IRONPOOL_SERVER IRONPOOL_TOKEN IRONPOOL_NAMESPACE IRONPOOL_CONFIG

step() { printf '\n==> %s\n' "$*"; }

# ansible-test bootstraps pip in its venvs by downloading get-pip.py from a host outside the
# package registries; this stand-in (looked up at the path below before any download) uses
# ensurepip and the machine's pip configuration instead.
offline_get_pip() {
  local cache="$HOME/.ansible/test/cache"
  mkdir -p "$cache"
  cat >"$cache/get_pip_24_2.py" <<'PY'
import ensurepip, importlib, os, runpy, sys
args = [a for a in sys.argv[1:] if a not in ("--no-setuptools", "--no-wheel")]
ensurepip.bootstrap()
os.environ.pop("PIP_CONFIG_FILE", None)  # ensurepip points it at os.devnull; keep the global pip.conf
importlib.invalidate_caches()
sys.argv = ["pip", "install"] + args
runpy.run_module("pip", run_name="__main__", alter_sys=True)
PY
}

lint() {
  step "ruff (collection)"
  ruff check ansible_collection
  step "mypy (collection)"
  MYPYPATH="$ROOT/ansible_collection" mypy -p ansible_collections.ironpool.iaas
}

sanity() {
  offline_get_pip
  step "ansible-test sanity"
  (cd "$COLLECTION" && ansible-test sanity --python 3.11 --requirements)
}

units() {
  step "ansible-test units"
  (cd "$COLLECTION" && ansible-test units --python 3.11)
}

molecule_test() {
  step "molecule test (scenario default: private ironpool up on qemu:///system)"
  bash scripts/build-tiny-image.sh "$IRONPOOL_TEST_IMAGES" >/dev/null
  (cd "$COLLECTION" && molecule test)
}

case "${1:-all}" in
  lint) lint ;;
  sanity) sanity ;;
  units) units ;;
  molecule) molecule_test ;;
  all) lint; sanity; units; molecule_test ;;
  *) echo "usage: $0 [lint|sanity|units|molecule]" >&2; exit 2 ;;
esac
