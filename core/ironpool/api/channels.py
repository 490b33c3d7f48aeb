"""Kubernetes' channel protocol for exec and attach over websockets (``v4.channel.k8s.io``,
``v5.channel.k8s.io``), as ``machines/exec`` speaks it with its clients.

Every binary message starts with one byte naming its stream: 0 stdin (client to server), 1 stdout,
2 stderr, 3 the error stream (a ``v1`` Status as JSON when the session ends), 4 terminal resize
(JSON ``{"Width": w, "Height": h}``). ``v5`` adds 255, *close*: ``[255, n]`` closes stream ``n``
(a client closing stdin detaches from a console). A serial console is one byte stream, so the server
sends everything the guest prints on stdout.
"""

from __future__ import annotations

V5 = "v5.channel.k8s.io"
V4 = "v4.channel.k8s.io"
#: the subprotocols served, preferred first
SUBPROTOCOLS = (V5, V4)

STDIN, STDOUT, STDERR, ERROR, RESIZE, CLOSE = 0, 1, 2, 3, 4, 255


def frame(channel: int, data: bytes) -> bytes:
    """A message of ``data`` on ``channel``."""
    return bytes((channel,)) + data


def unframe(message: bytes) -> tuple[int, bytes]:
    """The channel and payload of a message (an empty message is an empty stdin write)."""
    if not message:
        return STDIN, b""
    return message[0], message[1:]
