"""IPAM's guard keys as pure functions: what stored NICs and Prefixes claim, and how claims taken and
given back change the keys (conflicts between small and large ranges, releases only by the holder)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from ironpool.apiserver.ipam.guards import BLOCK, ROOTS, Claim, Taken, apply_claims, claims
from ironpool.apiserver.ipam.index import IPAMIndex
from ironpool.store.sqlite import SQLiteStore

NS = "default"


def nic(name: str, ips: list[dict[str, Any]], effective: list[str],
        mac: str = "52:54:00:00:00:01") -> dict[str, Any]:
    return {"kind": "NetworkInterface", "metadata": {"name": name, "namespace": NS, "uid": f"u-{name}"},
            "spec": {"networkRef": {"name": "lab"}, "macAddress": mac, "ips": ips},
            "status": {"ips": effective}}


def rng(container: str, start: int, size: int, holder: str, version: int = 4) -> Claim:
    return Claim("range", NS, container, f"{version}/{start}+{size}", holder)


async def test_what_nics_and_prefixes_claim(tmp_path: Path) -> None:
    store = SQLiteStore(str(tmp_path / "ipam.db"))
    index = IPAMIndex(store)  # empty: no Prefix is known
    doc = nic("web", [{"value": "10.0.0.9"},
                      {"ephemeral": {"prefixTemplate": {"spec": {"parentRef": {"name": "lab-v4"}}}}},
                      {"ephemeral": {"prefixTemplate": {"spec": {"prefix": "192.168.0.7/32"}}}}],
              ["10.0.0.9", "10.0.0.2", "192.168.0.7"])
    got = claims(index, "NetworkInterface", doc)
    owner = "nic/web/u-web"
    assert Claim("mac", NS, "lab", "52:54:00:00:00:01", owner) in got
    assert {c.item for c in got if c.kind == "address"} == {"10.0.0.9", "10.0.0.2", "192.168.0.7"}
    assert rng("lab-v4", 167772162, 1, f"{owner}/1") in got  # the ephemeral address in its parent
    assert rng(ROOTS, 3232235527, 1, f"{owner}/2") in got  # a root /32 of its own
    assert len(got) == 6  # the literal holds no range
    prefix = {"kind": "Prefix", "metadata": {"name": "sub", "namespace": NS, "uid": "u-sub"},
              "spec": {"prefix": "10.0.0.16/28", "parentRef": {"name": "lab-v4"}}}
    assert claims(index, "Prefix", prefix) == {rng("lab-v4", 167772176, 16, "prefix/sub/u-sub")}
    view = {**prefix, "metadata": {**prefix["metadata"], "ownerReferences": [
        {"kind": "NetworkInterface", "name": "web", "uid": "u-web", "controller": True}]}}
    assert claims(index, "Prefix", view) == set() and claims(index, "Machine", prefix) == set()
    await store.close()


def test_small_and_large_ranges_exclude_each_other() -> None:
    values: dict[str, Any] = {}
    apply_claims(values, [], [rng("p", 16, 16, "prefix/a/1"), rng("p", 2, 1, "nic/x/1/0")])
    block_key = f"ipam/blocks/{NS}/p/4/0"
    assert values[block_key] == {"16": ["16", "prefix/a/1"], "2": ["1", "nic/x/1/0"]}
    assert values[f"ipam/ranges/{NS}/p/4"] == {"blocks": ["0"], "ranges": {}}
    for taken in (rng("p", 20, 1, "nic/y/2/0"), rng("p", 0, 4, "nic/y/2/0"), rng("p", 0, 64, "prefix/b/3")):
        with pytest.raises(Taken) as exc:
            apply_claims(dict(values), [], [taken])
        assert exc.value.key == block_key
    with pytest.raises(Taken) as exc:  # a block-sized range where small ones already are
        apply_claims(dict(values), [], [rng("p", 0, BLOCK, "prefix/big/4")])
    assert exc.value.span == "0+256"
    apply_claims(values, [], [rng("p", 512, 1024, "prefix/big/4")])
    with pytest.raises(Taken):
        apply_claims(dict(values), [], [rng("p", 600, 1, "nic/z/5/0")])


def test_releases_give_back_only_what_the_holder_holds() -> None:
    values: dict[str, Any] = {}
    mine = rng("p", 2, 1, "nic/x/1/0")
    apply_claims(values, [], [mine, Claim("address", NS, "lab", "10.0.0.2", "nic/x/1")])
    apply_claims(values, [rng("p", 2, 1, "nic/x/OTHER-UID/0")], [])  # a newer object of the name: kept
    assert values[f"ipam/blocks/{NS}/p/4/0"] == {"2": ["1", "nic/x/1/0"]}
    apply_claims(values, [mine, Claim("address", NS, "lab", "10.0.0.2", "nic/x/1")], [])
    assert values[f"ipam/blocks/{NS}/p/4/0"] is None and values[f"ipam/ranges/{NS}/p/4"] is None
    assert values[f"ipam/addresses/{NS}/lab/10.0.0.2"] is None


def test_ipv6_sizes_are_strings() -> None:
    values: dict[str, Any] = {}
    apply_claims(values, [], [rng(ROOTS, 1 << 120, 1 << 64, "prefix/v6/1", version=6)])
    assert values[f"ipam/ranges/{NS}/{ROOTS}/6"]["ranges"] == {str(1 << 120): [str(1 << 64), "prefix/v6/1"]}
