"""``ironpool ssh MACHINE [COMMAND...]``: a shell (or one command) on a Machine through the SSH
endpoint its host reports (the Machine annotation ``machinepoollet.ironpool.dev/ssh-endpoint``), else
its first address on port 22 (see :mod:`ironpool.api.machine_access`). Without ``-i`` it offers the
key ``id_ed25519`` beside the client configuration, if there (the one examples/ansible/site.yml
makes for the example machines), besides ssh's own.

It runs the system's ``ssh`` in place of itself, so the terminal, agent forwarding and exit status
are ssh's own. Host keys are remembered per Machine (``HostKeyAlias`` with the Machine's uid) and
the first one is accepted: forwarded ports are reused by other Machines, and a Machine created again
is a new host.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import click

from ironpool.api.machine_access import SSH_ENDPOINT_ANNOTATION, ssh_endpoint
from ironpool.api.resources import resolve
from ironpool.cli.connection import client_config, connection_options
from ironpool.cli.errors import CommandError, handle_errors
from ironpool.client.config import default_config_path
from ironpool.client.rest import Client

MACHINES = resolve("machine")


def ssh_argv(endpoint: str, user: str, alias: str, identity: str | None, options: tuple[str, ...],
             command: tuple[str, ...]) -> list[str]:
    """The ``ssh`` command line for ``endpoint`` (``host:port``, IPv6 hosts in brackets or not)."""
    host, sep, port = endpoint.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise CommandError(f"the SSH endpoint {endpoint!r} is not host:port")
    argv = ["ssh", "-p", port, "-o", f"HostKeyAlias={alias}", "-o", "StrictHostKeyChecking=accept-new"]
    if identity:
        argv += ["-i", identity]
    for option in options:
        argv += ["-o", option]
    argv += ["-l", user, host.strip("[]")]
    if command:
        argv += ["--", *command]
    return argv


@click.command(context_settings={"ignore_unknown_options": True})
@click.argument("machine")
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
@click.option("-l", "--user", default="root", show_default=True, help="User to log in as.")
@click.option("-i", "--identity", default=None,
              help="Private key file (default: id_ed25519 beside the client configuration if there, and "
                   "ssh's own keys).")
@click.option("-o", "--ssh-option", "options", multiple=True, help="An ssh -o option; repeatable.")
@click.option("--print-command", is_flag=True, help="Print the ssh command instead of running it.")
@connection_options()
@handle_errors
def ssh(machine: str, command: tuple[str, ...], user: str, identity: str | None, options: tuple[str, ...],
        print_command: bool, server: str | None, token: str | None, token_file: Path | None,
        namespace: str | None) -> None:
    """Open a shell on MACHINE, or run COMMAND there, over the SSH endpoint its host reports."""
    config = client_config(server, token, token_file, namespace)
    with Client(config) as client:
        obj = client.get_raw(MACHINES, machine, config.namespace)
    meta = obj.get("metadata") or {}
    endpoint = ssh_endpoint(obj)
    if endpoint is None:
        state = (obj.get("status") or {}).get("state") or "Pending"
        raise CommandError(
            f'machine "{machine}" has no SSH endpoint yet (state {state}; its host sets the annotation '
            f"{SSH_ENDPOINT_ANNOTATION} once a network interface in user mode forwards SSH, or reports "
            f"the interface's address)")
    if identity is None:
        default_key = default_config_path().parent / "id_ed25519"
        identity = str(default_key) if default_key.is_file() else None
    alias = f"ironpool-{meta.get('namespace')}-{machine}-{meta.get('uid')}"
    argv = ssh_argv(str(endpoint), user, alias, identity, options, command)
    if print_command:
        click.echo(" ".join(argv))
        return
    if shutil.which("ssh") is None:
        raise CommandError("ssh is not installed (Debian: openssh-client)")
    os.execvp("ssh", argv)
