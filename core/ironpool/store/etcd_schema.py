"""The etcd store's schema version: the key ``KEY-PREFIX#schema`` (outside every object range, as the
guard keys are), checked before the store's first call and migrated as :mod:`.schema` says.

Several apiservers may open one cluster at once: the version is recorded with a compare on the key's
``mod_revision``, so one of them records it and the others find it recorded.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from ironpool.store.etcd_client import CALL_TIMEOUT, EtcdConnection, rpc
from ironpool.store.schema import SCHEMA_VERSION, check_not_newer, parse_version

SCHEMA_KEY = b"#schema"


async def _from_v0(conn: EtcdConnection, root: bytes) -> None:
    """Release 0 kept no version key; its keys are version 1's, so there is nothing to rewrite."""


#: version -> the step that migrates the keys of that version to the next one
MIGRATIONS: dict[int, Callable[[EtcdConnection, bytes], Awaitable[None]]] = {0: _from_v0}


async def read_version(conn: EtcdConnection, key: bytes, where: str) -> tuple[int, int]:
    """``(version, mod_revision)`` of the version key; ``(0, 0)`` when there is none."""
    m = rpc()

    async def attempt(_index: int, kv: Any) -> Any:
        return await kv.Range(m.RangeRequest(key=key), timeout=CALL_TIMEOUT)

    resp = await conn.call("read schema version", attempt)
    if not resp.kvs:
        return 0, 0
    return parse_version(where, resp.kvs[0].value), int(resp.kvs[0].mod_revision)


async def ensure_schema(conn: EtcdConnection, root: bytes, where: str) -> int:
    """Check (and migrate, and record) the schema version under ``root``; the version found.
    SchemaTooNew, naming ``where``, when a newer release wrote it."""
    m = rpc()
    key = root + SCHEMA_KEY
    found, mod = await read_version(conn, key, where)
    check_not_newer(where, found)
    if found == SCHEMA_VERSION:
        return found
    for version in range(found, SCHEMA_VERSION):
        await MIGRATIONS[version](conn, root)
    request = m.TxnRequest(
        compare=[m.Compare(key=key, target=m.Compare.MOD, result=m.Compare.EQUAL, mod_revision=mod)],
        success=[m.RequestOp(request_put=m.PutRequest(key=key, value=str(SCHEMA_VERSION).encode()))],
    )

    async def attempt(_index: int, kv: Any) -> Any:
        return await kv.Txn(request, timeout=CALL_TIMEOUT)

    resp = await conn.call("record schema version", attempt)
    if not resp.succeeded:  # another apiserver (or our own retried write) recorded one meanwhile
        again, _ = await read_version(conn, key, where)
        check_not_newer(where, again)
    return found
