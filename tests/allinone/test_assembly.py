"""``ironpool up`` and ``ironpool join`` run each component through its own assembly (its config and
build/serve functions), leaving unset what they do not choose: so a component's command and its
config must agree on every default, or `up` would run the component differently from its command."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import click
import pytest
from ironpool.cli.image_options import parse_size
from ironpool.cli.runtime_cmd import libvirt_runtime
from ironpool.cli.scheduler_cmd import scheduler
from ironpool.cli.volume_runtime_cmd import volume_runtime

# What a command does to a flag's value before it goes into the config.
_AS_CONFIG = {"image_cache_size": lambda text: parse_size(text, "--image-cache-size")}


def _defaults(command: click.Command, *required: str) -> dict[str, Any]:
    """The values a command runs with when given only its required options, converted as click does."""
    params = command.make_context(command.name or "", list(required)).params
    return {name: _AS_CONFIG.get(name, lambda v: v)(value) for name, value in params.items()}


def _field_defaults(config: type[Any]) -> dict[str, Any]:
    return {f.name: f.default for f in dataclasses.fields(config) if f.default is not dataclasses.MISSING}


@pytest.mark.parametrize("command, config_path", [
    (libvirt_runtime, "ironpool.runtime.machine.app:MachineRuntimeConfig"),
    (volume_runtime, "ironpool.runtime.volume.app:VolumeRuntimeConfig"),
])
def test_a_runtime_command_and_its_config_agree_on_every_default(command: click.Command,
                                                                 config_path: str) -> None:
    module, _, name = config_path.partition(":")
    config = getattr(__import__(module, fromlist=[name]), name)
    flags, fields = _defaults(command, "--classes", "classes.yaml"), _field_defaults(config)
    shared = sorted(set(flags) & set(fields))
    assert len(shared) >= 5, shared  # the flags are the config's fields, by name
    for field in shared:
        flag = flags[field]
        flag = Path(flag) if isinstance(fields[field], Path) and flag is not None else flag
        assert flag == fields[field], f"--{field.replace('_', '-')}: {flag!r} != {fields[field]!r}"


def test_the_scheduler_command_and_its_options_agree_on_the_defaults() -> None:
    from ironpool.scheduler.app import LEASE_NAME, SchedulerOptions

    flags, options = _defaults(scheduler), SchedulerOptions()
    assert flags["bind_concurrency"] == options.bind_concurrency
    assert flags["leader_elect_resource_name"] == LEASE_NAME

