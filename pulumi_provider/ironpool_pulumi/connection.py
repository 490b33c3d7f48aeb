"""Where the provider finds the apiserver, and the one client the plugin process shares.

Pulumi pickles every provider instance into the stack's state, so the providers keep nothing: the
stack configuration arrives through ``configure()`` and lands here, in the plugin process only.
Precedence, lowest first: the client config file (``$IRONPOOL_CONFIG`` or
``~/.config/ironpool/config.yaml``), ``IRONPOOL_SERVER``/``IRONPOOL_TOKEN``/``IRONPOOL_NAMESPACE``,
then the stack config ``ironpool:server``, ``ironpool:token``, ``ironpool:namespace``,
``ironpool:caFile``.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import replace

from ironpool.client import Client, ClientConfig, ConfigError
from pulumi.dynamic import Config

CONFIG_KEYS = ("server", "token", "namespace", "caFile")
"""The ``ironpool:`` stack configuration keys the provider reads."""


def client_config(values: Mapping[str, str | None]) -> ClientConfig:
    """The effective client configuration for stack config ``values`` (keys without the
    ``ironpool:`` prefix); missing values fall back to the environment and the config file."""
    config = ClientConfig.load(server=values.get("server") or None, token=values.get("token") or None,
                               namespace=values.get("namespace") or None)
    if values.get("caFile"):
        config = replace(config, ca_file=values["caFile"])
    if not config.server:
        raise ConfigError("no apiserver configured: run `pulumi config set ironpool:server URL` and "
                          "`pulumi config set --secret ironpool:token TOKEN`, set IRONPOOL_SERVER and "
                          "IRONPOOL_TOKEN, or run `ironpool up` (it writes the client config file)")
    return config


class Connection:
    """The configuration ``configure()`` delivered and a client built from it on first use."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._values: dict[str, str | None] = {}
        self._config: ClientConfig | None = None
        self._client: Client | None = None

    def configure(self, values: Mapping[str, str | None]) -> None:
        """Remember the stack configuration; a changed one builds a new client on next use."""
        new = {k: values.get(k) for k in CONFIG_KEYS}
        with self._lock:
            if new == self._values and self._config is not None:
                return
            self._values = new
            self._config = None
            old, self._client = self._client, None
        if old is not None:
            old.close()

    def config(self) -> ClientConfig:
        """The effective configuration (stack config, else environment and config file)."""
        with self._lock:
            if self._config is None:
                self._config = client_config(self._values)
            return self._config

    def client(self) -> Client:
        """The shared client (Client is safe to share between the plugin's worker threads)."""
        config = self.config()
        with self._lock:
            if self._client is None:
                self._client = Client(config)
            return self._client


connection = Connection()
"""The plugin process's connection to the apiserver."""


def configure_from(config: Config) -> None:
    """Feed the stack configuration ``configure()`` receives into :data:`connection`."""
    connection.configure({k: config.get(f"ironpool:{k}") for k in CONFIG_KEYS})
