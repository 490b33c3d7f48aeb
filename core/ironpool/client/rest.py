"""The HTTP clients: :class:`Client` (sync: CLI, Pulumi, Ansible) and :class:`AsyncClient` (controllers).

Both send the :class:`~ironpool.client.wire.Op` objects built by the shared
:class:`~ironpool.client.wire.Operations`; only the transport differs. Typed methods take a pydantic
model class (``client.get(MachineClass, "x")``); the ``*_raw`` methods take a ResourceInfo and plain
dicts (``ironpool apply`` of arbitrary kinds).

Namespaces: object calls on a namespaced kind default to the configured namespace; ``list`` and
``watch`` with ``namespace=None`` span all namespaces.
"""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator, Iterator
from typing import TYPE_CHECKING, Any, TypeVar

from ironpool.client.config import ClientConfig, ConfigError
from ironpool.client.failover import ServerList
from ironpool.client.http_transport import ServerConnections
from ironpool.client.transport_errors import TransportError
from ironpool.client.wire import (
    MERGE_PATCH,
    ListResult,
    Obj,
    Op,
    Operations,
    Request,
    ServerUnreachable,
    WatchEvent,
    decode_body,
    parse_watch_line,
    resource_for_model,
    to_json,
    typed,
    typed_event,
    typed_list,
)

if TYPE_CHECKING:  # the raw calls need neither pydantic nor the resource table
    from pydantic import BaseModel

    from ironpool.api.resource_info import ResourceInfo

M = TypeVar("M", bound="BaseModel")
T = TypeVar("T")


def _transport_options(config: ClientConfig) -> dict[str, Any]:
    """The headers and TLS check every request of a client carries."""
    config.require_server()
    headers = {"Accept": "application/json", "User-Agent": "ironpool-client"}
    if config.token:
        headers["Authorization"] = f"Bearer {config.token}"
    return {"headers": headers, "verify": _verify(config)}


def _verify(config: ClientConfig) -> ssl.SSLContext | bool:
    """How to check the server's certificate: against ``ca_file`` alone (the CA ``ironpool up`` made),
    else the system's CAs, or not at all with ``insecure``; with ``cert_file``, the context also
    presents that client certificate."""
    if config.cert_file and config.key_file:
        try:
            ctx = ssl.create_default_context(cafile=config.ca_file)
            if config.insecure:
                ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
            ctx.load_cert_chain(config.cert_file, config.key_file)
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError(f"cert_file {config.cert_file}, key_file {config.key_file}, ca_file "
                              f"{config.ca_file}: cannot load them: {exc}") from None
        return ctx
    if config.insecure:
        return False
    # A CA is of no use to plain-http servers: a stale ca_file in the config file (left by another
    # installation) must not stop `--server http://...` from working.
    if config.ca_file and any(s.startswith("https://") for s in config.servers):
        try:
            return ssl.create_default_context(cafile=config.ca_file)
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError(f"ca_file {config.ca_file}: cannot load it: {exc}") from None
    return True


def _watch_timeout(timeout_seconds: int | None) -> float | None:
    """How long a watch read may wait: the server closes the stream after ``timeoutSeconds``; give
    it slack before declaring the stream dead."""
    return None if not timeout_seconds else timeout_seconds + 30.0


def _unreachable(server: str, exc: Exception) -> ServerUnreachable:
    return ServerUnreachable(f"cannot reach the apiserver at {server}: {exc or type(exc).__name__}")


class _Typed:
    """Builds the typed Ops once, for both clients."""

    def __init__(self, ops: Operations) -> None:
        self.ops = ops

    def get(self, model: type[M], name: str, namespace: str | None) -> Op[M]:
        return self.ops.get_raw(resource_for_model(model), name, namespace).map(typed(model))

    def list(self, model: type[M], namespace: str | None, label_selector: str | None,
             field_selector: str | None, limit: int | None, continue_: str | None) -> Op[ListResult[M]]:
        info = resource_for_model(model)
        op = self.ops.list_raw(info, namespace, label_selector, field_selector, limit, continue_)
        return op.map(typed_list(model))

    def create(self, obj: M, namespace: str | None, dry_run: bool) -> Op[M]:
        model = type(obj)
        info = resource_for_model(model)
        return self.ops.create_raw(info, to_json(obj), namespace, dry_run).map(typed(model))

    def update(self, obj: M, namespace: str | None, dry_run: bool, subresource: str | None) -> Op[M]:
        model = type(obj)
        info = resource_for_model(model)
        return self.ops.update_raw(info, to_json(obj), namespace, dry_run, subresource).map(typed(model))

    def patch(self, model: type[M], name: str, patch: Obj, namespace: str | None, subresource: str | None,
              dry_run: bool) -> Op[M]:
        info = resource_for_model(model)
        return self.ops.patch_raw(info, name, patch, namespace, subresource, dry_run).map(typed(model))

    def delete(self, model: type[M], name: str, namespace: str | None, resource_version: str | None,
               dry_run: bool) -> Op[M | None]:
        op = self.ops.delete_raw(resource_for_model(model), name, namespace, resource_version, dry_run)
        return op.map(lambda body: None if body is None else model.model_validate(body))


