"""The apiserver's authorizer chain, as Kubernetes runs ``--authorization-mode=Node,RBAC``:

1. ``system:masters``: everything;
2. pool identities: the pool rules and the pool graph (:mod:`ironpool.apiserver.auth.pool_authorizer`);
3. everyone else: RBAC (:class:`.rbac.index.RBACIndex`), or everything in ``AlwaysAllow`` mode; a write
   of a role or binding also passes the escalation check (:mod:`.rbac.escalation`).

A refusal is a 403 in Kubernetes' wording (``machines.compute.ironcore.dev is forbidden: User "x"
cannot list resource "machines" in API group "compute.ironcore.dev" in the namespace "b"``), naming
the group the request used: a resource served under an alias group (:mod:`ironpool.api.group_aliases`)
is authorized per group, as Kubernetes authorizes a resource it serves in several groups. Pool
identities are authorized in IronCore's groups only.
"""

from __future__ import annotations

from dataclasses import dataclass

from ironpool.api import errors
from ironpool.api.resources import RESOURCES, ResourceInfo
from ironpool.apiserver.auth.authentication import ADMIN_GROUP, User
from ironpool.apiserver.auth.interface import Authorizer, Conditions
from ironpool.apiserver.auth.pool_authorizer import authorize_pool, forbidden, pool_subject
from ironpool.apiserver.auth.pool_graph import PoolGraph
from ironpool.apiserver.auth.rbac.escalation import BINDING_KINDS, ROLE_KINDS, check_escalation
from ironpool.apiserver.auth.rbac.index import RBACIndex
from ironpool.apiserver.auth.rbac.rules import Rule
from ironpool.store.interface import Document, Store

_GROUP_OF: dict[str, str] = {r.plural: r.group for r in RESOURCES}
_GRANTING = frozenset({"create", "update", "patch"})
GRANTING_KINDS = ROLE_KINDS | BINDING_KINDS


@dataclass(frozen=True)
class RulesReview:
    """A user's rules, for SelfSubjectRulesReview; ``incomplete`` when they do not tell everything."""

    resource_rules: tuple[Rule, ...]
    non_resource_rules: tuple[Rule, ...]
    incomplete: bool = False
    error: str = ""


_EVERYTHING = Rule(frozenset({"*"}), frozenset({"*"}), frozenset({"*"}), frozenset(), ())
_EVERYTHING_URL = Rule(frozenset({"*"}), frozenset(), frozenset(), frozenset(), ("*",))


@dataclass(frozen=True)
class Decision:
    """An answer to "may this user ...", for SelfSubjectAccessReview."""

    allowed: bool
    reason: str = ""


