"""The resource table: every kind ironpool serves (as registered in :mod:`ironpool.api.strategies`),
looked up by REST path, by apiVersion and kind, by CLI name, to its strategy and to its
subresources."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ironpool.api import errors
from ironpool.api.resource_info import ResourceInfo
from ironpool.api.strategies import STRATEGIES
from ironpool.api.strategy import Strategy
from ironpool.api.subresources import STATUS, Subresource

RESOURCES: tuple[ResourceInfo, ...] = tuple(s.info for s in STRATEGIES)

_BY_PATH: dict[tuple[str, str, str], ResourceInfo] = {(r.group, r.version, r.plural): r for r in RESOURCES}
_BY_KIND: dict[tuple[str, str], ResourceInfo] = {(r.api_version, r.kind): r for r in RESOURCES}
_BY_NAME: dict[str, ResourceInfo] = {}
for _r in RESOURCES:
    for _n in (_r.singular, _r.plural, _r.kind.lower(), *_r.short_names):
        if _n in _BY_NAME and _BY_NAME[_n] is not _r:  # pragma: no cover - guarded by a unit test
            raise RuntimeError(f"resource name {_n!r} is ambiguous")
        _BY_NAME[_n] = _r
        if _r.group:
            _BY_NAME[f"{_n}.{_r.group}"] = _r
            _BY_NAME[f"{_n}.{_r.version}.{_r.group}"] = _r


_STRATEGY_OF: dict[tuple[str, str], Strategy[Any]] = {
    (s.info.api_version, s.info.kind): s for s in STRATEGIES
}


def _declared(strategy: Strategy[Any]) -> dict[str, Subresource]:
    subs = ((STATUS,) if strategy.info.has_status else ()) + strategy.subresources
    names = [s.name for s in subs]
    if len(set(names)) != len(names):  # pragma: no cover - guarded by a unit test
        raise RuntimeError(f"{strategy.info.kind} declares a subresource twice: {names}")
    return {s.name: s for s in subs}


_SUBRESOURCES: dict[tuple[str, str], dict[str, Subresource]] = {
    (s.info.api_version, s.info.kind): _declared(s) for s in STRATEGIES
}


def strategy_for(info: ResourceInfo) -> Strategy[Any]:
    """The strategy of a served resource."""
    return _STRATEGY_OF[(info.api_version, info.kind)]


def subresources_of(info: ResourceInfo) -> Mapping[str, Subresource]:
    """The subresources a served resource declares, by name (``status`` first when it has one)."""
    return _SUBRESOURCES[(info.api_version, info.kind)]


def by_path(group: str, version: str, plural: str) -> ResourceInfo:
    """The resource served at ``/apis/{group}/{version}/{plural}`` (group ``""``: ``/api/v1``)."""
    info = _BY_PATH.get((group, version, plural))
    if info is None:
        where = f"{group}/{version}" if group else version
        raise errors.NotFound(
            message=f'the server could not find the requested resource "{plural}" in {where}',
            kind=plural, group=group,
        )
    return info


def by_kind(api_version: str, kind: str) -> ResourceInfo:
    """The resource of a manifest's ``apiVersion`` and ``kind``."""
    info = _BY_KIND.get((api_version, kind))
    if info is None:
        known = ", ".join(f"{r.api_version}/{r.kind}" for r in RESOURCES)
        raise errors.BadRequest(
            message=f'no kind "{kind}" is registered for version "{api_version}" (known kinds: {known})',
            kind=kind,
        )
    return info


def resolve(name: str) -> ResourceInfo:
    """A resource from a CLI name: singular, plural, short name or Kind, optionally ``.group``."""
    info = _BY_NAME.get(name.strip().lower())
    if info is None:
        known = ", ".join(
            f"{r.kind} ({', '.join((r.plural, *r.short_names))})" for r in RESOURCES
        )
        raise errors.NotFound(
            message=f'the server doesn\'t have a resource type "{name}" (known: {known})',
        )
    return info