class Client:
    """Synchronous client over keep-alive connections to each server (:mod:`.http_transport`), safe to
    share between threads. Use as a context manager or ``close()``."""

    def __init__(self, config: ClientConfig, timeout: float = 30.0) -> None:
        self.config = config
        self.ops = Operations(config.namespace)
        self._typed = _Typed(self.ops)
        options = _transport_options(config)
        self._pools = {server: ServerConnections(server, options["headers"], options["verify"], timeout)
                       for server in config.servers}
        self.servers = ServerList(config.servers)

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        for pool in self._pools.values():
            pool.close()

    def call(self, op: Op[T]) -> T:
        """Send one Op and decode its answer (raising ApiError / ServerUnreachable)."""
        req = op.request
        attempt = 0
        while True:
            server = self.servers.current
            try:
                status, content = self._pools[server].request(req.method, req.path, req.params,
                                                              req.content(), req.headers())
                break
            except TransportError as exc:
                if not self.servers.again(req.method, exc, attempt, server):
                    raise _unreachable(server, exc) from exc
                attempt += 1
        return op.decode(decode_body(status, content))

    # -- typed -----------------------------------------------------------------------------

    def get(self, model: type[M], name: str, namespace: str | None = None) -> M:
        return self.call(self._typed.get(model, name, namespace))

    def list(self, model: type[M], namespace: str | None = None, label_selector: str | None = None,
             field_selector: str | None = None, limit: int | None = None,
             continue_: str | None = None) -> ListResult[M]:
        return self.call(self._typed.list(model, namespace, label_selector, field_selector, limit, continue_))

    def list_all(self, model: type[M], namespace: str | None = None, label_selector: str | None = None,
                 field_selector: str | None = None, page_size: int = 500) -> Iterator[M]:
        """Every matching object, fetched ``page_size`` at a time."""
        token: str | None = None
        while True:
            page = self.list(model, namespace, label_selector, field_selector, page_size, token)
            yield from page.items
            token = page.continue_
            if not token:
                return

    def create(self, obj: M, namespace: str | None = None, dry_run: bool = False) -> M:
        return self.call(self._typed.create(obj, namespace, dry_run))

    def update(self, obj: M, namespace: str | None = None, dry_run: bool = False) -> M:
        return self.call(self._typed.update(obj, namespace, dry_run, None))

    def update_status(self, obj: M, namespace: str | None = None, dry_run: bool = False) -> M:
        return self.call(self._typed.update(obj, namespace, dry_run, "status"))

    def patch(self, model: type[M], name: str, patch: Obj, namespace: str | None = None,
              subresource: str | None = None, dry_run: bool = False) -> M:
        return self.call(self._typed.patch(model, name, patch, namespace, subresource, dry_run))

    def delete(self, model: type[M], name: str, namespace: str | None = None,
               resource_version: str | None = None, dry_run: bool = False) -> M | None:
        """Delete; returns the object the server answered with (``metadata.deletionTimestamp`` set and
        ``finalizers`` non-empty while finalizers hold it), or None for a bare Status(Success).
        ``resource_version`` is a precondition: a newer object answers Conflict."""
        return self.call(self._typed.delete(model, name, namespace, resource_version, dry_run))

    def watch(self, model: type[M], namespace: str | None = None, resource_version: str | int | None = None,
              label_selector: str | None = None, field_selector: str | None = None,
              timeout_seconds: int | None = None) -> Iterator[WatchEvent[M]]:
        """Typed watch events (BOOKMARKs are skipped; use ``watch_raw`` to see them)."""
        for event in self.watch_raw(resource_for_model(model), namespace, resource_version, label_selector,
                                    field_selector, timeout_seconds):
            typed_ev = typed_event(model, event)
            if typed_ev is not None:
                yield typed_ev

    # -- raw -------------------------------------------------------------------------------

    def get_raw(self, info: ResourceInfo, name: str, namespace: str | None = None,
                accept: str | None = None) -> Obj:
        return self.call(self.ops.get_raw(info, name, namespace, accept))

    def list_raw(self, info: ResourceInfo, namespace: str | None = None, label_selector: str | None = None,
                 field_selector: str | None = None, limit: int | None = None,
                 continue_: str | None = None) -> ListResult[Obj]:
        return self.call(self.ops.list_raw(info, namespace, label_selector, field_selector, limit, continue_))

    def table_raw(self, info: ResourceInfo, namespace: str | None = None, label_selector: str | None = None,
                  field_selector: str | None = None, limit: int | None = None,
                  continue_: str | None = None) -> Obj:
        """One page of a list as the server prints it (a ``meta.k8s.io/v1`` Table)."""
        return self.call(self.ops.table_raw(info, namespace, label_selector, field_selector, limit,
                                            continue_))

    def create_raw(self, info: ResourceInfo, obj: Obj, namespace: str | None = None,
                   dry_run: bool = False, field_manager: str | None = None) -> Obj:
        return self.call(self.ops.create_raw(info, obj, namespace, dry_run, field_manager))

    def update_raw(self, info: ResourceInfo, obj: Obj, namespace: str | None = None, dry_run: bool = False,
                   subresource: str | None = None, field_manager: str | None = None) -> Obj:
        return self.call(self.ops.update_raw(info, obj, namespace, dry_run, subresource, field_manager))

    def patch_raw(self, info: ResourceInfo, name: str, patch: Obj, namespace: str | None = None,
                  subresource: str | None = None, dry_run: bool = False, field_manager: str | None = None,
                  patch_type: str = MERGE_PATCH) -> Obj:
        """A JSON merge patch (or ``patch_type``: a strategic merge patch)."""
        return self.call(self.ops.patch_raw(info, name, patch, namespace, subresource, dry_run, field_manager,
                                            patch_type))

    def apply_raw(self, info: ResourceInfo, name: str, obj: Obj, field_manager: str,
                  namespace: str | None = None, force: bool = False, subresource: str | None = None,
                  dry_run: bool = False) -> Obj:
        """Server-side apply (``PATCH`` with ``application/apply-patch+yaml``)."""
        return self.call(self.ops.apply_raw(info, name, obj, field_manager, namespace, force, subresource,
                                            dry_run))

    def bind_raw(self, info: ResourceInfo, name: str, target_kind: str, target: str,
                 namespace: str | None = None, resource_version: str | None = None,
                 dry_run: bool = False) -> Obj:
        """Bind to a pool through the ``binding`` subresource (see ``Operations.bind_raw``)."""
        return self.call(self.ops.bind_raw(info, name, target_kind, target, namespace, resource_version,
                                           dry_run))

    def evict_raw(self, info: ResourceInfo, name: str, namespace: str | None = None, uid: str | None = None,
                  resource_version: str | None = None, dry_run: bool = False) -> Obj:
        """Evict through the ``eviction`` subresource (see ``Operations.evict_raw``)."""
        return self.call(self.ops.evict_raw(info, name, namespace, uid, resource_version, dry_run))

    def delete_raw(self, info: ResourceInfo, name: str, namespace: str | None = None,
                   resource_version: str | None = None, dry_run: bool = False) -> Obj | None:
        return self.call(self.ops.delete_raw(info, name, namespace, resource_version, dry_run))

    def watch_raw(self, info: ResourceInfo, namespace: str | None = None,
                  resource_version: str | int | None = None, label_selector: str | None = None,
                  field_selector: str | None = None, timeout_seconds: int | None = None,
                  allow_bookmarks: bool = True, accept: str | None = None) -> Iterator[WatchEvent[Obj]]:
        """Stream watch events until the server ends the stream; raises Expired when the RV is too old.
        ``accept`` :data:`~ironpool.client.wire.TABLE_ACCEPT` makes each event's object a Table."""
        req = self.ops.watch_request(info, namespace, resource_version, label_selector, field_selector,
                                     timeout_seconds, allow_bookmarks, accept)
        yield from self._stream(req, timeout_seconds)

    def _stream(self, req: Request, timeout_seconds: int | None) -> Iterator[WatchEvent[Obj]]:
        server = self.servers.current
        try:
            with self._pools[server].stream(req.method, req.path, req.params, _watch_timeout(timeout_seconds),
                                            req.headers()) as stream:
                if stream.status != 200:
                    decode_body(stream.status, stream.read())
                for line in stream.lines():  # a watch cut mid-stream just ends; the caller resumes
                    event = parse_watch_line(line)
                    if event is not None:
                        yield event
        except TransportError as exc:
            self.servers.again(req.method, exc, 0, server)  # the next watch goes elsewhere if need be
            raise _unreachable(server, exc) from exc


