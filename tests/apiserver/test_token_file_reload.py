"""The static-token file is read again when it changes, so tokens issued on a running apiserver work."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from ironpool.api import errors
from ironpool.apiserver.auth import authentication
from ironpool.apiserver.auth.authentication import Authenticator


def _touch_later(path: Path, text: str) -> None:
    before = os.stat(path).st_mtime_ns
    path.write_text(text)
    os.utime(path, ns=(before + 10**9, before + 10**9))  # a coarse-mtime file system sees the change too


def test_changed_token_file_is_read_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(authentication, "_RELOAD_CHECK_SECONDS", 0.0)
    tokens = tmp_path / "tokens.csv"
    tokens.write_text('a,admin,1,"system:masters"\n')
    authn = Authenticator.from_file(tokens)
    with pytest.raises(errors.Unauthorized):
        authn.authenticate("Bearer b")

    _touch_later(tokens, 'a,admin,1,"system:masters"\nb,bob,2,"g1,g2"\n')
    bob = authn.authenticate("Bearer b")
    assert (bob.name, bob.groups) == ("bob", frozenset({"g1", "g2"}))

    _touch_later(tokens, "b,bob\n")  # broken: the tokens read before stay
    assert authn.authenticate("Bearer b").name == "bob"
    assert authn.authenticate("Bearer a").is_admin


def test_reload_is_looked_at_once_a_second(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens.csv"
    tokens.write_text("a,admin,1\n")
    authn = Authenticator.from_file(tokens)
    _touch_later(tokens, "a,admin,1\nb,bob,2\n")
    with pytest.raises(errors.Unauthorized):
        authn.authenticate("Bearer b")  # within the first second: not looked at yet
