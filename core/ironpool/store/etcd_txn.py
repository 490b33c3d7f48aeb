"""The etcd transactions of the store's writes: the compare that makes a write conditional (the key
absent, present, or at the expected ``mod_revision``), the guard keys' compares and puts that commit
with it, and how a failed compare becomes the store's error (or, on a retry that finds its own
earlier write, the success it was).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ironpool.store import etcd_codec as codec
from ironpool.store.etcd_client import rpc
from ironpool.store.interface import (
    Guard,
    GuardConflict,
    GuardValue,
    KeyExists,
    KeyNotFound,
    RevisionConflict,
)

# resolve(the failed transaction's read of the object key, whether the write was retried): the
# success to answer with, None when the object's compare held (a guard failed), or raises.
Resolve = Callable[[Any, bool], Any]


def write_request(key: bytes, compare: Any, op: Any, guards: Sequence[Guard],
                  guard_key: Callable[[str], bytes]) -> Any:
    """One object write (``compare`` then ``op``) with its guards (stored at ``guard_key(key)``); on
    failure it reads the object key and the guard keys, so the outcome can say why."""
    m = rpc()
    guard_compares, guard_ops = [], []
    for g in guards:
        gk = guard_key(g.key)
        guard_compares.append(
            m.Compare(key=gk, target=m.Compare.MOD, result=m.Compare.EQUAL, mod_revision=g.revision))
        if g.check_only:
            continue
        if g.value is None:
            guard_ops.append(m.RequestOp(request_delete_range=m.DeleteRangeRequest(key=gk)))
        else:
            guard_ops.append(m.RequestOp(request_put=m.PutRequest(key=gk, value=codec.guard_encode(g.value))))
    failure = [m.RequestOp(request_range=m.RangeRequest(key=key))]
    failure += [m.RequestOp(request_range=m.RangeRequest(key=guard_key(g.key))) for g in guards]
    return m.TxnRequest(compare=[compare, *guard_compares], success=[op, *guard_ops], failure=failure)


def outcome(resp: Any, guards: Sequence[Guard], resolve: Resolve, retried: bool) -> Any:
    """The answer of a write's transaction: the response when it succeeded, what ``resolve`` makes
    of a failed object compare, else the GuardConflict of the guards that moved."""
    if resp.succeeded:
        return resp
    resolved = resolve(resp.responses[0].response_range, retried)
    if resolved is not None:
        return resolved
    current = [guard_value(g.key, r.response_range) for g, r in zip(guards, resp.responses[1:], strict=True)]
    raise GuardConflict([c for g, c in zip(guards, current, strict=True) if c.revision != g.revision])


def guard_value(key: str, response: Any) -> GuardValue:
    """A guard key's value and revision from a range response (revision 0: never set)."""
    if not response.kvs:
        return GuardValue(key, None, 0)
    kv = response.kvs[0]
    return GuardValue(key, codec.guard_decode(kv.value), int(kv.mod_revision))


def absent(ek: bytes) -> Any:
    """The compare of a create: the key does not exist."""
    m = rpc()
    return m.Compare(key=ek, target=m.Compare.CREATE, result=m.Compare.EQUAL, create_revision=0)


def expect(ek: bytes, expected_revision: int | None) -> Any:
    """The compare of an update or delete: the key exists, at ``expected_revision`` if given."""
    m = rpc()
    if expected_revision is None:
        return m.Compare(key=ek, target=m.Compare.VERSION, result=m.Compare.GREATER, version=0)
    return m.Compare(key=ek, target=m.Compare.MOD, result=m.Compare.EQUAL, mod_revision=expected_revision)


def create_resolver(key: str, value: bytes) -> Resolve:
    """A create's failed compare: KeyExists, unless a retry finds the value it wrote."""

    def resolve(current: Any, retried: bool) -> Any:
        if current.kvs:
            if retried and current.kvs[0].value == value:
                return current.kvs[0]  # our own first attempt committed before its answer was lost
            raise KeyExists(key)
        return None

    return resolve


def resolver(key: str, expected: int | None, value: bytes | None) -> Resolve:
    """An update's or delete's failed compare: KeyNotFound or RevisionConflict, unless a retried
    update finds the value it wrote."""

    def resolve(current: Any, retried: bool) -> Any:
        if not current.kvs:
            raise KeyNotFound(key)
        kv = current.kvs[0]
        if retried and value is not None and kv.value == value:
            return kv  # our own first attempt committed before its answer was lost
        if expected is not None and kv.mod_revision != expected:
            raise RevisionConflict(f"{key}: revision is {kv.mod_revision}, expected {expected}")
        return None

    return resolve


def committed_revision(resp: Any) -> int:
    """The revision a write committed at: the transaction's, or (a retried write that found its own
    earlier attempt) that key's."""
    if hasattr(resp, "header"):
        return int(resp.header.revision)
    return int(resp.mod_revision)
