"""``history=true`` on a console's websocket: the console's recent output first, then the live stream.

A serial console streams what the guest prints from the moment it is opened; the web console wants
the boot log from the start too. Each leg passes the query on: the client's ``machines/exec`` URL to
the apiserver, the apiserver's to the machinepoollet, the poollet's to the runtime's console URL; the
libvirt runtime then sends the tail (:data:`HISTORY_BYTES`) of the domain's serial log (QEMU appends
everything the console printed to it) before what comes live. Without it nothing changes
(``ironpool console`` attaches as ``virsh console`` does).
"""

from __future__ import annotations

from urllib.parse import parse_qs

from ironpool.api import errors

PARAM = "history"
#: the most of a console's log replayed: a boot's worth, not a guest's whole life
HISTORY_BYTES = 256 * 1024


def wants_history(query: str) -> bool:
    """Whether a URL's query string (without ``?``) asks for the history; BadRequest naming the
    parameter for a value that is no boolean."""
    values = parse_qs(query, keep_blank_values=True).get(PARAM)
    if not values:
        return False
    value = values[-1].lower()
    if value not in ("true", "false", "1", "0"):
        raise errors.BadRequest(f"{PARAM} must be true or false, not {values[-1]!r}")
    return value in ("true", "1")


def with_history(url: str, history: bool) -> str:
    """``url`` asking for the history when ``history``."""
    if not history:
        return url
    return f"{url}{'&' if '?' in url else '?'}{PARAM}=true"
