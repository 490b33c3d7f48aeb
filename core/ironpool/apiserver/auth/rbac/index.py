"""Who may do what, from the RBAC objects in the store, answered from memory.

A :class:`~ironpool.store.mirror.StoreMirror` keeps the Roles, ClusterRoles and
bindings current (with several apiservers too), with one watch over the whole RBAC group rather
than one per kind: every store watcher wakes on every write, so each watch costs every create a
little. Bindings are indexed by subject (``User``/``Group``
and name), so finding a user's bindings costs a few dictionary lookups whatever their number; the
rules a user has in one namespace are computed once and cached until any RBAC object changes.
Every authenticated user is also in the group ``system:authenticated``, as in Kubernetes.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from dataclasses import dataclass

from ironpool.api.rbac import RBAC_GROUP, RBAC_VERSION
from ironpool.api.resource_info import ResourceInfo
from ironpool.api.resources import by_path
from ironpool.apiserver.auth.authentication import User
from ironpool.apiserver.auth.rbac.rules import ALL, Rule, compile_rules
from ironpool.store.interface import Document, RevisionCompacted, Store, StoreError
from ironpool.store.mirror import StoreMirror

log = logging.getLogger("ironpool.apiserver.auth.rbac")

AUTHENTICATED_GROUP = "system:authenticated"
RBAC_KINDS = tuple(by_path(RBAC_GROUP, RBAC_VERSION, p)
                   for p in ("roles", "clusterroles", "rolebindings", "clusterrolebindings"))
_CACHE_LIMIT = 10_000

Subject = tuple[str, str]
"""(``User`` or ``Group``, name)"""


@dataclass(frozen=True, slots=True)
class Binding:
    """A RoleBinding (``namespace`` set) or ClusterRoleBinding, reduced to what matching needs."""

    namespace: str | None
    role_kind: str
    role_name: str
    subjects: tuple[Subject, ...]

    @classmethod
    def of(cls, doc: Document, namespace: str | None) -> Binding:
        ref = doc.get("roleRef") or {}
        subjects = tuple((str(s.get("kind")), str(s.get("name"))) for s in doc.get("subjects") or []
                         if isinstance(s, dict))
        return cls(namespace, str(ref.get("kind") or ""), str(ref.get("name") or ""), subjects)


class GroupMirror(StoreMirror):
    """A :class:`StoreMirror` of kinds of one API group that follows them with a single watch of the
    group's key prefix."""

    def _followers(self, loop: asyncio.AbstractEventLoop) -> list[asyncio.Task[None]]:
        return [loop.create_task(self._follow_group(), name="ironpool-mirror-rbac")]

    async def _follow_group(self) -> None:
        prefix = f"/registry/{self.infos[0].group}/"
        by_prefix = [(info.prefix(None), info) for info in self.infos]
        cursor = self.revision
        while True:
            try:
                async for event in self.store.watch(prefix, cursor):
                    cursor = event.revision
                    info = next((i for p, i in by_prefix if event.key.startswith(p)), None)
                    if info is not None:
                        self._offer(info, event.key, None if event.type == "DELETED" else event.object,
                                    event.revision)
                    self._prune(cursor)
                return
            except RevisionCompacted:
                cursor = min([await self._relist(info) for info in self.infos])
            except StoreError as exc:
                log.warning("mirror of RBAC objects: watch failed (%s); resuming in 1s", exc)
                await asyncio.sleep(1.0)


@dataclass(frozen=True, slots=True)
class Grants:
    """A user's rules in one namespace, and what the plain ones among them (no ``*``, no names)
    allow as a set of ``(verb, group, resource[/subresource])``."""

    rules: tuple[Rule, ...]
    exact: frozenset[tuple[str, str, str]]

    @classmethod
    def of(cls, rules: tuple[Rule, ...]) -> Grants:
        exact = {(v, g, r) for rule in rules if not rule.names and not rule.urls
                 for v in rule.verbs for g in rule.groups for r in rule.resources}
        return cls(rules, frozenset(t for t in exact if ALL not in t and not t[2].startswith("*/")))


