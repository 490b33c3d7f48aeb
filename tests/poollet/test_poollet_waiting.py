"""What a Machine or Volume waits for is typed: the reconcilers ask whether a Secret is missing (no
watch announces one) or only network interfaces, and conditions and Events say it in words."""

from __future__ import annotations

from ironpool.poollet.waiting import Dependency, Waiting, waiting_message


def test_waiting_reasons_read_as_the_status_says_them() -> None:
    reasons = [Waiting(Dependency.SECRET, "default/ign", "has no key 'ignition'"),
               Waiting(Dependency.FIELD, "spec.resources.storage", "missing or zero")]
    assert waiting_message(reasons) == (
        "waiting for Secret default/ign (has no key 'ignition'); spec.resources.storage (missing or zero)")


def test_only_secrets_are_looked_for_again() -> None:
    assert Waiting(Dependency.SECRET, "default/s", "not found").polled
    watched = [kind for kind in Dependency if kind is not Dependency.SECRET]
    assert not any(Waiting(kind, "x", "not found").polled for kind in watched)
