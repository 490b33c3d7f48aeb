"""Pool identities for other hosts: what ``ironpool join-token create`` issues and ``ironpool join`` reads.

``join-token create`` issues a bootstrap token, as kubeadm does: ``<id>.<secret>`` (6 and 16 of
``a-z0-9``), a line of the apiserver's static-token file for user ``system:bootstrap:<id>`` in the
groups ``system:bootstrappers`` and ``system:bootstrappers:ironpool:pool:<pool>``. It may do nothing
but ask for certificates: ``ironpool join`` exchanges it for the pool's client certificates
(:mod:`ironpool.certificates`), finding the CA through ``kube-public/cluster-info`` pinned by
``--discovery-token-ca-cert-hash``, so the command carries no CA. Deleting the line (``join-token
delete``) revokes the token; certificates already issued stay valid until they expire, as in Kubernetes.

The earlier form is still accepted by ``ironpool join``: a pool-identity join token, two bearer tokens
joined by a dot: the MachinePool identity's
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
import csv
import re
import secrets
import shlex
import string
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509

from ironpool.api.certificates import BOOTSTRAP_POOL_GROUP_PREFIX, BOOTSTRAP_USER_PREFIX, BOOTSTRAPPERS_GROUP
from ironpool.apiserver import (
    MACHINE_POOL_USER_PREFIX,
    MACHINE_POOLS_GROUP,
    VOLUME_POOL_USER_PREFIX,
    VOLUME_POOLS_GROUP,
    append_lines,
    token_line,
    write_private,
)
from ironpool.certificates.discovery import ca_cert_hash

_TOKEN = re.compile(r"^[A-Za-z0-9_-]{16,}$")
_BOOTSTRAP = re.compile(r"^([a-z0-9]{6})\.([a-z0-9]{16})$")
_ALPHABET = string.ascii_lowercase + string.digits


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
            raise JoinTokenError("--token: expected the bootstrap token ID.SECRET (6 and 16 of a-z0-9) "
                                 "`ironpool join-token create` prints, or an earlier "
                                 "MACHINEPOOL-TOKEN.VOLUMEPOOL-TOKEN pair")
        return cls(machine, volume)

    @classmethod
    def generate(cls) -> JoinToken:
        return cls(secrets.token_urlsafe(24), secrets.token_urlsafe(24))


@dataclass(frozen=True)
class BootstrapToken:
    """A kubeadm-style bootstrap token: ``<id>.<secret>``; the id names it, the whole is the bearer token."""

    id: str
    secret: str

    def __str__(self) -> str:
        return f"{self.id}.{self.secret}"

    @classmethod
    def match(cls, text: str) -> BootstrapToken | None:
        found = _BOOTSTRAP.match(text.strip())
        return cls(found.group(1), found.group(2)) if found else None

    @classmethod
    def generate(cls) -> BootstrapToken:
        return cls("".join(secrets.choice(_ALPHABET) for _ in range(6)),
                   "".join(secrets.choice(_ALPHABET) for _ in range(16)))


def parse_token(text: str) -> BootstrapToken | JoinToken:
    """``--token``: a bootstrap token (``[a-z0-9]{6}.[a-z0-9]{16}``) or the earlier pool-identity pair."""
    return BootstrapToken.match(text) or JoinToken.parse(text)


def bootstrap_line(pool: str, token: BootstrapToken) -> str:
    """The static-token line of a bootstrap token of ``pool``."""
    return token_line(str(token), f"{BOOTSTRAP_USER_PREFIX}{token.id}", f"bootstrap-{token.id}",
                      [BOOTSTRAPPERS_GROUP, f"{BOOTSTRAP_POOL_GROUP_PREFIX}{pool}"])


def add_bootstrap_token(token_file: Path, pool: str) -> BootstrapToken:
    """A new bootstrap token for ``pool``, appended to ``token_file``; earlier ones stay valid."""
    token = BootstrapToken.generate()
    try:
        append_lines(token_file, [bootstrap_line(pool, token)])
    except OSError as exc:
        raise JoinTokenError(f"{token_file}: cannot update the token file: {exc.strerror}") from None
    return token


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
    """The pool a token-file line is an identity or a bootstrap token of, or None."""
    if line.lstrip().startswith("#"):
        return None
    rows = list(csv.reader([line.strip()], skipinitialspace=True))
    fields = rows[0] if rows else []
    if len(fields) < 2:
        return None
    user = fields[1].strip()
    for prefix in (MACHINE_POOL_USER_PREFIX, VOLUME_POOL_USER_PREFIX):
        if user.startswith(prefix):
            return user[len(prefix):]
    if user.startswith(BOOTSTRAP_USER_PREFIX) and len(fields) > 3:
        for group in fields[3].split(","):
            if group.strip().startswith(BOOTSTRAP_POOL_GROUP_PREFIX):
                return group.strip()[len(BOOTSTRAP_POOL_GROUP_PREFIX):]
    return None


def pools_with_identities(token_file: Path) -> dict[str, int]:
    """Pool name -> how many pool identities and bootstrap tokens the token file holds for it."""
    counts: dict[str, int] = {}
    for line in _read(token_file).splitlines():
        pool = _pool_of(line)
        if pool is not None:
            counts[pool] = counts.get(pool, 0) + 1
    return counts


def remove_identities(token_file: Path, pool: str) -> int:
    """Remove every bootstrap token and MachinePool and VolumePool identity token of ``pool`` (no new
    host can join with them; hosts running on certificates keep them until they expire); returns how
    many lines went."""
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


def join_command(servers: list[str], token: BootstrapToken, ca_pem: bytes, pool: str) -> str:
    """The ``ironpool join`` command line a host runs to serve ``pool``: the bootstrap token and the
    CA's hash (kubeadm's ``join ... --token ... --discovery-token-ca-cert-hash ...``)."""
    return shlex.join(["ironpool", "join", ",".join(servers), "--token", str(token),
                       "--discovery-token-ca-cert-hash", ca_cert_hash(load_ca(ca_pem, "CA")), "--pool", pool])
