"""What a machine's boot configuration (IRI ``ignition_data``) is: Ignition, or cloud-init user data.

A Machine's ``ignitionRef`` Secret may hold either. The runtime hands Ignition to the guest through
QEMU's fw_cfg (as IronCore does) and cloud-init user data as a NoCloud seed disk; it tells them
apart by the first bytes, the way cloud-init itself recognises its formats: a ``#cloud-config``
document (or another ``#`` header cloud-init knows), a script (``#!``), a MIME multipart message,
or gzip-compressed user data. Ignition configs are JSON and start with ``{``.
"""

from __future__ import annotations

#: The Secret key cloud-init's NoCloud and most tools use for user data; the machinepoollet reads it
#: when a Machine's ``ignitionRef`` key is Ignition's default (``ignition.yaml``, what the API fills
#: in when none is named) and the Secret has no such key.
USER_DATA_KEY = "user-data"

# cloud-init's user-data headers (its "starts_with" table), and the MIME headers a multipart
# message made by cloud-init's make-mime or Python's email package begins with.
_CLOUD_INIT_HEADERS = (
    b"#cloud-config",  # also #cloud-config-archive and #cloud-config-jsonp
    b"#cloud-boothook",
    b"#include",  # also #include-once
    b"#part-handler",
    b"#upstart-job",
    b"## template: jinja",
    b"#!",
)
_MIME_HEADERS = (b"content-type: multipart/", b"mime-version:")
_GZIP_MAGIC = b"\x1f\x8b"
_BOM = b"\xef\xbb\xbf"


def is_cloud_init(data: bytes) -> bool:
    """True if ``data`` is cloud-init user data rather than an Ignition config."""
    if data.startswith(_GZIP_MAGIC):
        return True
    head = data.removeprefix(_BOM).lstrip(b"\r\n\t ")[:64]
    if head.startswith(_CLOUD_INIT_HEADERS):
        return True
    return head.lower().startswith(_MIME_HEADERS) and b"multipart/" in data[:4096].lower()


def describe(data: bytes) -> str:
    """``cloud-init user data`` or ``Ignition``: for events and messages."""
    return "cloud-init user data" if is_cloud_init(data) else "Ignition"
