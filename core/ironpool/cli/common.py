"""Options and start-up shared by commands: quantities and durations, logging, garbage collection,
and running an asyncio main until SIGINT/SIGTERM (the apiserver connection is
:mod:`ironpool.cli.connection`)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import signal
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import click

from ironpool.cli.errors import CommandError

F = TypeVar("F", bound=Callable[..., Any])

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def log_level_option(f: F) -> F:
    """``--log-level`` (DEBUG, INFO, WARNING, ERROR; case-insensitive), default INFO."""
    return click.option("--log-level", default="INFO", show_default=True,
                        type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"], case_sensitive=False))(f)


def gc_options(f: F) -> F:
    """``--gc-policy``, ``--gc-grace``, ``--gc-max-per-pass``: how orphaned runtime objects are collected."""
    f = click.option("--gc-max-per-pass", default=20, show_default=True, type=click.IntRange(1),
                     help="Most orphans deleted per relist; more wait for the next one.")(f)
    f = click.option("--gc-grace", default=300.0, show_default=True, type=click.FloatRange(0),
                     help="Seconds a runtime object must stay orphaned (across two relists) before it "
                          "is deleted.")(f)
    return click.option("--gc-policy", type=click.Choice(["collect", "report"]), default="collect",
                        show_default=True,
                        help="collect: delete this installation's orphaned machines and volumes after the "
                             "grace period; report: only log them and show them on the pool.")(f)


def collect_options(gc_policy: str, gc_grace: float, gc_max_per_pass: int) -> Any:
    """The poollets' :class:`~ironpool.poollet.collector.CollectOptions` from :func:`gc_options`."""
    from ironpool.poollet.collector import CollectOptions

    return CollectOptions(policy="report" if gc_policy == "report" else "collect", grace=gc_grace,
                          max_per_pass=gc_max_per_pass)


def setup_logging(level: str) -> None:
    """Log to stderr at ``level`` with timestamps and logger names."""
    logging.basicConfig(level=level.upper(), format=LOG_FORMAT)


def quantity_option(value: str | None, option: str) -> int | None:
    """A non-negative quantity option (``16Gi``, ``4``) rounded up to an integer; None if not given."""
    from ironpool.api.quantity import parse_quantity

    if value is None:
        return None
    try:
        q = parse_quantity(value).value()
    except ValueError as exc:
        raise click.BadParameter(f"{value!r}: {exc}", param_hint=option) from exc
    if q < 0:
        raise click.BadParameter(f"{value!r} must not be negative", param_hint=option)
    return q


def fence_after_option(f: F, default: float = 30.0, why: str = "") -> F:
    """``--fence-after``: a machinepoollet's self-fencing (:mod:`ironpool.poollet.fencing`)."""
    return click.option("--fence-after", default=default, show_default=True, type=click.FloatRange(0),
                        help="Seconds without renewing the pool's Lease (the control plane out of reach) "
                             "after which this host shuts off its Machines' domains, keeping their disks, "
                             "before the controller-manager may move them; started again when the "
                             f"control plane is back and they are still here. 0: never.{why}")(f)


def local_fence_after_option(f: F) -> F:
    """``ironpool up``'s ``--fence-after``: off by default, as its own pool's poollet and the control
    plane share one process (nothing can cut them apart; a silent Lease there means the process is
    starved, and fencing would only stop guests that have nowhere else to go)."""
    return fence_after_option(f, 0.0, " Off by default here: this host's poollet runs in the control "
                                      "plane's own process, so no partition can come between them.")


def fence_margin_option(f: F) -> F:
    """``--fence-margin``: the controller-manager's wait beyond a pool's fence time."""
    return click.option("--fence-margin", default=10.0, show_default=True, type=click.FloatRange(0.1),
                        help="Seconds the controller-manager waits beyond a pool's --fence-after before it "
                             "moves the pool's Machines (the fence's own time, clock drift).")(f)


