"""The libvirt host under the machine runtime: the connection, events, domain lookup and capacity.

Shaped after Nova's ``virt/libvirt/host.py``: what talks to the connection as a whole lives here,
what acts on one domain is :class:`~.guest.Guest`'s. The connection re-opens itself (and the event
subscription is renewed) when libvirtd went away. Lifecycle events arrive on libvirt's event-loop
thread, which must never block, so they are queued and handed to the handler on a thread of ours.
"""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import threading
from collections.abc import Callable, Iterator

import libvirt

from ironpool.runtime import libvirt_util
from ironpool.runtime.errors import Unavailable

from .guest import Guest

log = logging.getLogger(__name__)

LifecycleHandler = Callable[[str, int, int], None]
"""Called with (domain name, libvirt lifecycle event, detail) on the runtime's event thread."""
AgentHandler = Callable[[str, bool], None]
"""Called with (domain name, whether its guest agent is now connected) on the same thread."""


class Host:
    """One libvirt connection and what the runtime asks of the host through it."""

    def __init__(self, uri: str) -> None:
        self.uri = uri
        self.connection = libvirt_util.Connection(uri, on_reopen=self._resubscribe)
        self._handlers: tuple[LifecycleHandler, AgentHandler | None] | None = None
        self._callback_ids: list[int] = []
        self._queue: queue.Queue[Callable[[], None] | None] = queue.Queue()
        info = self.conn.getInfo()
        self.memory_bytes = int(info[1]) * 1024 * 1024
        self.cpus = int(info[2])

    @property
    def conn(self) -> libvirt.virConnect:
        """The live connection (re-opened, with the event subscription, after libvirtd went away)."""
        return self.connection.get()

    # -- domain events ------------------------------------------------------------------------
    def subscribe(self, handler: LifecycleHandler, on_agent: AgentHandler | None = None) -> None:
        """Deliver every domain lifecycle event to ``handler``, and guest agent (dis)connections to
        ``on_agent`` (once; on a thread of ours, in the order libvirt sent them)."""
        if self._handlers is not None:
            raise RuntimeError("the host already has a lifecycle handler")
        self._handlers = (handler, on_agent)
        threading.Thread(target=self._dispatch, name="machine-events", daemon=True).start()
        self._register(self.conn)

    def _register(self, conn: libvirt.virConnect) -> None:
        assert self._handlers is not None
        self._callback_ids = [int(conn.domainEventRegisterAny(
            None, libvirt.VIR_DOMAIN_EVENT_ID_LIFECYCLE, self._on_lifecycle, None))]
        if self._handlers[1] is not None:
            self._callback_ids.append(int(conn.domainEventRegisterAny(
                None, libvirt.VIR_DOMAIN_EVENT_ID_AGENT_LIFECYCLE, self._on_agent, None)))

    def _resubscribe(self, conn: libvirt.virConnect) -> None:
        if self._handlers is not None:
            self._register(conn)

    # On libvirt's event-loop thread: hand over, never block it.
    def _on_lifecycle(
        self, _conn: libvirt.virConnect, dom: libvirt.virDomain, event: int, detail: int, _opaque: object
    ) -> None:
        assert self._handlers is not None
        handler, name = self._handlers[0], dom.name()
        self._queue.put(lambda: handler(name, event, detail))

    def _on_agent(
        self, _conn: libvirt.virConnect, dom: libvirt.virDomain, state: int, _reason: int, _opaque: object
    ) -> None:
        assert self._handlers is not None and self._handlers[1] is not None
        handler, name = self._handlers[1], dom.name()
        connected = state == libvirt.VIR_CONNECT_DOMAIN_EVENT_AGENT_LIFECYCLE_STATE_CONNECTED
        self._queue.put(lambda: handler(name, connected))

    def _dispatch(self) -> None:
        while (deliver := self._queue.get()) is not None:
            try:
                deliver()
            except Exception:
                log.exception("domain event failed")

    def close(self) -> None:
        """End the event subscription; the connection stays open (libvirt warns when a connection
        closes under its event thread, and the process is usually ending)."""
        for callback_id in self._callback_ids:
            # A connection libvirtd dropped has no subscription left to end.
            with contextlib.suppress(libvirt.libvirtError, Unavailable):
                self.conn.domainEventDeregisterAny(callback_id)
        self._callback_ids = []
        self._queue.put(None)

    # -- domains ------------------------------------------------------------------------------
    def define(self, xml: str) -> Guest:
        """Define a persistent domain."""
        return Guest(self.conn.defineXML(xml))

    def lookup(self, name: str) -> Guest | None:
        """The domain called ``name``, or None when there is none."""
        try:
            return Guest(self.conn.lookupByName(name))
        except libvirt.libvirtError as exc:
            if libvirt_util.is_no_domain(exc):
                return None
            raise

    def guests(self, prefix: str) -> Iterator[Guest]:
        """Every domain (running or not) whose name starts with ``prefix``."""
        for dom in self.conn.listAllDomains(0):
            if dom.name().startswith(prefix):
                yield Guest(dom)

    def states(self, names: list[str]) -> dict[str, tuple[int, int]]:
        """``(state, reason)`` of the named domains that exist."""
        if len(names) == 1:
            guest = self.lookup(names[0])
            if guest is None:
                return {}
            try:
                return {names[0]: guest.state()}
            except libvirt.libvirtError as exc:
                if libvirt_util.is_no_domain(exc):
                    return {}
                raise
        # One RPC for all domains instead of one per machine.
        wanted = set(names)
        out: dict[str, tuple[int, int]] = {}
        # NOWAIT: never queue behind a domain job (another runtime starting or stopping a guest).
        flags = libvirt.VIR_CONNECT_GET_ALL_DOMAINS_STATS_NOWAIT
        for dom, stats in self.conn.getAllDomainStats(libvirt.VIR_DOMAIN_STATS_STATE, flags):
            name = dom.name()
            if name in wanted:
                out[name] = (int(stats.get("state.state", 0)), int(stats.get("state.reason", 0)))
        return out

    def network_exists(self, name: str) -> bool:
        return libvirt_util.network_exists(self.conn, name)

    @staticmethod
    def bridge_exists(name: str) -> bool:
        """Whether the host has a Linux bridge called ``name``."""
        return "/" not in name and os.path.isdir(f"/sys/class/net/{name}/bridge")

    # -- capacity -----------------------------------------------------------------------------
    def free_resources(self) -> tuple[int, int]:
        """Host CPUs and memory (bytes) minus what the running domains on the host use."""
        used_cpu = used_mem = 0
        # One call for all running domains; NOWAIT so a domain busy with a job never stalls Status.
        flags = (
            libvirt.VIR_CONNECT_GET_ALL_DOMAINS_STATS_ACTIVE
            | libvirt.VIR_CONNECT_GET_ALL_DOMAINS_STATS_NOWAIT
        )
        for dom, stats in self.conn.getAllDomainStats(
            libvirt.VIR_DOMAIN_STATS_VCPU | libvirt.VIR_DOMAIN_STATS_BALLOON, flags
        ):
            vcpus, max_kib = stats.get("vcpu.current"), stats.get("balloon.maximum")
            if vcpus is None or max_kib is None:
                try:
                    _state, max_kib, _mem, vcpus, _t = dom.info()
                except libvirt.libvirtError:
                    continue  # stopped meanwhile
            used_cpu += int(vcpus)
            used_mem += int(max_kib) * 1024
        return self.cpus - used_cpu, self.memory_bytes - used_mem
