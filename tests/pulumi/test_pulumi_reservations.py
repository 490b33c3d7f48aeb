"""Reservations from Pulumi programs through the mini engine and the real plugin.

* ``preview`` of a stack of three Machines where two fit says the third would not (the scheduler
  answers for the run's Machines together);
* with ``ironpool:reserve: true`` a program of 12 Machines on a fleet with room for 10 fails before
  any Machine is created, naming the shortfall (its preview says it would not fit); with room for 12
  it creates all of them, each within the stack's Reservation. The fleet is real: apiserver,
  scheduler, libvirt runtimes and their poollets (tests/helpers/fleet.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pulumi_stack import Stack

from tests.client.test_predict import scheduled  # noqa: F401 - the fixture
from tests.helpers.fleet import fleet
from tests.helpers.runtimes import require_libvirt

THREE = '''
import pulumi
import ironpool_pulumi as ironpool

for i in range(3):
    m = ironpool.Machine(f"web-{i}", machine_class="x-small", wait_for="none")
    pulumi.export(f"web-{i}", pulumi.Output.all(m.planned_pool, m.placement))
'''

TWELVE = '''
import pulumi
import ironpool_pulumi as ironpool
from ironpool_pulumi.reserve import stack_reservations

for i in range(12):
    ironpool.Machine(f"web-{i}", machine_class="x-small", image="tiny", wait_for="scheduled")
for r in stack_reservations():
    pulumi.export("prediction", r.prediction)
    pulumi.export("message", r.message)
'''


def _stack(tmp_path: Path, url: str, token: str, source: str, **config: str) -> Stack:
    program = tmp_path / "program"
    program.mkdir(exist_ok=True)
    (program / "Pulumi.yaml").write_text("name: reserved\nruntime: python\n")
    (program / "__main__.py").write_text(source)
    return Stack(program=program, workdir=tmp_path,
                 config={"ironpool:server": url, "ironpool:token": token, **config},
                 env={"IRONPOOL_CONFIG": str(tmp_path / "absent.yaml")})


def test_preview_of_three_where_two_fit_names_the_third(apiserver: Any, scheduled: Any,  # noqa: F811
                                                        tmp_path: Path) -> None:
    # The fixture's fleet has room for three x-small (vm: 2, gold: 1): take one first.
    from tests.scheduler.sched_docs import machine
    from tests.scheduler.test_integration import M

    scheduled.create_raw(M, machine("taken", "x-small", pool="gold"), "default")
    preview = _stack(tmp_path, apiserver.url, apiserver.admin_token, THREE).preview()
    assert preview.error is None, preview.error
    answers = sorted(preview.outputs[f"web-{i}"] for i in range(3))  # checked in any order
    assert [pool for pool, _ in answers] == ["", "vm", "vm"]
    assert answers[0][1].startswith("does not fit (with 2 more of this run): needs 3 x-small: 2 fit")
    assert [m["metadata"]["name"] for m in scheduled.list_raw(M, "default").items] == ["taken"]


@pytest.mark.libvirt
@pytest.mark.slow
def test_reserve_all_or_nothing(tmp_path: Path) -> None:
    require_libvirt()
    with fleet(tmp_path / "fleet", [5, 5]) as f:
        stack = _stack(tmp_path, f.server.url, f.server.admin_token, TWELVE, **{"ironpool:reserve": "true"})
        preview = stack.preview()
        assert preview.error is None, preview.error
        prediction = preview.outputs["prediction"]
        assert prediction.startswith("does not fit: needs 12 x-small: 10 fit"), prediction

        up = stack.up()
        assert up.error is not None and "short by 2 x-small" in up.error, up.error
        assert f.machines() == []  # nothing was created
        assert not any(op == "create" and name.startswith("web-") for op, name in up.log), up.log

        f.add_host(2)
        up = stack.up()
        assert up.error is None, up.error
        machines = f.machines()
        assert len(machines) == 12
        assert {m["metadata"]["labels"]["compute.ironcore.dev/reservation"] for m in machines} == \
            {"reserved-dev"}  # type: ignore[index]
        assert all(m["spec"].get("machinePoolRef") for m in machines)  # type: ignore[union-attr]
        assert stack.run("destroy").error is None
