"""Running the host tools an image build needs, with errors that say what is missing or failed."""

from __future__ import annotations

import shutil
import subprocess
import threading
from collections.abc import Callable, Mapping, Sequence


class ImageBuildError(Exception):
    """An image could not be built; the message says why (and which Debian package is missing)."""


def require_tools(tools: Mapping[str, str]) -> None:
    """Each command in ``tools`` (command -> the Debian package that has it) is on PATH."""
    missing = {cmd: pkg for cmd, pkg in tools.items() if shutil.which(cmd) is None}
    if missing:
        packages = " ".join(sorted(set(missing.values())))
        raise ImageBuildError(
            f"missing {', '.join(sorted(missing))}: install them with `apt-get install {packages}` "
            "(or `make host`)")


def run(cmd: Sequence[str], what: str, log: Callable[[str], None], timeout: float = 600,
        stdin: str | None = None) -> str:
    """Run ``cmd``, each line it prints going to ``log``; its output. Raises naming ``what`` with the
    last lines it printed, or when it runs longer than ``timeout`` seconds."""
    lines: list[str] = []
    try:
        proc = subprocess.Popen(list(cmd), stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    except OSError as exc:
        raise ImageBuildError(f"{what}: cannot run {cmd[0]}: {exc.strerror}") from exc
    expired = threading.Event()

    def expire() -> None:
        expired.set()
        proc.kill()

    timer = threading.Timer(timeout, expire)
    timer.start()
    try:
        if stdin is not None:
            assert proc.stdin is not None
            proc.stdin.write(stdin)
            proc.stdin.close()
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line.rstrip("\n"))
            log(lines[-1])
        rc = proc.wait()
    finally:
        timer.cancel()
        if proc.poll() is None:  # interrupted: take the tool down with us
            proc.kill()
            proc.wait()
    if rc != 0:
        tail = "\n".join(lines[-15:])
        if expired.is_set():
            raise ImageBuildError(f"{what}: no result after {timeout:.0f}s:\n{tail}")
        raise ImageBuildError(f"{what} failed (exit {rc}):\n{tail}")
    return "\n".join(lines)
