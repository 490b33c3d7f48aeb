"""Writing the static-token file the :class:`~.authentication.Authenticator` reads (``--token-file``):
one user a line, ``token,user,uid[,"group1,group2"]`` as :func:`~.authentication.parse_token_file`
parses it.

The file holds bearer tokens: it is rewritten atomically with mode 0600
(:func:`~ironpool.apiserver.serving.certs.write_private`), so a running apiserver, which reads it
again when it changes, never sees half a line.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ironpool.apiserver.serving.certs import write_private


def token_line(token: str, user: str, uid: str, groups: Sequence[str] = ()) -> str:
    """One user's line: ``token,user,uid`` and, with groups, ``,"group1,group2"``."""
    line = f"{token},{user},{uid}"
    if groups:
        line += ',"' + ",".join(groups) + '"'
    return line


def append_lines(path: Path, lines: Sequence[str], *, create: bool = False) -> None:
    """Append ``lines`` to the token file at ``path``; a missing file is created only with ``create``.

    Raises OSError when the file cannot be read or written.
    """
    try:
        text = path.read_text()
    except FileNotFoundError:
        if not create:
            raise
        text = ""
    if text and not text.endswith("\n"):
        text += "\n"
    write_private(path, (text + "".join(f"{line}\n" for line in lines)).encode())
