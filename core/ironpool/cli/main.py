"""The ``ironpool`` command: one click group; each subcommand lives in its own module.

Subcommands are imported lazily so ``ironpool get`` does not pay for libvirt or gRPC imports.
"""

from __future__ import annotations

import importlib
from typing import Any

import click

# command name -> "module:attribute"; each module owns its command(s).
_COMMANDS: dict[str, str] = {
    # control plane
    "apiserver": "ironpool.cli.apiserver_cmd:apiserver",
    "apply": "ironpool.cli.resources_cmd:apply",
    "get": "ironpool.cli.get_cmd:get",
    "describe": "ironpool.cli.resources_cmd:describe",
    "delete": "ironpool.cli.resources_cmd:delete",
    "wait": "ironpool.cli.resources_cmd:wait",
    "create": "ironpool.cli.edit_cmd:create",
    "label": "ironpool.cli.edit_cmd:label",
    "annotate": "ironpool.cli.edit_cmd:annotate",
    "patch": "ironpool.cli.edit_cmd:patch",
    # networking
    "ssh": "ironpool.cli.ssh_cmd:ssh",
    "console": "ironpool.cli.console_cmd:console",
    # IRI runtimes and debugging
    "libvirt-runtime": "ironpool.cli.runtime_cmd:libvirt_runtime",
    "volume-runtime": "ironpool.cli.volume_runtime_cmd:volume_runtime",
    "iri": "ironpool.cli.iri_cmd:iri",
    "image": "ironpool.cli.image_cmd:image",
    # scheduler
    "scheduler": "ironpool.cli.scheduler_cmd:scheduler",
    "schedule": "ironpool.cli.scheduler_cmd:schedule",
    # poollets and the all-in-one
    "machinepoollet": "ironpool.cli.poollet_cmd:machinepoollet",
    "volumepoollet": "ironpool.cli.poollet_cmd:volumepoollet",
    "up": "ironpool.cli.up_cmd:up",
    "down": "ironpool.cli.down_cmd:down",
    "backup": "ironpool.cli.backup_cmd:backup",
    "restore": "ironpool.cli.backup_cmd:restore",
    # fleet health and maintenance
    "controller-manager": "ironpool.cli.controller_manager_cmd:controller_manager",
    "cordon": "ironpool.cli.fleet_cmd:cordon",
    "uncordon": "ironpool.cli.fleet_cmd:uncordon",
    "drain": "ironpool.cli.fleet_cmd:drain",
    # other hosts
    "join": "ironpool.cli.join_cmd:join",
    "join-token": "ironpool.cli.join_cmd:join_token",
    "rig": "ironpool.cli.rig_cmd:rig",
    # users and RBAC
    "auth": "ironpool.cli.auth_cmd:auth",
    "token": "ironpool.cli.token_cmd:token",
}


class LazyGroup(click.Group):
    """A group whose subcommands are imported on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(name for name in _COMMANDS if self._load(name) is not None)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        return self._load(cmd_name)

    @staticmethod
    def _load(name: str) -> click.Command | None:
        target = _COMMANDS.get(name)
        if target is None:
            return None
        module_name, _, attr = target.partition(":")
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            # A command whose module is not there yet is simply not offered; any other
            # missing import is a real error and must surface.
            if exc.name == module_name:
                return None
            raise
        command: Any = getattr(module, attr)
        return command if isinstance(command, click.Command) else None


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="ironpool")
def cli() -> None:
    """ironpool: IronCore's pools, classes and scheduler on your own libvirt hosts."""


def main() -> None:
    cli()


if __name__ == "__main__":
    main()
