# The two commands of the README: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: host venv demo test lint stubs bench clean rig rig-down

host:
	bash scripts/setup-host.sh

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev,etcd,pulumi,ansible]'
	touch $(STAMP)

venv: $(STAMP)

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

lint: venv
	$(VENV)/bin/ruff check core pulumi_provider tests bench
	$(VENV)/bin/mypy
	bash scripts/test-ansible.sh lint

stubs: venv
	$(PY) -m ironpool.iri.regen

clean:
	rm -rf $(VENV) .pytest_cache