def cluster_signing_duration_option(f: F) -> F:
    """``--cluster-signing-duration``: how long the client certificates of joined hosts last."""
    return click.option("--cluster-signing-duration", default=365 * 86400.0, show_default=True,
                        type=click.FloatRange(10.0),
                        help="Seconds the pool client certificates the controller-manager signs are valid (a "
                             "request may ask for less); joined hosts renew theirs at 70-90 %% of that.")(f)


def allocation_options(f: Any) -> Any:
    """``--cpu-allocation-ratio``, ``--reserved-cpu`` and ``--reserved-memory``: how much of the host
    ironpool machines may be given (Nova's ``cpu_allocation_ratio`` and reserved host resources). A
    machine runtime and the poollet beside it are given the same (``ironpool up`` and ``join`` do)."""
    f = click.option("--reserved-memory", default="0", show_default=True,
                     help="Memory kept from ironpool machines for the host, e.g. 2Gi.")(f)
    f = click.option("--reserved-cpu", default="0", show_default=True,
                     help="Cores kept from ironpool machines for the host.")(f)
    return click.option("--cpu-allocation-ratio", type=click.FloatRange(min=0, min_open=True), default=1.0,
                        show_default=True,
                        help="Virtual cores machines may be given per host core (above 1: overcommit).")(f)


def guest_cpu_options(f: Any) -> Any:
    """``--vcpu-slice-ms``, the scheduler slice a machine runtime asks for emulated vCPUs
    (:mod:`ironpool.runtime.machine.vcpu_slice`), and ``--max-booting``, how many guests it boots at
    once (:mod:`ironpool.runtime.machine.boot_admission`)."""
    from ironpool.runtime.machine.vcpu_slice import DEFAULT_MS
    f = click.option(
        "--max-booting", type=click.IntRange(min=0), default=None,
        help="Guests this host's machine runtime boots at once; later starts wait until an earlier guest's "
             "boot settled (its guest agent connected, or its QEMU went idle). Default: the host's CPUs; "
             "0: no limit.")(f)
    return click.option(
        "--vcpu-slice-ms", type=click.FloatRange(min=0, max=100), default=DEFAULT_MS, show_default=True,
        help="Ask Linux (6.12 and later) for this scheduler slice on emulated (TCG) vCPU threads, so many "
             "emulated guests sharing few cores switch less; 0 leaves the kernel's (a millisecond or so).")(f)


_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(text: str, option: str = "--timeout") -> float:
    """``30s``, ``5m``, ``1h30m``, ``500ms`` or plain seconds, as kubectl accepts them."""
    raw = text.strip()
    if re.fullmatch(r"\d+(\.\d+)?", raw):
        return float(raw)
    parts = re.findall(r"(\d+(?:\.\d+)?)(ms|s|m|h)", raw)
    if not parts or "".join(n + u for n, u in parts) != raw:
        raise CommandError(f"{option}: invalid duration {text!r} (examples: 30s, 5m, 1h30m)")
    return sum(float(n) * _UNITS[u] for n, u in parts)


def run_until_signalled(main: Callable[[asyncio.Event], Awaitable[None]]) -> None:
    """Run ``main(stop)`` in a new event loop; SIGINT and SIGTERM set ``stop``."""

    async def runner() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        await main(stop)

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(runner())


def run_in_foreground(system: Any, progress: Any, started: Callable[[Any], None], label: str,
                      errors: tuple[type[Exception], ...]) -> None:
    """Run ``system.run(stop, started)`` (``ironpool up``, ``ironpool join``) in a new event loop: the
    first SIGINT or SIGTERM stops it in order, a second at once. A failure in ``errors`` is reported on
    ``progress`` as ``label`` failing, with exit status 1."""

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()

        def on_signal() -> None:
            if stop.is_set():
                progress.note("stopping at once (second signal)")
                os._exit(130)
            progress.note("stopping... (Ctrl-C again to stop at once)")
            stop.set()

        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, on_signal)
        await system.run(stop, started)

    try:
        asyncio.run(main())
    except errors as exc:
        progress.fail(label, str(exc))
        raise SystemExit(1) from None
