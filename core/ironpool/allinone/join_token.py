"""Pool identities for other hosts: what ``ironpool join-token create`` issues and ``ironpool join`` reads.

A join token is two bearer tokens joined by a dot: the MachinePool identity's
(``compute.ironcore.dev:system:machinepool:<pool>``, group ``compute.ironcore.dev:system:machinepools``)
and the VolumePool identity's (``storage.ironcore.dev:system:volumepool:<pool>``), as IronCore's
poollets authenticate. Both are lines of the apiserver's static-token file, which the apiserver reads
again when it changes, so a running control plane accepts them at once. The CA travels with the join
command as its PEM in base64 (``--ca-data``, as a kubeconfig's ``certificate-authority-data``);
``--ca-cert-hash`` pins it the way kubeadm does (SHA-256 of the CA's SubjectPublicKeyInfo).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
import secrets
import shlex
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import serialization

from ironpool.apiserver import (
    MACHINE_POOL_USER_PREFIX,
    MACHINE_POOLS_GROUP,
    VOLUME_POOL_USER_PREFIX,
    VOLUME_POOLS_GROUP,
    append_lines,
    token_line,
    write_private,
)

_TOKEN = re.compile(r"^[A-Za-z0-9_-]{16,}$")


class JoinTokenError(Exception):
    """A join token, CA or token file cannot be used; the message names the option or file."""


@dataclass(frozen=True)
class JoinToken:
    """The bearer tokens of one pool's two identities."""

    machine: str
    volume: str

    def __str__(self) -> str:
        return f"{self.machine}.{self.volume}"

    @classmethod
    def parse(cls, text: str) -> JoinToken:
        machine, sep, volume = text.strip().partition(".")
        if not sep or not _TOKEN.match(machine) or not _TOKEN.match(volume):
            raise JoinTokenError("--token: expected MACHINEPOOL-TOKEN.VOLUMEPOOL-TOKEN as "
                                 "`ironpool join-token "
                                 "create` prints it")
        return cls(machine, volume)

    @classmethod
    def generate(cls) -> JoinToken:
        return cls(secrets.token_urlsafe(24), secrets.token_urlsafe(24))


def identity_lines(pool: str, token: JoinToken) -> list[str]:
    """The static-token lines of ``pool``'s identities."""
    return [
        token_line(token.machine, f"{MACHINE_POOL_USER_PREFIX}{pool}", f"machinepool-{pool}",
                   [MACHINE_POOLS_GROUP]),
        token_line(token.volume, f"{VOLUME_POOL_USER_PREFIX}{pool}", f"volumepool-{pool}",
                   [VOLUME_POOLS_GROUP]),
    ]


def add_identities(token_file: Path, pool: str) -> JoinToken:
    """A new join token for ``pool``, appended to ``token_file`` (:func:`ironpool.apiserver.append_lines`).

    Earlier tokens of the pool stay valid (:func:`remove_identities` revokes them all).
    """
    token = JoinToken.generate()
    try:
        append_lines(token_file, identity_lines(pool, token))
    except OSError as exc:
        raise JoinTokenError(f"{token_file}: cannot update the token file: {exc.strerror}") from None
    return token


def _pool_of(line: str) -> str | None:
    """The pool a token-file line is an identity of, or None."""
    fields = line.split(",", 2)
    if len(fields) < 2 or line.lstrip().startswith("#"):
        return None
    user = fields[1].strip()
    for prefix in (MACHINE_POOL_USER_PREFIX, VOLUME_POOL_USER_PREFIX):
        if user.startswith(prefix):
            return user[len(prefix):]
    return None


def pools_with_identities(token_file: Path) -> dict[str, int]:
    """Pool name -> how many pool identities (tokens) the token file holds for it."""
    counts: dict[str, int] = {}
    for line in _read(token_file).splitlines():
        pool = _pool_of(line)
        if pool is not None:
            counts[pool] = counts.get(pool, 0) + 1
    return counts


def remove_identities(token_file: Path, pool: str) -> int:
    """Remove every MachinePool and VolumePool identity of ``pool`` (its hosts can no longer
    authenticate); returns how many lines went."""
    lines = _read(token_file).splitlines(keepends=True)
    kept = [line for line in lines if _pool_of(line) != pool]
    if len(kept) != len(lines):
        write_private(token_file, "".join(kept).encode())
    return len(lines) - len(kept)


def _read(token_file: Path) -> str:
    try:
        return token_file.read_text()
    except OSError as exc:
        raise JoinTokenError(f"{token_file}: cannot read the token file: {exc.strerror}") from None


def load_ca(pem: bytes, origin: str) -> x509.Certificate:
    try:
        return x509.load_pem_x509_certificate(pem)
    except ValueError as exc:
        raise JoinTokenError(f"{origin}: not a PEM certificate: {exc}") from None


def ca_cert_hash(cert: x509.Certificate) -> str:
    """kubeadm's ``--discovery-token-ca-cert-hash``: ``sha256:`` and the hex SHA-256 of the SPKI."""
    spki = cert.public_key().public_bytes(serialization.Encoding.DER,
                                          serialization.PublicFormat.SubjectPublicKeyInfo)
    return "sha256:" + hashlib.sha256(spki).hexdigest()


def encode_ca(pem: bytes) -> str:
    return base64.b64encode(pem).decode()


def decode_ca(data: str) -> bytes:
    """The PEM of ``--ca-data``; refuses anything that is not a certificate."""
    try:
        pem = base64.b64decode(data.strip(), validate=True)
    except (binascii.Error, ValueError):
        raise JoinTokenError("--ca-data: not base64 (pass it as `ironpool join-token create` prints it)") \
            from None
    load_ca(pem, "--ca-data")
    return pem


def check_ca_hash(pem: bytes, expected: str) -> None:
    """Refuse a CA whose hash is not ``expected`` (``sha256:HEX``)."""
    if not re.fullmatch(r"sha256:[0-9a-fA-F]{64}", expected.strip()):
        raise JoinTokenError("--ca-cert-hash: expected sha256: and 64 hex digits")
    actual = ca_cert_hash(load_ca(pem, "CA"))
    if actual != expected.strip().lower():
        raise JoinTokenError(f"--ca-cert-hash: the CA given hashes to {actual}, not {expected}: "
                             "it is not the control plane's CA")


def join_command(servers: list[str], token: JoinToken, ca_pem: bytes, pool: str) -> str:
    """The ``ironpool join`` command line a host runs to serve ``pool``."""
    return shlex.join(["ironpool", "join", ",".join(servers), "--token", str(token),
                       "--ca-data", encode_ca(ca_pem), "--pool", pool])
