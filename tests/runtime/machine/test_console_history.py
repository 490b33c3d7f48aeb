"""``history=true`` on a console (:mod:`ironpool.api.console_history`): the query's reading, and the
libvirt runtime's tail of a serial log (the real replay through every leg, in a browser:
tests/e2e/test_up_web_console.py)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest
from ironpool.api import errors
from ironpool.api.console_history import HISTORY_BYTES, wants_history, with_history
from ironpool.runtime.machine.console_server import ConsoleServer


def test_the_query_is_read_and_passed_on() -> None:
    assert wants_history("history=true") and wants_history("x=1&history=1")
    assert not wants_history("") and not wants_history("history=false") and not wants_history("other=true")
    with pytest.raises(errors.BadRequest) as exc:
        wants_history("history=yes")
    assert "history must be true or false, not 'yes'" in str(exc.value)
    assert with_history("ws://h/exec/t", True) == "ws://h/exec/t?history=true"
    assert with_history("ws://h/exec/t?a=b", True) == "ws://h/exec/t?a=b&history=true"
    assert with_history("ws://h/exec/t", False) == "ws://h/exec/t"


def server(tmp_path: Path) -> ConsoleServer:
    driver: Any = SimpleNamespace(console_log=lambda machine_id: tmp_path / machine_id / "console.log")
    return ConsoleServer(cast(Any, driver))


def test_the_history_is_the_serial_logs_tail_from_a_line_start(tmp_path: Path) -> None:
    console = server(tmp_path)
    assert console._history("none") == b""  # no log yet: nothing to replay
    log = tmp_path / "m1" / "console.log"
    log.parent.mkdir()
    log.write_bytes(b"boot line 1\r\nboot line 2\r\n")
    assert console._history("m1") == b"boot line 1\r\nboot line 2\r\n"
    # A long log: at most HISTORY_BYTES of its end, starting at a line's beginning.
    line = b"x" * 99 + b"\n"
    log.write_bytes(b"FIRST\n" + line * (2 * HISTORY_BYTES // len(line)) + b"last words")
    tail = console._history("m1")
    assert len(tail) <= HISTORY_BYTES and tail.endswith(b"last words") and tail.startswith(b"x" * 99 + b"\n")
    assert b"FIRST" not in tail
