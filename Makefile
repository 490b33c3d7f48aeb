# The two commands of the README: `make demo` and `make test`.
# Our own runs install exactly what uv.lock pins (every extra); `make lock` refreshes the lock within
# pyproject.toml's ranges. uv itself comes from PyPI by hash, into .venv-tools.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
TOOLS := .venv-tools
UV := $(TOOLS)/bin/uv
STAMP := $(VENV)/.synced
# uv uses this machine's Python, never one it downloads; UV_NO_CACHE=1 makes it fetch everything anew.
export UV_PYTHON_DOWNLOADS := never

.PHONY: host venv lock demo test lint stubs clean rig rig-down chaos

host:
	bash scripts/setup-host.sh

$(UV): scripts/uv-requirements.txt
	$(PYTHON) -m venv --clear $(TOOLS)
	$(TOOLS)/bin/pip install -q --disable-pip-version-check --require-hashes -r scripts/uv-requirements.txt
	touch $(UV)

# --locked: refuse a lock that no longer matches pyproject.toml (run `make lock`) instead of
# resolving anew; --all-extras: the front ends, etcd and the test tools; exact: nothing else stays.
# --compile-bytecode: every process starts from .pyc files. Without them, where PYTHONDONTWRITEBYTECODE
# is set, each start compiles every module it imports anew: half of an apiserver's start-up CPU, paid
# by every process the demo and the tests start.
$(STAMP): pyproject.toml uv.lock $(UV)
	$(UV) sync --locked --all-extras --compile-bytecode --python $(PYTHON)
	touch $(STAMP)

venv: $(STAMP)

# The newest versions pyproject.toml's ranges allow, written to uv.lock (commit it with what it fixes).
lock: $(UV)
	$(UV) lock --upgrade --python $(PYTHON)

# Main job: a fresh machine to a running VM declared by IaC.
demo: host venv
	bash scripts/demo.sh

# Every test, on real libvirtd/QEMU, etcd and sshd.
test: host venv
	bash scripts/test.sh

# A multi-host rig on this machine (etcd x3, apiservers x2, schedulers x2, 3 joined hosts);
# `make rig-down` removes it. See scripts/rig.sh.
rig: host venv
	bash scripts/rig.sh up

rig-down: venv
	bash scripts/rig.sh down

# Ten minutes of faults on a rig while Ansible declares and deletes Machines; prints the invariants.
chaos: host venv
	$(PY) bench/chaos.py

lint: venv
	$(VENV)/bin/ruff check core pulumi_provider tests bench
	$(VENV)/bin/mypy
	bash scripts/test-ansible.sh lint

stubs: venv
	$(PY) -m ironpool.iri.regen

clean:
	rm -rf $(VENV) $(TOOLS) .pytest_cache
