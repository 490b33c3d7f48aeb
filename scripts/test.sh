#!/usr/bin/env bash
# Every test: lint (ruff, mypy on core/), then pytest over unit, store, apiserver, client, CLI,
# IRI, real libvirt/QEMU runtimes, scheduler and poollets. Called by `make test` and .ci/run.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=.venv

echo "==> ruff"
"$VENV/bin/ruff" check core pulumi_provider tests bench
echo "==> mypy (core/)"
"$VENV/bin/mypy"

echo "==> pytest"
# The project's own modules as .pyc too (the venv's are compiled when it is made; see the Makefile):
# every process the tests start imports them, and PYTHONDONTWRITEBYTECODE may forbid caching them.
"$VENV/bin/python" -m compileall -q -j 0 core pulumi_provider >/dev/null
# Two workers, each module whole on one of them (its module fixtures, such as one `ironpool up`, serve
# all its tests), and the modules that start many guests at once (marker `guests`) one after another
# on one worker, started first: tests/helpers/worker_groups.py makes the groups and their order.
# PYTEST_WORKERS=0 runs everything in this process. Tests that probe response times under an attack
# (marker `latency`) run afterwards on their own, with nothing else loading the cores; pytest's exit 5
# there only means the arguments selected none.
set +e
"$VENV/bin/pytest" -ra --durations=40 -n "${PYTEST_WORKERS:-2}" --dist loadgroup --no-loadscope-reorder \
  -m "not latency" "$@"
rc=$?
if [ "$rc" -eq 0 ]; then
  echo "==> pytest (latency, alone)"
  "$VENV/bin/pytest" -ra -m latency "$@"
  latency_rc=$?
  [ "$latency_rc" -eq 5 ] || rc=$latency_rc
fi
set -e
# The Ansible collection (ruff/mypy, ansible-test sanity and units, Molecule), once pytest passed.
[ "$rc" -ne 0 ] || bash scripts/test-ansible.sh || rc=$?
# pytest's exit 5 means no test ran: that is a failure of the suite, not a pass.
exit $rc