class Authorization:
    """The :data:`~ironpool.apiserver.auth.Authorizer` of an apiserver over ``store``; its indexes
    start with the apiserver (:meth:`start`) and hear of its commits (:meth:`committed`)."""

    def __init__(self, store: Store, mode: str = "RBAC") -> None:
        self.mode = mode
        self.graph = PoolGraph(store)
        self.rbac = RBACIndex(store) if mode == "RBAC" else None
        self.started = False

    async def start(self) -> None:
        if self.started:
            return
        await self.graph.start()
        if self.rbac is not None:
            await self.rbac.start()
        self.started = True

    async def stop(self) -> None:
        await self.graph.stop()
        if self.rbac is not None:
            await self.rbac.stop()

    def committed(self, info: ResourceInfo, key: str, doc: Document | None) -> None:
        if not self.started:
            return  # the mirrors list everything when they start
        self.graph.committed(info, key, doc)
        if self.rbac is not None:
            self.rbac.committed(info, key, doc)

    def __call__(self, user: User, verb: str, resource: str, namespace: str | None,
                 name: str | None, group: str | None = None) -> Conditions | None:
        if ADMIN_GROUP in user.groups:
            return None
        base, _, sub = resource.partition("/")
        home = _GROUP_OF.get(base, "")
        group = home if group is None else group
        subject = pool_subject(user)
        if subject is not None:
            if group != home:  # a poollet speaks IronCore's groups: its rules name no alias
                raise forbidden(user, verb, resource, namespace, name, group=group)
            return authorize_pool(subject, user, verb, resource, namespace, name, self.graph)
        if self.rbac is None:
            return None
        # Rules are matched per group, as Kubernetes matches them: a rule on compute.ironcore.dev
        # does not reach machines through compute.openkcm.dev (the default roles name both).
        if not self.rbac.allows(user, verb, group, base, sub, namespace, name):
            raise forbidden(user, verb, resource, namespace, name, group=group)
        if verb in _GRANTING and base in GRANTING_KINDS and not sub:
            index = self.rbac

            async def no_escalation(old: Document | None, new: Document | None, store: Store) -> None:
                check_escalation(index, user, verb, base, namespace, name, new)

            return Conditions(objects=no_escalation)
        return None

    def decide(self, user: User, verb: str, group: str, resource: str, subresource: str,
               namespace: str | None, name: str | None) -> Decision:
        """The answer for any resource attributes, served or not (SelfSubjectAccessReview)."""
        if ADMIN_GROUP in user.groups:
            return Decision(True, f"member of {ADMIN_GROUP}")
        combined = f"{resource}/{subresource}" if subresource else resource
        if pool_subject(user) is not None:
            if _GROUP_OF.get(resource) != group:
                return Decision(False)
            try:
                conditions = self(user, verb, combined, namespace, name)
            except errors.Forbidden as exc:
                return Decision(False, exc.message)
            # A condition (a required field selector, a check on the object) narrows, not refuses.
            return Decision(True, "" if conditions is None else "allowed for some objects only")
        if self.rbac is None:
            return Decision(True, "authorization mode AlwaysAllow")
        if self.rbac.allows(user, verb, group, resource, subresource, namespace, name):
            return Decision(True, "allowed by RBAC")
        return Decision(False)

    def rules_review(self, user: User, namespace: str | None) -> RulesReview:
        """What ``user`` may do in ``namespace`` as rules (SelfSubjectRulesReview): RBAC's rules;
        everything for ``system:masters`` and in AlwaysAllow mode; for a pool identity, whose rights
        follow its pool's graph object by object, an incomplete answer saying so."""
        if ADMIN_GROUP in user.groups or self.rbac is None:
            return RulesReview((_EVERYTHING,), (_EVERYTHING_URL,))
        if pool_subject(user) is not None:
            return RulesReview((), (), incomplete=True, error="a pool identity is authorized by its pool's "
                               "graph (the objects its Machines and Volumes reference), not by rules")
        rules = self.rbac.rules_for(user, namespace)
        return RulesReview(tuple(r for r in rules if not r.urls), tuple(r for r in rules if r.urls))

    def may_impersonate(self, user: User, group: str, resource: str, namespace: str | None,
                        name: str) -> bool:
        """Whether ``user`` may impersonate ``name`` of ``resource`` (``users``, ``groups``,
        ``serviceaccounts``, ``uids``, ``userextras/<key>``): the ``impersonate`` verb on it."""
        base, _, sub = resource.partition("/")
        return self.decide(user, "impersonate", group, base, sub, namespace, name).allowed

    def decide_url(self, user: User, verb: str, path: str) -> Decision:
        """The answer for a non-resource URL (``/version``, ``/apis``, ``/openapi/v3``)."""
        if ADMIN_GROUP in user.groups or self.rbac is None:
            return Decision(True)
        if pool_subject(user) is not None:
            return Decision(path in ("/version", "/api", "/apis") or path.startswith(("/api/", "/apis/",
                                                                                       "/openapi")))
        return Decision(self.rbac.allows_url(user, verb, path), "")


def authorize_url(authorize: Authorizer, user: User, verb: str, path: str) -> None:
    """Raise Forbidden unless ``user`` may ``verb`` the non-resource URL ``path`` (``/metrics``,
    ``/openapi/v3``, discovery), in Kubernetes' words; another authorizer than ours allows it."""
    if isinstance(authorize, Authorization) and not authorize.decide_url(user, verb, path).allowed:
        raise errors.Forbidden(f'forbidden: User "{user.name}" cannot {verb} path "{path}"')
