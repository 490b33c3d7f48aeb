"""Image references: what ``localDisk.image``, ``osImage.image`` and IRI ``ImageSpec.image`` may say.

Three kinds, told apart by their shape:

- an OCI reference with a registry host, ``registry[:port]/repository[:tag][@sha256:<hex>]``
  (the first path component has a dot or a port, or is ``localhost``), pulled from that registry;
- an ``https://`` or ``file://`` URL of a qcow2 or raw disk, with an optional fragment
  ``#sha256:<hex>``, the checksum the download must have;
- anything else is a catalog name, looked up as before: its last path component without tag
  or digest (``tiny``, ``os/tiny:1`` both name the catalog's ``tiny``).
"""

from __future__ import annotations

import ipaddress
import re
import urllib.parse
from dataclasses import dataclass
from typing import Literal

from .catalog import catalog_name
from .errors import InvalidImageName

_HEX64 = re.compile(r"^[a-f0-9]{64}$")
_HOST = re.compile(r"^(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*|\[[0-9A-Fa-f:.]+\])(?::[0-9]{1,5})?$")  # noqa: E501
_PATH_COMPONENT = re.compile(r"^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*$")
_TAG = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")
MAX_REFERENCE = 2048

Kind = Literal["catalog", "oci", "url"]


@dataclass(frozen=True)
class ImageRef:
    """A parsed reference. ``text`` is what the user wrote; the other fields depend on ``kind``."""

    kind: Kind
    text: str
    name: str = ""  # catalog: the catalog name
    registry: str = ""  # oci: host[:port]
    repository: str = ""  # oci: path below the registry
    tag: str = ""  # oci
    digest: str = ""  # oci: "sha256:<hex>" or ""; url: the expected checksum, same form
    url: str = ""  # url: without the fragment

    @property
    def pinned(self) -> bool:
        """True when the reference names content (a digest or checksum), not a moving tag or file."""
        return bool(self.digest)

    def at(self, digest: str) -> str:
        """This reference pinned to ``digest``: ``registry/repo:tag@sha256:…`` or ``url#sha256:…``."""
        if self.kind == "oci":
            tagged = f"{self.registry}/{self.repository}" + (f":{self.tag}" if self.tag else "")
            return f"{tagged}@{digest}"
        if self.kind == "url":
            return f"{self.url}#{digest}"
        return self.text

    @property
    def repository_ref(self) -> str:
        """``registry/repository`` (OCI only)."""
        return f"{self.registry}/{self.repository}"

    @property
    def loopback(self) -> bool:
        """The registry or server is on this host's loopback (plain HTTP is fine there)."""
        netloc = self.registry or urllib.parse.urlsplit(self.url).netloc
        host = urllib.parse.urlsplit("//" + netloc).hostname
        if host == "localhost":
            return True
        try:
            return ipaddress.ip_address(host or "").is_loopback
        except ValueError:
            return False  # a name: only "localhost" is known to stay on this host


def _digest(value: str, what: str, text: str) -> str:
    algo, _, hexpart = value.partition(":")
    if algo != "sha256" or not _HEX64.match(hexpart):
        raise InvalidImageName(f"image {text!r}: {what} must be sha256:<64 lowercase hex digits>")
    return f"sha256:{hexpart}"


def _has_registry(first: str) -> bool:
    if first.startswith("."):  # "..", ".hidden": never a host; the catalog refuses them
        return False
    return "." in first or ":" in first or first == "localhost" or first.startswith("[")


def parse(text: str) -> ImageRef:
    """The reference ``text`` names; InvalidImageName saying what is wrong with it."""
    if not text or len(text) > MAX_REFERENCE or any(c.isspace() or ord(c) < 32 for c in text):
        raise InvalidImageName(f"image {text[:80]!r}: not a valid image name, OCI reference or URL")
    if "://" in text:
        return _parse_url(text)
    first, slash, _ = text.partition("/")
    if slash and _has_registry(first):
        return _parse_oci(text)
    return ImageRef(kind="catalog", text=text, name=catalog_name(text))


def _parse_oci(text: str) -> ImageRef:
    registry, _, rest = text.partition("/")
    if not _HOST.match(registry):
        raise InvalidImageName(f"image {text!r}: {registry!r} is not a registry host[:port]")
    rest, at, digest = rest.partition("@")
    if at:
        digest = _digest(digest, "the digest", text)
    repository, tag = rest, ""
    last_slash = rest.rfind("/")
    colon = rest.rfind(":")
    if colon > last_slash:
        repository, tag = rest[:colon], rest[colon + 1 :]
        if not _TAG.match(tag):
            raise InvalidImageName(f"image {text!r}: tag {tag!r} is not a valid tag")
    if not repository or not all(_PATH_COMPONENT.match(p) for p in repository.split("/")):
        raise InvalidImageName(
            f"image {text!r}: repository {repository!r} must be lowercase path components "
            "(letters, digits, '.', '_', '-')"
        )
    if not tag and not digest:
        tag = "latest"
    return ImageRef(kind="oci", text=text, registry=registry, repository=repository, tag=tag, digest=digest)


def _parse_url(text: str) -> ImageRef:
    try:
        parts = urllib.parse.urlsplit(text)
    except ValueError as exc:
        raise InvalidImageName(f"image {text[:80]!r}: not a valid URL: {exc}") from exc
    if parts.scheme not in ("https", "file"):
        raise InvalidImageName(
            f"image {text[:80]!r}: URL scheme {parts.scheme!r} is not supported (https:// or file://)"
        )
    digest = _digest(parts.fragment, "the checksum after '#'", text) if parts.fragment else ""
    url = urllib.parse.urlunsplit(parts._replace(fragment=""))
    if parts.scheme == "https":
        if not parts.hostname or parts.username or parts.password:
            raise InvalidImageName(f"image {text[:80]!r}: an https URL needs a host and no user:password")
    else:
        if parts.netloc not in ("", "localhost") or not parts.path.startswith("/"):
            raise InvalidImageName(f"image {text[:80]!r}: a file URL must be file:///absolute/path")
        if parts.query:
            raise InvalidImageName(f"image {text[:80]!r}: a file URL has no query")
    return ImageRef(kind="url", text=text, digest=digest, url=url)


def file_path(ref: ImageRef) -> str:
    """The local path of a ``file://`` reference."""
    return urllib.parse.unquote(urllib.parse.urlsplit(ref.url).path)
