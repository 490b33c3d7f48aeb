"""Where the client finds its apiserver: ``~/.config/ironpool/config.yaml`` plus environment overrides.

Precedence, lowest first: the config file (``$IRONPOOL_CONFIG`` or ``~/.config/ironpool/config.yaml``),
then ``IRONPOOL_SERVER`` / ``IRONPOOL_TOKEN`` / ``IRONPOOL_NAMESPACE``, then explicit arguments
(the CLI's ``--server``/``--token``/``--namespace``).

``server`` may name several apiservers of one control plane: comma-separated
(``https://a:8443,https://b:8443``), or as a YAML list in the file. The client fails over between
them (:mod:`ironpool.client.failover`).
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import yaml

DEFAULT_NAMESPACE = "default"
_KEYS = ("server", "token", "ca_file", "cert_file", "key_file", "insecure", "namespace")


class ConfigError(Exception):
    """The client configuration is missing or malformed; the message says what to fix."""


def default_config_path() -> Path:
    """``$IRONPOOL_CONFIG`` if set, else ``~/.config/ironpool/config.yaml``."""
    override = os.environ.get("IRONPOOL_CONFIG")
    if override:
        return Path(override).expanduser()
    return Path.home() / ".config" / "ironpool" / "config.yaml"


@dataclass(frozen=True)
class ClientConfig:
    """How to reach and authenticate to one apiserver."""

    server: str = ""
    token: str | None = None
    ca_file: str | None = None
    insecure: bool = False
    namespace: str = DEFAULT_NAMESPACE
    cert_file: str | None = None  # a client certificate (PEM) and its key: the identity, instead of a token
    key_file: str | None = None

    @classmethod
    def from_file(cls, path: Path) -> ClientConfig:
        """Read a config file; a missing file is an empty config, a malformed one a ConfigError."""
        try:
            text = path.read_text()
        except FileNotFoundError:
            return cls()
        except OSError as exc:
            raise ConfigError(f"cannot read client config {path}: {exc}") from exc
        try:
            data = yaml.safe_load(text) or {}
        except yaml.YAMLError as exc:
            raise ConfigError(f"client config {path} is not valid YAML: {exc}") from exc
        if not isinstance(data, dict):
            raise ConfigError(f"client config {path} must be a mapping, got {type(data).__name__}")
        unknown = sorted(set(data) - set(_KEYS))
        if unknown:
            raise ConfigError(
                f"client config {path}: unknown key(s) {', '.join(unknown)} (known: {', '.join(_KEYS)})"
            )
        return cls._from_mapping(data, str(path))

    @property
    def servers(self) -> tuple[str, ...]:
        """The apiserver URLs ``server`` names, in order."""
        return tuple(s.strip() for s in self.server.split(",") if s.strip())

    @classmethod
    def _from_mapping(cls, data: dict[str, Any], origin: str) -> ClientConfig:
        servers = data.get("server")
        if isinstance(servers, list):
            if not all(isinstance(s, str) for s in servers):
                raise ConfigError(f"{origin}: server must be a URL or a list of URLs")
            data = {**data, "server": ",".join(servers)}
        for key in ("server", "token", "ca_file", "cert_file", "key_file", "namespace"):
            value = data.get(key)
            if value is not None and not isinstance(value, str):
                raise ConfigError(f"{origin}: {key} must be a string, got {type(value).__name__}")
        insecure = data.get("insecure", False)
        if not isinstance(insecure, bool):
            raise ConfigError(f"{origin}: insecure must be true or false, got {insecure!r}")
        return cls(
            server=str(data.get("server") or ""),
            token=data.get("token") or None,
            ca_file=data.get("ca_file") or None,
            insecure=insecure,
            namespace=str(data.get("namespace") or DEFAULT_NAMESPACE),
            cert_file=data.get("cert_file") or None,
            key_file=data.get("key_file") or None,
        )

    @classmethod
    def load(
        cls,
        path: Path | None = None,
        *,
        server: str | None = None,
        token: str | None = None,
        namespace: str | None = None,
    ) -> ClientConfig:
        """The effective configuration: file, then environment, then these arguments."""
        config = cls.from_file(path or default_config_path())
        env = os.environ
        config = replace(
            config,
            server=env.get("IRONPOOL_SERVER") or config.server,
            token=env.get("IRONPOOL_TOKEN") or config.token,
            namespace=env.get("IRONPOOL_NAMESPACE") or config.namespace,
        )
        return replace(
            config,
            server=server or config.server,
            token=token or config.token,
            namespace=namespace or config.namespace,
        )

    def require_server(self) -> ClientConfig:
        """Self, or a ConfigError telling the user how to configure a server."""
        if not self.servers:
            raise ConfigError("no server configured: set IRONPOOL_SERVER or run `ironpool up`")
        if (self.cert_file is None) != (self.key_file is None):
            raise ConfigError("cert_file and key_file go together (a client certificate and its key)")
        for server in self.servers:
            if not server.startswith(("http://", "https://")):
                raise ConfigError(f"server {server!r} must be an http:// or https:// URL")
        return self

    def save(self, path: Path | None = None) -> Path:
        """Write this config (mode 0600, since it holds a token) and return where it went."""
        target = path or default_config_path()
        target.parent.mkdir(parents=True, exist_ok=True)
        data = {k: v for k, v in asdict(self).items() if v not in (None, "", False)}
        tmp = target.with_name(target.name + ".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as fh:
            yaml.safe_dump(data, fh, sort_keys=True)
        os.replace(tmp, target)
        return target