class RBACIndex:
    """Rules by role, bindings by subject, and each user's rules per namespace (cached)."""

    def __init__(self, store: Store) -> None:
        self.roles: dict[tuple[str, str], tuple[Rule, ...]] = {}
        self.cluster_roles: dict[str, tuple[Rule, ...]] = {}
        self.bindings: dict[str, Binding] = {}
        self.by_subject: dict[Subject, set[str]] = {}
        self._cache: dict[tuple[User, str | None], Grants] = {}
        self.mirror = GroupMirror(store, RBAC_KINDS, self._apply)

    async def start(self) -> None:
        await self.mirror.start()

    async def stop(self) -> None:
        await self.mirror.stop()

    def committed(self, info: ResourceInfo, key: str, doc: Document | None) -> None:
        self.mirror.committed(info, key, doc)

    def _apply(self, info: ResourceInfo, key: str, doc: Document | None) -> None:
        self._cache.clear()
        meta = (doc or {}).get("metadata") or {}
        name = key.rsplit("/", 1)[-1]
        if info.kind == "Role":
            ns = info.namespace_of_key(key) or ""
            if doc is None:
                self.roles.pop((ns, name), None)
            else:
                self.roles[(ns, name)] = compile_rules(doc.get("rules"))
        elif info.kind == "ClusterRole":
            if doc is None:
                self.cluster_roles.pop(name, None)
            else:
                self.cluster_roles[name] = compile_rules(doc.get("rules"))
        else:
            old = self.bindings.pop(key, None)
            for subject in old.subjects if old else ():
                keys = self.by_subject.get(subject)
                if keys is not None:
                    keys.discard(key)
                    if not keys:
                        del self.by_subject[subject]
            if doc is not None:
                binding = Binding.of(doc, meta.get("namespace") if info.kind == "RoleBinding" else None)
                self.bindings[key] = binding
                for subject in binding.subjects:
                    self.by_subject.setdefault(subject, set()).add(key)

    def rules_for(self, user: User, namespace: str | None) -> tuple[Rule, ...]:
        """Every rule that applies to ``user`` in ``namespace`` (None: at the cluster scope)."""
        return self._grants(user, namespace).rules

    def _grants(self, user: User, namespace: str | None) -> Grants:
        cached = self._cache.get((user, namespace))
        if cached is not None:
            return cached
        keys: set[str] = set()
        for subject in _subjects(user):
            keys.update(self.by_subject.get(subject, ()))
        rules: list[Rule] = []
        for key in sorted(keys):  # a stable order: the same answer (and reason) on every apiserver
            b = self.bindings[key]
            if b.namespace is not None and b.namespace != namespace:
                continue
            if b.role_kind == "ClusterRole":
                rules.extend(self.cluster_roles.get(b.role_name, ()))
            elif b.namespace is not None:
                rules.extend(self.roles.get((b.namespace, b.role_name), ()))
        if len(self._cache) >= _CACHE_LIMIT:
            self._cache.clear()
        result = self._cache[(user, namespace)] = Grants.of(tuple(rules))
        return result

    def allows(self, user: User, verb: str, group: str, resource: str, subresource: str,
               namespace: str | None, name: str | None) -> bool:
        grants = self._grants(user, namespace)
        if (verb, group, f"{resource}/{subresource}" if subresource else resource) in grants.exact:
            return True  # the common case, one set lookup
        return any(r.allows(verb, group, resource, subresource, name) for r in grants.rules)

    def allows_url(self, user: User, verb: str, path: str) -> bool:
        return any(r.allows_url(verb, path) for r in self.rules_for(user, None))


def _subjects(user: User) -> Iterable[Subject]:
    yield ("User", user.name)
    yield ("Group", AUTHENTICATED_GROUP)
    for group in user.groups:
        yield ("Group", group)
