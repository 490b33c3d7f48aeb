"""One RBAC rule compiled for matching, and Kubernetes' matching semantics (``rbac/v1`` helpers):
``*`` matches every verb, group or resource; ``*/status`` every resource's status subresource;
``resourceNames`` limit a rule to named objects (so never to list, watch or create); a non-resource
URL ending in ``*`` matches by prefix."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

ALL = "*"


@dataclass(frozen=True, slots=True)
class Rule:
    """A PolicyRule as sets, for matching."""

    verbs: frozenset[str]
    groups: frozenset[str]
    resources: frozenset[str]
    names: frozenset[str]
    urls: tuple[str, ...]

    @classmethod
    def of(cls, raw: Any) -> Rule:
        """From a stored rule (malformed parts count as nothing: validation keeps them out)."""
        def strings(key: str) -> list[str]:
            value = raw.get(key) if isinstance(raw, dict) else None
            return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []

        return cls(frozenset(strings("verbs")), frozenset(strings("apiGroups")),
                   frozenset(strings("resources")), frozenset(strings("resourceNames")),
                   tuple(strings("nonResourceURLs")))

    def allows(self, verb: str, group: str, resource: str, subresource: str, name: str | None) -> bool:
        if ALL not in self.verbs and verb not in self.verbs:
            return False
        if ALL not in self.groups and group not in self.groups:
            return False
        if not self._resource(resource, subresource):
            return False
        return not self.names or (name is not None and name in self.names)

    def _resource(self, resource: str, subresource: str) -> bool:
        res = self.resources
        if ALL in res:
            return True
        combined = f"{resource}/{subresource}" if subresource else resource
        return combined in res or (bool(subresource) and f"*/{subresource}" in res)

    def allows_url(self, verb: str, path: str) -> bool:
        if ALL not in self.verbs and verb not in self.verbs:
            return False
        return any(url in (ALL, path) or (url.endswith(ALL) and path.startswith(url[:-1]))
                   for url in self.urls)


def compile_rules(raw: Any) -> tuple[Rule, ...]:
    return tuple(Rule.of(r) for r in raw) if isinstance(raw, list) else ()
