# Copyright: ironpool contributors
# SPDX-License-Identifier: Apache-2.0
"""ironpool.iaas.namespace against the in-memory apiserver: create, idempotence, labels, check mode,
absent."""

from __future__ import annotations

from typing import Any

from ansible_collections.ironpool.iaas.plugins.modules import namespace


def test_creates_labels_and_deletes_a_namespace(run_module: Any, client: Any) -> None:
    predicted = run_module(namespace.main, {"name": "team-a"}, check_mode=True, diff=True)
    assert predicted.result["action"] == "created" and client.writes == []
    assert predicted.result["diff"]["after"]["metadata"] == {"name": "team-a"}
    first = run_module(namespace.main, {"name": "team-a", "labels": {"team": "a"}})
    assert first.result["changed"] and first.result["namespace_object"]["metadata"]["labels"] == {"team": "a"}
    again = run_module(namespace.main, {"name": "team-a", "labels": {"team": "a"}})
    assert not again.result["changed"] and again.result["action"] == "unchanged"
    relabeled = run_module(namespace.main, {"name": "team-a", "labels": {"team": "b"}}, diff=True)
    assert relabeled.result["action"] == "updated"
    assert relabeled.result["diff"]["before"]["metadata"]["labels"] == {"team": "a"}
    assert client.stored("Namespace", "team-a", None)["metadata"]["labels"] == {"team": "b"}
    gone = run_module(namespace.main, {"name": "team-a", "state": "absent"})
    assert gone.result["action"] == "deleted" and client.stored("Namespace", "team-a", None) is None
    assert client.writes == [("create", "Namespace", "team-a"), ("patch", "Namespace", "team-a"),
                             ("delete", "Namespace", "team-a")]


def test_a_bad_name_fails_naming_the_option(run_module: Any, client: Any) -> None:
    out = run_module(namespace.main, {"name": "Team_A"})
    assert out.failed and out.result["msg"].startswith("name: ") and client.writes == []
