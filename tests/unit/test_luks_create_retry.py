"""``format_luks`` tries ``qemu-img create`` again when QEMU's PBKDF2 timing measured nothing (a
known failure on loaded hosts), and only then: a qemu-img that fails so a few times, then works, on
PATH for these tests."""

from __future__ import annotations

from pathlib import Path

import pytest
from ironpool.runtime.errors import Internal
from ironpool.runtime.volume import luks

FAKE = """#!/bin/sh
# Fails with $MESSAGE the first $FAILS times, counting in $COUNT; then writes its target file.
n=$(cat "$COUNT" 2>/dev/null || echo 0); echo $((n + 1)) > "$COUNT"
if [ "$n" -lt "$FAILS" ]; then echo "qemu-img: $TARGET: $MESSAGE" >&2; exit 1; fi
echo luks > "$TARGET"
"""


@pytest.fixture
def fake_qemu_img(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "qemu-img").write_text(FAKE)
    (bin_dir / "qemu-img").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    monkeypatch.setenv("COUNT", str(tmp_path / "count"))
    monkeypatch.setenv("TARGET", str(tmp_path / "disk.qcow2"))
    return tmp_path


def _calls(tmp: Path) -> int:
    return int((tmp / "count").read_text())


def test_an_unmeasured_pbkdf_round_is_tried_again(
    fake_qemu_img: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAILS", "2")
    monkeypatch.setenv("MESSAGE", "Unable to get accurate CPU usage")
    luks.format_luks(str(fake_qemu_img / "disk.qcow2"), 1 << 20, b"key")
    assert _calls(fake_qemu_img) == 3
    assert (fake_qemu_img / "disk.qcow2").read_text() == "luks\n"


def test_tries_are_bounded_and_the_last_error_is_raised(
    fake_qemu_img: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAILS", "100")
    monkeypatch.setenv("MESSAGE", "Unable to get accurate CPU usage")
    with pytest.raises(Internal, match="accurate CPU usage"):
        luks.format_luks(str(fake_qemu_img / "disk.qcow2"), 1 << 20, b"key")
    assert _calls(fake_qemu_img) == luks.CREATE_ATTEMPTS


def test_other_failures_are_not_retried(fake_qemu_img: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAILS", "1")
    monkeypatch.setenv("MESSAGE", "No space left on device")
    with pytest.raises(Internal, match="No space left"):
        luks.format_luks(str(fake_qemu_img / "disk.qcow2"), 1 << 20, b"key")
    assert _calls(fake_qemu_img) == 1
