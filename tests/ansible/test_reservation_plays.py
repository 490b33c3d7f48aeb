"""Reservations from real ``ansible-playbook`` runs against a real fleet (apiserver, scheduler, libvirt
runtimes and their poollets: tests/helpers/fleet.py):

* check mode of a play declaring three Machines in a loop where two fit says the third would not;
* a play reserving 12 Machines first fails at the reservation, before any Machine, naming the
  shortfall, on a fleet with room for 10; with room for 12 it makes all 12 within the reservation.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.ansible.conftest import BIN, COLLECTIONS, Run, write_playbook
from tests.helpers.fleet import Fleet, fleet
from tests.helpers.runtimes import require_libvirt

pytestmark = [pytest.mark.libvirt, pytest.mark.slow]

THREE = """\
    - name: Three machines, in a loop
      ironpool.iaas.machine:
        name: "web-{{ item }}"
        machine_class: x-small
        image: tiny
      loop: [0, 1, 2]
      register: web
    - name: The third would not fit beside the first two
      ansible.builtin.assert:
        that:
          - web.results[0].pool != ''
          - web.results[1].pool != ''
          - web.results[2].pool == ''
          - "web.results[2].placement_reason is search('does not fit .with 2 more of this run.')"
        fail_msg: "{{ web.results | map(attribute='placement_reason') | list }}"
"""

RESERVED = """\
    - name: Room for the whole set, or nothing
      ironpool.iaas.reservation:
        name: web
        machines:
          x-small: 12
    - name: The machines, within it
      ironpool.iaas.machine:
        name: "web-{{ item }}"
        machine_class: x-small
        image: tiny
        reservation: web
        wait: true
        wait_for: scheduled
      loop: "{{ range(12) | list }}"
"""


def play(f: Fleet, path: Path, *args: str) -> Run:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("IRONPOOL_", "ANSIBLE_"))}
    env.update(IRONPOOL_SERVER=f.server.url, IRONPOOL_TOKEN=f.server.admin_token,
               IRONPOOL_CONFIG=str(f.tmp / "absent.yaml"), ANSIBLE_COLLECTIONS_PATH=str(COLLECTIONS),
               ANSIBLE_LOCALHOST_WARNING="false", ANSIBLE_INVENTORY_UNPARSED_WARNING="false",
               ANSIBLE_NOCOLOR="1")
    proc = subprocess.run([str(BIN / "ansible-playbook"), str(path), *args], env=env, capture_output=True,
                          text=True, timeout=600, check=False)
    return Run(proc.returncode, proc.stdout, proc.stderr)


def test_check_mode_predicts_the_loop_together_and_a_reserved_play_is_all_or_nothing(tmp_path: Path) -> None:
    require_libvirt()
    with fleet(tmp_path / "fleet", [2]) as f:
        check = play(f, write_playbook(tmp_path, THREE), "--check")
        check.ok()
        assert f.machines() == []

        f.add_host(8)  # room for 10
        (tmp_path / "reserved").mkdir()
        refused = play(f, write_playbook(tmp_path / "reserved", RESERVED))
        assert refused.returncode != 0
        assert "reservation default/web was rejected: needs 12 x-small: 10 fit" in refused.stdout, \
            refused.stdout[-3000:]
        assert "short by 2 x-small" in refused.stdout
        assert f.machines() == []  # failed before any Machine

        f.add_host(2)  # room for 12
        made = play(f, write_playbook(tmp_path / "reserved", RESERVED)).ok()
        assert made.recap()["failed"] == 0
        machines = f.machines()
        assert len(machines) == 12
        assert all(m["metadata"]["labels"]["compute.ironcore.dev/reservation"] == "web"  # type: ignore[index]
                   and m["spec"].get("machinePoolRef") for m in machines)  # type: ignore[union-attr]
