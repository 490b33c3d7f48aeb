"""What a profile may leave out: the framework itself works out what an object demands, so a profile
without ClassAvailable still charges every placement its class; a profile that disables a plugin
another one needs is refused when the scheduler starts, naming both."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from ironpool.scheduler import SchedulerCore, parse_config
from ironpool.scheduler.cache import SchedulerCache
from ironpool.scheduler.config import ConfigError
from ironpool.scheduler.framework.interface import ClassStaticScorePlugin
from ironpool.scheduler.framework.profile import Framework, RequirementError
from ironpool.scheduler.model import request_from_json
from ironpool.scheduler.plugins import REGISTRY, SCORING_STRATEGIES
from ironpool.scheduler.plugins.volume_locality import VolumeLocality

from tests.scheduler.sched_docs import machine, machine_class, machine_pool


def core_without(*disabled: str, strategy: str = "LeastAllocated") -> SchedulerCore:
    return SchedulerCore(parse_config({"profiles": [{"name": "p", "strategy": strategy,
                                                     "disabledPlugins": list(disabled)}]}))


def place(core: SchedulerCore, name: str, cls: str, **spec: object) -> tuple[str | None, str]:
    d = core.schedule(request_from_json("machine", machine(name, cls, **spec)))
    if d.pool is not None:
        core.cache.observe_bound("machine", d.request.key, d.pool, d.request.class_name)
    return d.pool, d.message


@pytest.mark.parametrize("strategy", SCORING_STRATEGIES)
@pytest.mark.parametrize("tolerations", [None, [{"key": "other", "operator": "Exists"}]])
def test_without_class_available_every_placement_is_still_charged_its_class(
        strategy: str, tolerations: list[dict[str, str]] | None) -> None:
    """The index (plain Machines) and the scan (tolerations) both charge the class's demand."""
    core = core_without("ClassAvailable", strategy=strategy)
    core.set_class("machine", machine_class("x", 2, "2Gi"))
    core.set_pool("machine", machine_pool("offers-y-only", 4, "4Gi", classes=["y"]))
    spec = {"tolerations": tolerations} if tolerations else {}
    assert place(core, "a", "x", **spec)[0] == "offers-y-only"  # nothing asks whether it offers x now
    assert place(core, "b", "x", **spec)[0] == "offers-y-only"
    assert place(core, "c", "x", **spec) == (None, "0/1 pools: 1 have too little cpu")
    assert core.cache.pools[("machine", "offers-y-only")].used == {"cpu": 4000, "memory": 4 * 2**30}


def test_without_class_available_an_unknown_class_still_waits_for_its_class() -> None:
    core = core_without("ClassAvailable")
    core.set_pool("machine", machine_pool("p", 64, "64Gi"))
    assert place(core, "a", "ghost") == (None, "machine class ghost not found")
    core.set_class("machine", machine_class("ghost", 1, "1Gi"))
    assert place(core, "a", "ghost")[0] == "p"


def test_a_profile_that_disables_a_plugin_another_needs_is_refused_naming_both() -> None:
    with pytest.raises(ConfigError, match=r"VolumeLocality needs VolumeBinding: .* enable VolumeBinding or "
                                          r"disable VolumeLocality too"):
        parse_config({"profiles": [{"name": "p", "disabledPlugins": ["VolumeBinding"]}]})
    # Disabling both, or what nothing needs, is a profile like any other.
    parse_config({"profiles": [{"name": "p", "disabledPlugins": ["VolumeBinding", "VolumeLocality"]}]})
    for name in ("ClassAvailable", "ResourcesFit", "TopologySpread"):
        parse_config({"profiles": [{"name": "p", "disabledPlugins": [name]}]})
    # A framework built by hand is held to the same.
    with pytest.raises(RequirementError, match="VolumeLocality needs VolumeBinding"):
        Framework("p", SchedulerCache(), [VolumeLocality(), REGISTRY["LeastAllocated"]()])


def test_the_scheduler_command_refuses_such_a_profile_at_start(tmp_path: Path) -> None:
    config = tmp_path / "scheduler.yaml"
    config.write_text("profiles:\n  - name: local\n    disabledPlugins: [VolumeBinding]\n")
    done = subprocess.run(
        [sys.executable, "-m", "ironpool.cli.main", "scheduler", "--server", "http://127.0.0.1:9",
         "--config", str(config), "--no-leader-elect"],
        capture_output=True, text=True, timeout=60, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    assert done.returncode == 2, done.stderr
    assert "VolumeLocality needs VolumeBinding" in done.stderr and "--config" in done.stderr


def test_scoring_strategies_are_the_class_static_scorers() -> None:
    assert SCORING_STRATEGIES == ("LeastAllocated", "MostAllocated")
    for name in SCORING_STRATEGIES:
        core = core_without(strategy=name)
        fw = core.frameworks["p"]
        assert isinstance(fw.strategy, ClassStaticScorePlugin) and fw.strategy.name == name
        assert fw.index is not None
    with pytest.raises(ConfigError, match=r"strategy: .*must be one of LeastAllocated, MostAllocated"):
        parse_config({"profiles": [{"name": "p", "strategy": "TopologySpread"}]})
