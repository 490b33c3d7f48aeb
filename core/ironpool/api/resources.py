"""The resource table: every kind ironpool serves (as registered in :mod:`ironpool.api.strategies`),
and each again under the aliases of its group (:mod:`ironpool.api.group_aliases`), looked up by REST
path, by apiVersion and kind, by CLI name, to its strategy and to its subresources.

:data:`RESOURCES` are the kinds in their own groups, what everything stored is and every component
works with; :data:`SERVED` adds the aliases, what the API serves and lists. A plain name (``machines``,
``ma``) is the kind in its own group; an alias is named with its group (``machines.compute.openkcm.dev``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from ironpool.api import errors
from ironpool.api.group_aliases import GROUP_ALIASES, fold_group_case
from ironpool.api.resource_info import ResourceInfo
from ironpool.api.strategies import STRATEGIES
from ironpool.api.strategy import Strategy
from ironpool.api.subresources import STATUS, Subresource

RESOURCES: tuple[ResourceInfo, ...] = tuple(s.info for s in STRATEGIES)
#: every kind of an aliased group again, under each alias (stored as the kind it is an alias of)
ALIASES: tuple[ResourceInfo, ...] = tuple(
    replace(r, group=alias, alias_of=r) for alias, home in GROUP_ALIASES.items() for r in RESOURCES
    if r.group == home
)
#: what the API serves: the kinds in their own groups first (kubectl prefers the first group that
#: serves a plain resource name), then the aliases
SERVED: tuple[ResourceInfo, ...] = RESOURCES + ALIASES

_BY_PATH: dict[tuple[str, str, str], ResourceInfo] = {(r.group, r.version, r.plural): r for r in SERVED}
_BY_KIND: dict[tuple[str, str], ResourceInfo] = {(r.api_version, r.kind): r for r in SERVED}
_BY_NAME: dict[str, ResourceInfo] = {}
for _r in SERVED:
    for _n in (_r.singular, _r.plural, _r.kind.lower(), *_r.short_names):
        if _r.alias_of is None:
            if _n in _BY_NAME and _BY_NAME[_n] is not _r:  # pragma: no cover - guarded by a unit test
                raise RuntimeError(f"resource name {_n!r} is ambiguous")
            _BY_NAME[_n] = _r
        if _r.group:
            _BY_NAME[f"{_n}.{_r.group}"] = _r
            _BY_NAME[f"{_n}.{_r.version}.{_r.group}"] = _r


_STRATEGY_OF: dict[tuple[str, str], Strategy[Any]] = {
    (s.info.api_version, s.info.kind): s for s in STRATEGIES
}
_STRATEGY_OF.update(
    {(a.api_version, a.kind): _STRATEGY_OF[(a.canonical.api_version, a.kind)] for a in ALIASES}
)


def _declared(strategy: Strategy[Any]) -> dict[str, Subresource]:
    subs = ((STATUS,) if strategy.info.has_status else ()) + strategy.subresources
    names = [s.name for s in subs]
    if len(set(names)) != len(names):  # pragma: no cover - guarded by a unit test
        raise RuntimeError(f"{strategy.info.kind} declares a subresource twice: {names}")
    return {s.name: s for s in subs}


_SUBRESOURCES: dict[tuple[str, str], dict[str, Subresource]] = {
    (s.info.api_version, s.info.kind): _declared(s) for s in STRATEGIES
}
_SUBRESOURCES.update(
    {(a.api_version, a.kind): _SUBRESOURCES[(a.canonical.api_version, a.kind)] for a in ALIASES}
)


def strategy_for(info: ResourceInfo) -> Strategy[Any]:
    """The strategy of a served resource (an alias's is its canonical resource's)."""
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
    """The resource of a manifest's ``apiVersion`` and ``kind``; the group's case does not matter
    (``compute.OpenKCM.dev/v1alpha1`` is ``compute.openkcm.dev/v1alpha1``)."""
    info = _BY_KIND.get((api_version, kind))
    if info is None:  # folded only on a miss: the served spelling costs one lookup
        info = _BY_KIND.get((fold_group_case(api_version), kind))
    if info is None:
        known = ", ".join(f"{r.api_version}/{r.kind}" for r in SERVED)
        raise errors.BadRequest(
            message=f'no kind "{kind}" is registered for version "{api_version}" (known kinds: {known})',
            kind=kind,
        )
    return info


def resolve(name: str) -> ResourceInfo:
    """A resource from a CLI name: singular, plural, short name or Kind, optionally ``.group`` (an
    alias group only so: a plain name is the kind in its own group)."""
    info = _BY_NAME.get(name.strip().lower())
    if info is None:
        known = ", ".join(
            f"{r.kind} ({', '.join((r.plural, *r.short_names))})" for r in RESOURCES
        )
        raise errors.NotFound(
            message=f'the server doesn\'t have a resource type "{name}" (known: {known})',
        )
    return info
