"""Scheduler configuration (YAML): profiles, queue timings, assume TTL.

    profiles:
      - name: default
        strategy: MostAllocated        # or LeastAllocated (the default: spread)
        disabledPlugins: [TopologySpread]
        pluginArgs:
          MostAllocated: {mode: dot}
          TopologySpread: {maxSkew: 1, whenUnsatisfiable: DoNotSchedule}
    queue: {initialBackoffSeconds: 1, maxBackoffSeconds: 10, unschedulableFlushSeconds: 300}
    assumeTTLSeconds: 30
    schedulerName: default             # handle objects annotated scheduler.ironpool.dev/scheduler-name

A Machine/Volume picks a profile with the annotation ``scheduler.ironpool.dev/profile``; without it the
first profile schedules it. A profile that disables a plugin another one needs (VolumeLocality needs
VolumeBinding) is refused, naming both. Several schedulers (or scheduler processes) may run against
one apiserver: its capacity admission refuses a bind that would overcommit a pool, and the refused
scheduler tries again with what its watch then shows.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from ironpool.scheduler.cache import SchedulerCache
from ironpool.scheduler.framework.profile import Framework, RequirementError, check_requirements
from ironpool.scheduler.plugins import BINDER, DEFAULT_PLUGINS, REGISTRY, SCORING_STRATEGIES

PROFILE_ANNOTATION = "scheduler.ironpool.dev/profile"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class ProfileConfig(_Strict):
    """One scheduling profile."""

    name: str = "default"
    strategy: str = "LeastAllocated"
    disabled_plugins: list[str] = Field(default_factory=list, alias="disabledPlugins")
    plugin_args: dict[str, dict[str, Any]] = Field(default_factory=dict, alias="pluginArgs")

    @field_validator("strategy")
    @classmethod
    def _strategy(cls, v: str) -> str:
        if v not in SCORING_STRATEGIES:
            raise ValueError(f"must be one of {', '.join(SCORING_STRATEGIES)}")
        return v

    @field_validator("disabled_plugins")
    @classmethod
    def _disabled(cls, v: list[str]) -> list[str]:
        for name in v:
            if name not in DEFAULT_PLUGINS:
                raise ValueError(f"unknown plugin {name!r} (known: {', '.join(DEFAULT_PLUGINS)})")
        return v

    @field_validator("plugin_args")
    @classmethod
    def _args(cls, v: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        for name in v:
            if name not in REGISTRY:
                raise ValueError(f"unknown plugin {name!r}")
        return v

    @model_validator(mode="after")
    def _requirements(self) -> ProfileConfig:
        try:
            check_requirements(REGISTRY[name] for name in self.plugin_names())
        except RequirementError as exc:
            raise ValueError(f"disabledPlugins: {exc}") from None
        return self

    def plugin_names(self) -> list[str]:
        """The plugins this profile runs, in order: the default ones it does not disable, its
        scoring strategy, the binder."""
        return [*(n for n in DEFAULT_PLUGINS if n not in self.disabled_plugins), self.strategy, BINDER]


class QueueConfig(_Strict):
    """Scheduling queue timings (seconds)."""

    initial_backoff: float = Field(1.0, alias="initialBackoffSeconds", gt=0)
    max_backoff: float = Field(10.0, alias="maxBackoffSeconds", gt=0)
    unschedulable_flush: float = Field(300.0, alias="unschedulableFlushSeconds", gt=0)

    @model_validator(mode="after")
    def _order(self) -> QueueConfig:
        if self.max_backoff < self.initial_backoff:
            raise ValueError("maxBackoffSeconds must be >= initialBackoffSeconds")
        return self


class SchedulerConfig(_Strict):
    """The whole scheduler configuration."""

    profiles: list[ProfileConfig] = Field(default_factory=lambda: [ProfileConfig()])
    queue: QueueConfig = Field(default_factory=lambda: QueueConfig())
    assume_ttl: float = Field(30.0, alias="assumeTTLSeconds", gt=0)
    #: objects name their scheduler with the annotation ``scheduler.ironpool.dev/scheduler-name``;
    #: objects without it belong to ``default``
    scheduler_name: str = Field("default", alias="schedulerName", min_length=1)

    @model_validator(mode="before")
    @classmethod
    def _removed(cls, data: Any) -> Any:
        if isinstance(data, dict) and "poolLedger" in data:
            raise ValueError("poolLedger was removed: the apiserver's capacity admission keeps several "
                             "schedulers from overcommitting a pool; delete the setting")
        return data

    @field_validator("profiles")
    @classmethod
    def _profiles(cls, v: list[ProfileConfig]) -> list[ProfileConfig]:
        if not v:
            raise ValueError("at least one profile is required")
        names = [p.name for p in v]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"duplicate profile names: {', '.join(dupes)}")
        return v


class ConfigError(ValueError):
    """A configuration file that cannot be used; the message names the field."""


def load_config(path: str | Path | None) -> SchedulerConfig:
    """Read and validate a YAML config file (None: defaults)."""
    if path is None:
        return SchedulerConfig()
    try:
        data = yaml.safe_load(Path(path).read_text()) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(f"{path}: {exc}") from exc
    return parse_config(data, str(path))


def parse_config(data: Any, source: str = "config") -> SchedulerConfig:
    try:
        return SchedulerConfig.model_validate(data)
    except ValidationError as exc:
        msgs = "; ".join(": ".join(filter(None, (".".join(str(p) for p in e["loc"]), e["msg"])))
                         for e in exc.errors())
        raise ConfigError(f"{source}: {msgs}") from exc


def build_framework(profile: ProfileConfig, cache: SchedulerCache, use_index: bool = True) -> Framework:
    """Instantiate a profile's plugins and wire them into a Framework."""
    plugins = []
    for name in profile.plugin_names():
        cls = REGISTRY[name]
        args = profile.plugin_args.get(name)
        try:
            plugins.append(cls(args))
        except ValueError as exc:
            raise ConfigError(f"profiles[{profile.name}].pluginArgs.{exc}") from exc
    return Framework(profile.name, cache, plugins, use_index)