class AsyncClient:
    """Asynchronous client for controllers; same methods as :class:`Client`, awaited."""

    def __init__(self, config: ClientConfig, timeout: float = 30.0) -> None:
        self.config = config
        self.ops = Operations(config.namespace)
        self._typed = _Typed(self.ops)
        from ironpool.client.aio_transport import ServerPool  # aiohttp only where asyncio is used

        options = _transport_options(config)  # its headers and TLS check, for aiohttp (.aio_transport)
        self._tls = options["verify"]
        self._pools = {server: ServerPool(server, options["headers"], options["verify"], timeout)
                       for server in config.servers}
        self.servers = ServerList(config.servers)

    async def reload_client_certificate(self) -> None:
        """Present the client certificate in ``cert_file`` (rotated there) from now on: load it into
        the TLS context and close every connection, so no request goes on under the old one
        (kubelet's rotation closes its connections too; watches reconnect)."""
        if not (isinstance(self._tls, ssl.SSLContext) and self.config.cert_file and self.config.key_file):
            raise ConfigError("this client presents no client certificate to reload")
        try:
            self._tls.load_cert_chain(self.config.cert_file, self.config.key_file)
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError(f"cert_file {self.config.cert_file}: cannot load it: {exc}") from None
        for pool in self._pools.values():
            await pool.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        for pool in self._pools.values():
            await pool.aclose()

    async def call(self, op: Op[T]) -> T:
        req = op.request
        attempt = 0
        while True:
            server = self.servers.current
            try:
                status, content = await self._pools[server].request(req.method, req.path, req.params,
                                                                     req.content(), req.headers())
                break
            except TransportError as exc:
                if not self.servers.again(req.method, exc, attempt, server):
                    raise _unreachable(server, exc) from exc
                attempt += 1
        return op.decode(decode_body(status, content))

    # -- typed -----------------------------------------------------------------------------

    async def get(self, model: type[M], name: str, namespace: str | None = None) -> M:
        return await self.call(self._typed.get(model, name, namespace))

    async def list(self, model: type[M], namespace: str | None = None, label_selector: str | None = None,
                   field_selector: str | None = None, limit: int | None = None,
                   continue_: str | None = None) -> ListResult[M]:
        return await self.call(self._typed.list(model, namespace, label_selector, field_selector, limit,
                                                continue_))

    async def list_all(self, model: type[M], namespace: str | None = None, label_selector: str | None = None,
                       field_selector: str | None = None, page_size: int = 500) -> AsyncIterator[M]:
        token: str | None = None
        while True:
            page = await self.list(model, namespace, label_selector, field_selector, page_size, token)
            for item in page.items:
                yield item
            token = page.continue_
            if not token:
                return

    async def create(self, obj: M, namespace: str | None = None, dry_run: bool = False) -> M:
        return await self.call(self._typed.create(obj, namespace, dry_run))

    async def update(self, obj: M, namespace: str | None = None, dry_run: bool = False) -> M:
        return await self.call(self._typed.update(obj, namespace, dry_run, None))

    async def update_status(self, obj: M, namespace: str | None = None, dry_run: bool = False) -> M:
        return await self.call(self._typed.update(obj, namespace, dry_run, "status"))

    async def patch(self, model: type[M], name: str, patch: Obj, namespace: str | None = None,
                    subresource: str | None = None, dry_run: bool = False) -> M:
        return await self.call(self._typed.patch(model, name, patch, namespace, subresource, dry_run))

    async def delete(self, model: type[M], name: str, namespace: str | None = None,
                     resource_version: str | None = None, dry_run: bool = False) -> M | None:
        return await self.call(self._typed.delete(model, name, namespace, resource_version, dry_run))

    async def watch(self, model: type[M], namespace: str | None = None,
                    resource_version: str | int | None = None, label_selector: str | None = None,
                    field_selector: str | None = None,
                    timeout_seconds: int | None = None) -> AsyncIterator[WatchEvent[M]]:
        async for event in self.watch_raw(resource_for_model(model), namespace, resource_version,
                                          label_selector, field_selector, timeout_seconds):
            typed_ev = typed_event(model, event)
            if typed_ev is not None:
                yield typed_ev

    # -- raw -------------------------------------------------------------------------------

    async def get_raw(self, info: ResourceInfo, name: str, namespace: str | None = None) -> Obj:
        return await self.call(self.ops.get_raw(info, name, namespace))

    async def list_raw(self, info: ResourceInfo, namespace: str | None = None,
                       label_selector: str | None = None, field_selector: str | None = None,
                       limit: int | None = None, continue_: str | None = None) -> ListResult[Obj]:
        return await self.call(self.ops.list_raw(info, namespace, label_selector, field_selector, limit,
                                                 continue_))

    async def create_raw(self, info: ResourceInfo, obj: Obj, namespace: str | None = None,
                         dry_run: bool = False, field_manager: str | None = None) -> Obj:
        return await self.call(self.ops.create_raw(info, obj, namespace, dry_run, field_manager))

    async def update_raw(self, info: ResourceInfo, obj: Obj, namespace: str | None = None,
                         dry_run: bool = False, subresource: str | None = None,
                         field_manager: str | None = None) -> Obj:
        return await self.call(self.ops.update_raw(info, obj, namespace, dry_run, subresource, field_manager))

    async def patch_raw(self, info: ResourceInfo, name: str, patch: Obj, namespace: str | None = None,
                        subresource: str | None = None, dry_run: bool = False,
                        field_manager: str | None = None) -> Obj:
        return await self.call(self.ops.patch_raw(info, name, patch, namespace, subresource, dry_run,
                                                  field_manager))

    async def apply_raw(self, info: ResourceInfo, name: str, obj: Obj, field_manager: str,
                        namespace: str | None = None, force: bool = False, subresource: str | None = None,
                        dry_run: bool = False) -> Obj:
        """Server-side apply (``PATCH`` with ``application/apply-patch+yaml``)."""
        return await self.call(self.ops.apply_raw(info, name, obj, field_manager, namespace, force,
                                                  subresource, dry_run))

    async def bind_raw(self, info: ResourceInfo, name: str, target_kind: str, target: str,
                       namespace: str | None = None, resource_version: str | None = None,
                       dry_run: bool = False) -> Obj:
        """Bind to a pool through the ``binding`` subresource (see ``Operations.bind_raw``)."""
        return await self.call(self.ops.bind_raw(info, name, target_kind, target, namespace, resource_version,
                                                 dry_run))

    async def evict_raw(self, info: ResourceInfo, name: str, namespace: str | None = None,
                        uid: str | None = None, resource_version: str | None = None,
                        dry_run: bool = False) -> Obj:
        """Evict through the ``eviction`` subresource (see ``Operations.evict_raw``)."""
        return await self.call(self.ops.evict_raw(info, name, namespace, uid, resource_version, dry_run))

    async def delete_raw(self, info: ResourceInfo, name: str, namespace: str | None = None,
                         resource_version: str | None = None, dry_run: bool = False) -> Obj | None:
        return await self.call(self.ops.delete_raw(info, name, namespace, resource_version, dry_run))

    async def watch_raw(self, info: ResourceInfo, namespace: str | None = None,
                        resource_version: str | int | None = None, label_selector: str | None = None,
                        field_selector: str | None = None, timeout_seconds: int | None = None,
                        allow_bookmarks: bool = True) -> AsyncIterator[WatchEvent[Obj]]:
        req = self.ops.watch_request(info, namespace, resource_version, label_selector, field_selector,
                                     timeout_seconds, allow_bookmarks)
        server = self.servers.current
        try:
            async with self._pools[server].stream(req.method, req.path, req.params,
                                                  _watch_timeout(timeout_seconds)) as stream:
                if stream.status != 200:
                    decode_body(stream.status, await stream.read())
                async for line in stream.lines():
                    event = parse_watch_line(line)
                    if event is not None:
                        yield event
        except TransportError as exc:
            self.servers.again(req.method, exc, 0, server)  # the next watch goes elsewhere if need be
            raise _unreachable(server, exc) from exc
