# Copyright: ironpool contributors
# SPDX-License-Identifier: Apache-2.0
"""ironpool.iaas.reservation against the in-memory apiserver: the spec it declares, waiting until
held or failing at once on a refusal (and removing what it made), asking again after a refusal,
check mode's dry run, bad options, absent."""

from __future__ import annotations

from typing import Any

import pytest

from ansible_collections.ironpool.iaas.plugins.modules import reservation

WEB = {"name": "web", "machines": {"x-small": 3}, "ttl": 600, "wait": False}


def _status(client: Any, name: str, verdict: str, message: str, parts: dict[str, int] | None = None,
            state: str = "Accepted") -> None:
    status: dict[str, Any] = {"conditions": [{"type": "Scheduled", "status": verdict, "reason": "x",
                                              "message": message}]}
    if parts:
        status["pools"] = [{"ref": p, "state": state, "resources": {"class/machine.x-small": str(n)}}
                           for p, n in parts.items()]
        accepted = "True" if state == "Accepted" else "False"
        status["conditions"].append({"type": "Accepted", "status": accepted, "reason": state})
    client.set_status("Reservation", name, status)


def test_declares_the_spec_and_reports_the_plan(run_module: Any, client: Any) -> None:
    out = run_module(reservation.main, {**WEB, "pools": ["a", "b"], "pool_selector": {"tier": "gold"},
                                        "zone_spread": 1})
    assert not out.failed, out.result
    assert out.result["changed"] and out.result["action"] == "created"
    stored = client.stored("Reservation", "web")
    assert stored["spec"] == {"resources": {"class/machine.x-small": "3"}, "ttlSecondsAfterCreation": 600,
                              "pools": [{"name": "a"}, {"name": "b"}], "poolSelector": {"tier": "gold"},
                              "zoneSpread": {"maxSkew": 1}}
    _status(client, "web", "True", "3 machines on 1 pool: a (3 x-small)", {"a": 3})
    again = run_module(reservation.main, {**WEB, "pools": ["a", "b"], "pool_selector": {"tier": "gold"},
                                          "zone_spread": 1})
    assert not again.result["changed"] and again.result["state"] == "Accepted" and again.result["fits"]
    assert again.result["pools"] == {"a": {"class/machine.x-small": "3"}}


def test_a_refusal_fails_at_once_naming_the_shortfall_and_leaves_nothing(
        run_module: Any, client: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    made = run_module(reservation.main, WEB)  # made without waiting; the scheduler then refuses it
    assert not made.failed
    _status(client, "web", "False", "needs 3 x-small: 2 fit (a (2 x-small)); short by 1 x-small")
    # The next run asks again (a refusal is final for the object): a new one, refused as well.
    refused = {"status": {"conditions": [{"type": "Scheduled", "status": "False", "reason": "Unschedulable",
                                          "message": "needs 3 x-small: 2 fit; short by 1 x-small"}]}}
    real_create = client.create_raw

    def create_and_refuse(info: Any, obj: Any, namespace: Any = None, **kw: Any) -> Any:
        stored = real_create(info, obj, namespace, **kw)
        if info.kind == "Reservation" and not kw.get("dry_run"):
            client.set_status("Reservation", stored["metadata"]["name"], refused["status"])
            stored = client.stored("Reservation", stored["metadata"]["name"])
        return stored

    monkeypatch.setattr(client, "create_raw", create_and_refuse)
    out = run_module(reservation.main, {**WEB, "wait": True, "wait_timeout": 5})
    assert out.failed and out.result["action"] == "recreated"
    assert out.result["msg"] == ("reservation default/web was rejected: needs 3 x-small: 2 fit; short by "
                                 "1 x-small; it was removed, holding nothing")
    assert client.stored("Reservation", "web") is None


def test_check_mode_asks_a_dry_run_and_fails_when_it_would_not_fit(
        run_module: Any, client: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from ironpool.client.predict import SetAnswer

    answers = iter([SetAnswer(True, "3 machines on 1 pool: a (3 x-small)",
                              {"a": {"class/machine.x-small": "3"}}),
                    SetAnswer(False, "needs 30 x-small: 14 fit; short by 16 x-small", {})])
    asked: list[Any] = []

    def predict(client_: Any, namespace: str, spec: Any, timeout: float = 30.0) -> Any:
        asked.append(spec)
        return next(answers)

    monkeypatch.setattr(reservation, "predict_reservation", predict)
    fits = run_module(reservation.main, WEB, check_mode=True)
    assert not fits.failed and fits.result["fits"] and fits.result["state"] == "Fits"
    assert asked[0] == {"resources": {"class/machine.x-small": "3"}}  # what is held, not for how long
    too_big = run_module(reservation.main, {**WEB, "machines": {"x-small": 30}}, check_mode=True)
    assert too_big.failed and "would not fit: needs 30 x-small" in too_big.result["msg"]
    assert client.writes == []


@pytest.mark.parametrize(("args", "words"), [
    ({"machines": {"x-small": 0}}, "machines.x-small: 0 must be a whole number"),
    ({"machines": {"huge": 1}}, "machines.huge: there is no MachineClass named 'huge'"),
    ({"machines": None, "cpu": "2", "memory": "lots"}, "memory: 'lots' is not a size"),
])
def test_bad_options_are_named_and_nothing_is_written(run_module: Any, client: Any, args: dict[str, Any],
                                                      words: str) -> None:
    out = run_module(reservation.main, {**WEB, **args})
    assert out.failed and words in out.result["msg"]
    assert client.writes == []


def test_absent_deletes(run_module: Any, client: Any) -> None:
    run_module(reservation.main, WEB)
    out = run_module(reservation.main, {"name": "web", "state": "absent"})
    assert out.result["changed"] and out.result["action"] == "deleted"
    assert client.stored("Reservation", "web") is None
