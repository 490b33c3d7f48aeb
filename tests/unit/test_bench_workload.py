"""The benchmark workload is a contract: the same seed gives the same sequences (figures measured on
other schedulers with it stay comparable), and more requests extend the sequence."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parents[2]


def _workload() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_workload", REPO / "bench" / "workload.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_workload"] = module
    spec.loader.exec_module(module)
    return module


wl = _workload()


def test_seed_one_gives_the_published_sequence() -> None:
    w = wl.generate(4, 6, 1)
    assert [(h["type"], h["zone"]) for h in w["hosts"]] == [
        ("medium", "az2"), ("small", "az3"), ("small", "az1"), ("medium", "az2")]
    assert [r["class"] for r in w["requests"]] == ["m.16", "g.16", "c.4", "g.2", "c.2", "m.16"]
    assert w["requests"][0]["uuid"] == "06e7eb2b-7444-4772-892d-0e234374a666"
    assert w["hosts"][0]["vcpu"] == 64 and w["hosts"][0]["memory_mib"] == 256 * 1024
    assert len(w["classes"]) == 12 and abs(sum(c["share"] for c in w["classes"].values()) - 1) < 1e-9


def test_more_requests_or_hosts_extend_the_same_sequences() -> None:
    short, long = wl.generate(10, 50, 3), wl.generate(20, 500, 3)
    assert long["requests"][:50] == short["requests"] and long["hosts"][:10] == short["hosts"]
    assert wl.generate(10, 50, 4)["requests"] != short["requests"]


def test_summary_counts_placements_bounds_and_overcommit() -> None:
    w = wl.generate(3, 4, 1)
    cls = w["classes"]
    host = w["hosts"][1]  # a small host: 32 vCPU, 128 GiB
    assignment = [host["name"], None, host["name"], host["name"]]  # m.16 + c.4 + g.2: 144 GiB
    result = wl.summarize(w, assignment, 2.0, [0.001, 0.003, 0.002], note="x")
    assert (result["placed"], result["unschedulable"], result["handled"]) == (3, 1, 4)
    assert result["placements_per_s"] == 1.5 and result["latency_ms"]["p50"] == 2.0
    memory = sum(cls[r["class"]]["memory_mib"] for r, a in zip(w["requests"], assignment, strict=True) if a)
    assert memory > host["memory_mib"] and result["overcommitted_hosts"] == 1
    assert result["utilization_of_used_hosts"]["vcpu"] == round(22 / 32, 4)
    assert result["hosts_used"] == 1 and result["note"] == "x"
