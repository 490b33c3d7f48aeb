"""Boot admission on real libvirtd: a runtime told ``--max-booting 1`` boots tiny guests one after
another in the order they were created, each once the last one went idle; a machine deleted or
powered off while it waits never boots, and the queue goes on past it; a runtime restarted while
one boots counts it, and the machine that waited starts only once it settled."""

from __future__ import annotations

from pathlib import Path

import pytest
from ironpool.iri.gen.machine.v1alpha1 import api_pb2 as mpb
from machine_runtime_helpers import RuntimeProc, domain_state, machine_request, running_runtime

from tests.helpers.guests import boot_deadline
from tests.helpers.wait import wait_for

pytestmark = pytest.mark.libvirt


def _events(runtime: RuntimeProc, session: str) -> list[tuple[str, str, str]]:
    """``(machine id, reason, message)`` of this test's machines, oldest first."""
    flt = mpb.EventFilter(label_selector={"ironpool.dev/test-session": session})
    return [(e.spec.involved_object_meta.id, e.spec.reason, e.spec.message)
            for e in runtime.stub.ListEvents(mpb.ListEventsRequest(filter=flt)).events]


def test_one_boot_at_a_time_in_order_and_a_machine_gone_from_the_queue_never_boots(
    tiny_images: Path, test_session: str
) -> None:
    import libvirt

    with running_runtime("iba-", test_session, images=tiny_images,
                         extra_args=["--max-booting", "1"]) as runtime:
        stub = runtime.stub
        ids = [stub.CreateMachine(machine_request(test_session)).machine.metadata.id for _ in range(5)]
        first, deleted, powered_off, *rest = ids

        # The first boots; the others are defined, Pending, and told why they wait.
        assert domain_state(f"ironpool-{first}") == libvirt.VIR_DOMAIN_RUNNING
        for mid in ids[1:]:
            assert domain_state(f"ironpool-{mid}") == libvirt.VIR_DOMAIN_SHUTOFF
            assert runtime.state(mid) == "MACHINE_PENDING"
        queued = {mid: msg for mid, reason, msg in _events(runtime, test_session) if reason == "BootQueued"}
        assert set(queued) == set(ids[1:])
        assert queued[deleted] == ("waiting to boot: the host boots at most 1 at once (its runtime's "
                                   "--max-booting); 0 ahead of this one")
        assert queued[rest[-1]].endswith("; 3 ahead of this one")

        stub.DeleteMachine(mpb.DeleteMachineRequest(machine_id=deleted))
        stub.UpdateMachinePower(mpb.UpdateMachinePowerRequest(machine_id=powered_off, power=mpb.POWER_OFF))

        def booted() -> list[str]:
            return [mid for mid, reason, _ in _events(runtime, test_session) if reason == "Booted"]

        # Each guest's boot settles (the tiny image has no agent: it goes idle), then the next starts.
        wait_for(lambda: booted() == [first, *rest], boot_deadline(len(rest) + 1),
                 "the three guests left in the queue to boot one after another")
        events = _events(runtime, test_session)
        for mid in (first, *rest):
            message = next(msg for m, reason, msg in events if m == mid and reason == "Booted")
            assert message.endswith("it went idle"), message
            assert runtime.state(mid) == "MACHINE_RUNNING"
        # One at a time: each started only after the one before had settled.
        order = [(mid, reason) for mid, reason, _ in events if reason in ("Started", "Booted")]
        assert order == [(mid, reason) for mid in (first, *rest) for reason in ("Started", "Booted")]

        # Neither machine that left the queue ever booted: nothing on their consoles.
        wait_for(lambda: runtime.machine(deleted) is None, 30, "the deleted machine to be gone")
        assert runtime.state(powered_off) != "MACHINE_RUNNING"
        assert domain_state(f"ironpool-{powered_off}") == libvirt.VIR_DOMAIN_SHUTOFF
        console = runtime.console_log(powered_off)
        assert not console.exists() or console.read_text() == ""


def test_a_restarted_runtime_counts_the_guest_still_booting(tiny_images: Path, test_session: str) -> None:
    """Killed while one guest boots and two wait, the runtime comes back knowing nothing of its
    queue: it counts the running guest as booting, starts the others only once it settled, and in
    the order they were created."""
    import libvirt

    with running_runtime("ibr-", test_session, images=tiny_images,
                         extra_args=["--max-booting", "1"]) as runtime:
        first, second, third = (runtime.stub.CreateMachine(machine_request(test_session)).machine.metadata.id
                                for _ in range(3))
        assert domain_state(f"ironpool-{second}") == libvirt.VIR_DOMAIN_SHUTOFF
        runtime.kill9()
        runtime.start()
        settled = f"machine {first}: running before the runtime started; it went idle"

        def second_running() -> bool:
            running = domain_state(f"ironpool-{second}") == libvirt.VIR_DOMAIN_RUNNING
            # The log line is written before the slot is handed on, so it is there once second runs.
            assert not running or settled in runtime.logs[-1].read_text(), runtime.log_text()
            return running

        wait_for(second_running, boot_deadline(2), "the waiting guest to start after the first settled")

        def after_the_first() -> list[tuple[str, str]]:
            return [(mid, reason) for mid, reason, _ in _events(runtime, test_session)
                    if reason in ("Started", "Booted") and mid != first]

        # Events follow libvirt's lifecycle events, a moment after the domain's state changed.
        wait_for(lambda: (third, "Started") in after_the_first(), boot_deadline(2), "the third to start")
        order = after_the_first()
        assert order[:3] == [(second, "Started"), (second, "Booted"), (third, "Started")], order
        assert runtime.state(third) == "MACHINE_RUNNING"
