"""``ironpool console MACHINE``: the Machine's serial console on this terminal, through the apiserver's
``machines/exec`` (which needs ``create`` on ``machines/exec``: RBAC's ``edit`` and ``admin`` grant it).

On a terminal it switches to raw mode and ``Ctrl+]`` leaves, as ``virsh console``; with stdin from a
pipe it sends what the pipe holds and leaves at its end (or at a ``Ctrl+]`` byte in it). The
console's output goes to stdout, the command's own words to stderr.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from ironpool.cli.connection import client_config, connection_options
from ironpool.cli.errors import CommandError, handle_errors
from ironpool.client.machine_console import ConsoleRefused, MachineConsole, attach


@click.command()
@click.argument("machine")
@connection_options()
@handle_errors
def console(machine: str, server: str | None, token: str | None, token_file: Path | None,
            namespace: str | None) -> None:
    """Attach to MACHINE's serial console (Ctrl+] leaves)."""
    config = client_config(server, token, token_file, namespace)
    ns = namespace or config.namespace
    try:
        session = MachineConsole(config, ns, machine)
    except ConsoleRefused as exc:
        code = f" ({exc.code})" if exc.code else ""
        raise CommandError(f"console of Machine {ns}/{machine}{code}: {exc}") from None
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    tty = os.isatty(stdin.fileno())

    def ready() -> None:  # in raw mode already: a line ends with CR LF
        if tty:
            click.echo(f"Connected to the console of Machine {ns}/{machine}. Escape character is ^]\r",
                       err=True)

    how = attach(session, stdin, stdout, ready)
    if tty:
        click.echo("", err=True)
    if how == "closed":
        click.echo(f"The console of Machine {ns}/{machine} closed.", err=True)
