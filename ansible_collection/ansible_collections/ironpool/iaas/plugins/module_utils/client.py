# Copyright: ironpool contributors
# SPDX-License-Identifier: Apache-2.0
"""The connection to the ironpool apiserver: shared options, the client, and what to say when the
``ironpool`` package (which holds the client) is missing on the host running the module."""

from __future__ import annotations

import traceback
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

from ansible.module_utils.basic import env_fallback, missing_required_lib

try:
    from ironpool.client import Client, ClientConfig, ConfigError
except ImportError:
    HAS_IRONPOOL = False
    IRONPOOL_IMPORT_ERROR: str | None = traceback.format_exc()
else:
    HAS_IRONPOOL = True
    IRONPOOL_IMPORT_ERROR = None

PIP_INSTALL = "python3 -m pip install /path/to/ironpool  (a checkout of the ironpool repository)"


def missing_ironpool_message() -> str:
    """Ansible's standard missing-library text, plus the pip line that fixes it."""
    return f"{missing_required_lib('ironpool').rstrip('.')}. Install it with: {PIP_INSTALL}"


def connection_argument_spec() -> dict[str, Any]:
    """The options of the ``ironpool.iaas.connection`` doc fragment."""
    return {
        "server": {"type": "str", "fallback": (env_fallback, ["IRONPOOL_SERVER"])},
        "token": {"type": "str", "no_log": True, "fallback": (env_fallback, ["IRONPOOL_TOKEN"])},
        "ca_file": {"type": "path"},
        "validate_certs": {"type": "bool"},
        "namespace": {"type": "str", "fallback": (env_fallback, ["IRONPOOL_NAMESPACE"])},
        "config_file": {"type": "path", "fallback": (env_fallback, ["IRONPOOL_CONFIG"])},
        "request_timeout": {"type": "float", "default": 30},
    }


def wait_argument_spec() -> dict[str, Any]:
    """The options of the ``ironpool.iaas.wait`` doc fragment."""
    return {
        "wait": {"type": "bool", "default": False},
        "wait_timeout": {"type": "int", "default": 300},
        "fail_on_unschedulable": {"type": "bool", "default": True},
    }


class ConnectionOptionError(Exception):
    """A connection option is missing or wrong; the message names the option."""


def client_config(params: dict[str, Any]) -> ClientConfig:
    """The effective connection: explicit options, then environment, then the client config file."""
    path = params.get("config_file")
    try:
        config = ClientConfig.load(Path(path) if path else None, server=params.get("server"),
                                   token=params.get("token"), namespace=params.get("namespace"))
    except ConfigError as exc:
        raise ConnectionOptionError(f"config_file: {exc}") from exc
    if params.get("ca_file"):
        config = replace(config, ca_file=params["ca_file"])
    if params.get("validate_certs") is not None:
        config = replace(config, insecure=not params["validate_certs"])
    if not config.server:
        raise ConnectionOptionError(
            "server: no ironpool apiserver is configured; set the server option, the IRONPOOL_SERVER "
            "environment variable, or server in the client configuration file (config_file; "
            "`ironpool up` writes ~/.config/ironpool/config.yaml)"
        )
    if not config.server.startswith(("http://", "https://")):
        raise ConnectionOptionError(f"server: {config.server!r} must be an http:// or https:// URL")
    if config.server.startswith("http://"):
        # No TLS, nothing to verify: this spares every task loading the CA bundle (~50 ms).
        config = replace(config, insecure=True)
    return config


def connect(params: dict[str, Any]) -> Client:
    """A client for the connection options in ``params`` (close it when done)."""
    return Client(client_config(params), timeout=float(params.get("request_timeout") or 30))


def list_all_raw(client: Client, info: Any, namespace: str | None, label_selector: str | None = None,
                 field_selector: str | None = None, page_size: int = 500) -> Iterator[dict[str, Any]]:
    """Every matching object as a dict, fetched ``page_size`` at a time (``namespace=None``: all)."""
    token: str | None = None
    while True:
        page = client.list_raw(info, namespace, label_selector=label_selector, field_selector=field_selector,
                               limit=page_size, continue_=token)
        yield from page.items
        token = page.continue_
        if not token:
            return
