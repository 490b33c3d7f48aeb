"""Talking to OCI registries through Debian's ``skopeo`` (containers/image): manifests, pulls, pushes.

skopeo does the registry protocol: the Basic and Bearer token auth dances, TLS, redirects, and
verifies every blob it copies against its digest. This module only runs it, hands it credentials
in a private auth file, and turns its failures into :mod:`.errors` (a 401 is ImageUnauthorized, a
missing manifest ImageNotFound, a refused connection ImageUnreachable, a full disk NoSpace).

Registries on loopback are spoken to over plain HTTP (as Docker does); others over verified TLS
unless listed as insecure.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from . import errors
from .reference import ImageRef

SKOPEO = "skopeo"
DOCKER_CONFIG_KEYS = (".dockerconfigjson", ".dockercfg")
INSPECT_TIMEOUT = 60.0
COPY_TIMEOUT = 6 * 3600.0
_MSG = re.compile(r'msg="((?:[^"\\]|\\.)*)"')
_WRAPPED = re.compile(r'^Error parsing image name "[^"]*": ')


@dataclass(frozen=True)
class Credentials:
    """Registry credentials as a Docker config (``{"auths": {host: {"auth": …}}}``), the content of
    a ``kubernetes.io/dockerconfigjson`` Secret."""

    docker_config: bytes

    @classmethod
    def from_secret(cls, data: Mapping[str, bytes], what: str) -> Credentials | None:
        """Credentials from a Secret's data (``.dockerconfigjson``, or the older ``.dockercfg``);
        None for no data; a malformed secret is InvalidImageName naming ``what``."""
        if not data:
            return None
        for key in DOCKER_CONFIG_KEYS:
            raw = data.get(key)
            if raw is None:
                continue
            try:
                doc = json.loads(raw)
            except ValueError as exc:
                raise errors.InvalidImageName(f"{what}: {key} is not JSON: {exc}") from exc
            if not isinstance(doc, dict):
                raise errors.InvalidImageName(f"{what}: {key} is not a JSON object")
            auths = doc.get("auths", {}) if key == ".dockerconfigjson" else doc
            if not isinstance(auths, dict) or not all(isinstance(v, dict) for v in auths.values()):
                raise errors.InvalidImageName(f"{what}: {key} has no 'auths' map of registries")
            return cls(json.dumps({"auths": auths}, sort_keys=True).encode())
        raise errors.InvalidImageName(
            f"{what}: no {' or '.join(DOCKER_CONFIG_KEYS)} key (a kubernetes.io/dockerconfigjson Secret)"
        )

    @classmethod
    def basic(cls, registry: str, username: str, password: str) -> Credentials:
        auth = base64.b64encode(f"{username}:{password}".encode()).decode()
        return cls(json.dumps({"auths": {registry: {"auth": auth}}}).encode())

    def __repr__(self) -> str:  # never print the secret
        return "Credentials(<redacted>)"


@dataclass(frozen=True)
class RegistryOptions:
    """How to reach registries: which ones speak plain HTTP or unverified TLS."""

    insecure: frozenset[str] = field(default_factory=frozenset)

    def tls_verify(self, ref: ImageRef) -> bool:
        return not (ref.loopback or ref.registry in self.insecure)


def _message(stderr: str) -> str:
    """skopeo's own error text from its log line (``level=fatal msg="…"``), else its last line."""
    found = _MSG.findall(stderr)
    if found:
        msg = re.sub(r'\\(["\\])', r"\1", found[-1])  # logrus quotes " and \ in msg="…"
        # skopeo wraps some failures as 'Error parsing image name "docker://…": <the cause>'
        return _WRAPPED.sub("", msg)
    lines = [ln for ln in stderr.strip().splitlines() if ln.strip()]
    return lines[-1] if lines else "skopeo failed without a message"


def classify(ref: str, stderr: str) -> errors.ImageError:
    """The image error for a failed skopeo run against ``ref``."""
    msg = _message(stderr)
    low = msg.lower()
    text = f"image {ref}: {msg}"
    if "no space left on device" in low:
        return errors.NoSpace(text)
    if "permission denied" in low or "read-only file system" in low:
        return errors.ImageError(text)  # this host's files, not the registry's answer
    if "unauthorized" in low or "authentication required" in low or "denied" in low or " 401" in low:
        return errors.ImageUnauthorized(text)
    if "manifest unknown" in low or "name unknown" in low or "not found" in low or " 404" in low:
        return errors.ImageNotFound(text)
    if "digest" in low and ("mismatch" in low or "did not match" in low or "does not match" in low):
        return errors.DigestMismatch(text)
    if any(s in low for s in ("no such host", "connection refused", "dial tcp", "i/o timeout", "x509",
                              "tls:", "http response to https client", "network is unreachable",
                              "pinging container registry")):
        return errors.ImageUnreachable(text)
    return errors.ImageError(text)


class Skopeo:
    """Runs skopeo for one runtime; each call gets its own private auth file."""

    def __init__(self, options: RegistryOptions | None = None, tmp_dir: Path | None = None) -> None:
        self.options = options or RegistryOptions()
        self.tmp_dir = tmp_dir
        self._running: set[subprocess.Popen[bytes]] = set()
        self._closed = False
        if shutil.which(SKOPEO) is None:
            self.missing = "skopeo is not installed (Debian's 'skopeo'; scripts/setup-host.sh installs it)"
        else:
            self.missing = ""

    @contextmanager
    def _authfile(self, creds: Credentials | None) -> Iterator[str | None]:
        if creds is None:
            yield None
            return
        fd, path = tempfile.mkstemp(prefix="auth-", suffix=".json", dir=self.tmp_dir)
        try:
            with os.fdopen(fd, "wb") as f:  # mkstemp: 0600, only the runtime's user reads it
                f.write(creds.docker_config)
            yield path
        finally:
            os.unlink(path)

    def _run(self, args: Sequence[str], ref: str, timeout: float,
             watch: Callable[[], None] | None = None) -> subprocess.CompletedProcess[bytes]:
        if self.missing:
            raise errors.ImageError(f"image {ref}: {self.missing}")
        if self._closed:
            raise errors.ImageUnreachable(f"image {ref}: the runtime is stopping")
        try:
            proc = subprocess.Popen([SKOPEO, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    stdin=subprocess.DEVNULL)
        except OSError as exc:
            raise errors.ImageError(f"image {ref}: running skopeo failed: {exc}") from exc
        self._running.add(proc)
        stop = threading.Event()
        watcher = None
        if watch is not None:
            def loop() -> None:
                while not stop.wait(1.0):
                    watch()
            watcher = threading.Thread(target=loop, name="pull-progress", daemon=True)
            watcher.start()
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            raise errors.ImageUnreachable(f"image {ref}: no answer within {timeout:.0f}s") from None
        except BaseException:
            proc.kill()
            proc.wait()
            raise
        finally:
            self._running.discard(proc)
            stop.set()
            if watcher is not None:
                watcher.join()
        if proc.returncode != 0:
            raise classify(ref, err.decode(errors="replace"))
        return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)

    def close(self) -> None:
        """Stop the pulls and pushes under way (their scratch goes with them) and refuse new ones."""
        self._closed = True
        for proc in list(self._running):
            proc.kill()

    def manifest(self, ref: ImageRef, target: str, creds: Credentials | None) -> bytes:
        """The raw manifest (or index) ``target`` (``registry/repo:tag`` or ``@digest``) names."""
        tls = self.options.tls_verify(ref)
        with self._authfile(creds) as auth:
            args = ["inspect", "--raw", f"--tls-verify={str(tls).lower()}"]
            if auth:
                args += ["--authfile", auth]
            return self._run([*args, f"docker://{target}"], ref.text, INSPECT_TIMEOUT).stdout

    def copy_to_dir(self, ref: ImageRef, digest: str, dest: Path, creds: Credentials | None,
                    watch: Callable[[], None] | None = None) -> None:
        """Copy the manifest ``repo@digest`` and its blobs into the ``dir:`` layout at ``dest``
        (files named by their hex digest, each verified by skopeo while it arrives)."""
        tls = self.options.tls_verify(ref)
        with self._authfile(creds) as auth:
            args = ["copy", "--quiet", "--preserve-digests", f"--src-tls-verify={str(tls).lower()}"]
            if auth:
                args += ["--src-authfile", auth]
            args += [f"docker://{ref.repository_ref}@{digest}", f"dir:{dest}"]
            self._run(args, ref.text, COPY_TIMEOUT, watch)

    def push_layout(self, layout: Path, ref: ImageRef, creds: Credentials | None, digest_file: Path) -> None:
        """Upload the OCI layout at ``layout`` (its one manifest or index) to ``ref``."""
        tls = self.options.tls_verify(ref)
        with self._authfile(creds) as auth:
            args = ["copy", "--quiet", "--all", "--preserve-digests", f"--dest-tls-verify={str(tls).lower()}",
                    "--digestfile", str(digest_file)]
            if auth:
                args += ["--dest-authfile", auth]
            target = f"{ref.repository_ref}:{ref.tag}" if ref.tag else ref.repository_ref
            self._run([*args, f"oci:{layout}:image", f"docker://{target}"], ref.text, COPY_TIMEOUT)
