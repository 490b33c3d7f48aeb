"""``ironpool apiserver``: serve the REST API over a store."""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from pathlib import Path
from typing import Any

import click

from ironpool.cli.common import F, setup_logging
from ironpool.cli.connection import read_token


def parse_listen(value: str, option: str = "--listen") -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:PORT`` for IPv6) into its parts."""
    host, sep, port_s = value.rpartition(":")
    if not sep or not port_s.isdigit() or not 0 < int(port_s) < 65536:
        raise click.BadParameter(f"{value!r} is not HOST:PORT", param_hint=option)
    return host.strip("[]") or "0.0.0.0", int(port_s)


def etcd_tls_options(f: F) -> F:
    """``--etcd-cafile``, ``--etcd-certfile`` and ``--etcd-keyfile``: TLS to an etcd store's members."""
    path = click.Path(exists=True, dir_okay=False)
    f = click.option("--etcd-keyfile", type=path, default=None,
                     help="etcd store: the key of --etcd-certfile")(f)
    f = click.option("--etcd-certfile", type=path, default=None,
                     help="etcd store: client certificate (PEM) presented to the members (needs "
                          "--etcd-keyfile)")(f)
    return click.option("--etcd-cafile", type=path, default=None,
                        help="etcd store: reach the members over TLS, trusting this CA (PEM)")(f)


def etcd_tls(cafile: str | None, certfile: str | None, keyfile: str | None) -> Any:
    """The TLS settings to etcd from the ``--etcd-*`` flags (None: plain gRPC)."""
    if cafile is None and certfile is None and keyfile is None:
        return None
    from ironpool.store.etcd_client import EtcdTls

    try:
        return EtcdTls(cafile, certfile, keyfile)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None


@click.command("apiserver")
@click.option(
    "--store",
    "store_url",
    required=True,
    metavar="URL",
    help="sqlite:///PATH (options: ?history=N&history-bytes=N&ring=N&ring-bytes=N) or "
    "etcd://HOST:PORT[,HOST:PORT...][/KEY-PREFIX] (options: ?compaction-interval=5m&ring=N&ring-bytes=N)",
)
@etcd_tls_options
@click.option("--listen", default="127.0.0.1:8443", show_default=True, metavar="HOST:PORT")
@click.option(
    "--token-file",
    required=True,
    type=click.Path(exists=True, dir_okay=False),
    help="static tokens, one 'token,user,uid,\"group1,group2\"' per line",
)
@click.option(
    "--tls-cert-file",
    type=click.Path(exists=True, dir_okay=False),
    default=None,
    help="serve HTTPS with this PEM certificate (needs --tls-private-key-file)",
)
@click.option("--tls-private-key-file", type=click.Path(exists=True, dir_okay=False), default=None)
@click.option(
    "--client-ca-file",
    type=click.Path(exists=True, dir_okay=False),
    default=None,
    help="accept client certificates signed by this CA (PEM): CN is the user, O the groups",
)
@click.option("--public-metrics", is_flag=True, default=False,
              help="serve /metrics without authentication (for a scraper without a token)")
@click.option("--authorization-mode", type=click.Choice(["RBAC", "AlwaysAllow"]), default="RBAC",
              show_default=True, help="RBAC: users may do what their Roles grant; AlwaysAllow: every "
              "authenticated user may do everything (pool identities are narrowed either way)")
@click.option("--max-connections", type=click.IntRange(min=1), default=8192, show_default=True,
              help="open connections at most (lowered to what the descriptor limit allows)")
@click.option("--max-unauthenticated-connections", type=click.IntRange(min=1), default=1024,
              show_default=True, help="connections that have not authenticated a request yet, at most")
@click.option("--header-read-timeout", type=click.FloatRange(min=0.1), default=10.0, show_default=True,
              help="seconds a client has to send a request's headers")
@click.option("--keep-alive-timeout", type=click.IntRange(min=1), default=60, show_default=True,
              help="seconds an idle keep-alive connection stays open")
@click.option("--max-connections-per-user", type=click.IntRange(min=1), default=2048, show_default=True,
              help="open connections of one user (at most half of --max-connections); a request on one "
              "past it: 429, and the connection closes")
@click.option("--max-requests-inflight-per-user", type=click.IntRange(min=1), default=400, show_default=True,
              help="API requests of one user handled at once; past it: 429 with Retry-After")
@click.option("--max-watches-per-user", type=click.IntRange(min=1), default=1000, show_default=True,
              help="watch streams of one user open at once; past it: 429 with Retry-After")
@click.option("--memory-limit", type=click.IntRange(min=0), default=0, metavar="BYTES",
              help="resident memory past which API requests get 429 with Retry-After "
              "[default: 80% of the cgroup's memory.max, if set]")
@click.option("--machinepoollet-token-file", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              default=None, help="the bearer token this apiserver presents to machinepoollets' console "
              "endpoints (their --exec-token-file) to relay machines/exec [default: no consoles]")
@click.option("--stream-ping-interval", type=click.FloatRange(min=0.1), default=20.0, show_default=True,
              help="seconds between websocket pings that keep an idle console open")
@click.option(
    "--log-level", default="info", show_default=True, type=click.Choice(["debug", "info", "warning", "error"])
)
def apiserver(
    store_url: str,
    etcd_cafile: str | None,
    etcd_certfile: str | None,
    etcd_keyfile: str | None,
    listen: str,
    token_file: str,
    tls_cert_file: str | None,
    tls_private_key_file: str | None,
    client_ca_file: str | None,
    public_metrics: bool,
    authorization_mode: str,
    max_connections: int,
    max_unauthenticated_connections: int,
    header_read_timeout: float,
    keep_alive_timeout: int,
    max_connections_per_user: int,
    max_requests_inflight_per_user: int,
    max_watches_per_user: int,
    memory_limit: int,
    machinepoollet_token_file: Path | None,
    stream_ping_interval: float,
    log_level: str,
) -> None:
    """Serve the ironpool REST API (Kubernetes conventions) over a store.

    Without a certificate it serves plain HTTP, and then only on a loopback address: bearer tokens
    must not cross a network in clear text.
    """
    if (tls_cert_file is None) != (tls_private_key_file is None):
        raise click.UsageError("--tls-cert-file and --tls-private-key-file go together")
    if client_ca_file and not tls_cert_file:
        raise click.UsageError("--client-ca-file needs --tls-cert-file and --tls-private-key-file")
    from ironpool.apiserver import ConnectionLimits, ListenError, TlsFiles, is_loopback, serve
    from ironpool.apiserver.auth import Authenticator
    from ironpool.apiserver.options import ServerOptions
    from ironpool.store.interface import StoreError, open_store
    from ironpool.store.schema import SchemaTooNew

    setup_logging(log_level)
    host, port = parse_listen(listen)
    if tls_cert_file is None and not is_loopback(host):
        raise click.BadParameter(
            f"plain HTTP is served only on a loopback address, not {host}; give --tls-cert-file and "
            "--tls-private-key-file to serve HTTPS there",
            param_hint="--listen",
        )
    tls = (
        TlsFiles(tls_cert_file, tls_private_key_file, client_ca_file)
        if tls_cert_file and tls_private_key_file
        else None
    )
    try:  # published as kube-public/cluster-info for joining hosts (pinned by hash there)
        cluster_ca = Path(client_ca_file).read_bytes() if client_ca_file else None
    except OSError as exc:
        raise click.BadParameter(f"{client_ca_file}: {exc.strerror}", param_hint="--client-ca-file") from None
    options = ServerOptions(
        cluster_ca_pem=cluster_ca,
        authorization_mode=authorization_mode,
        connections=ConnectionLimits(max_connections, max_unauthenticated_connections, header_read_timeout,
                                     keep_alive_timeout, max_per_user=max_connections_per_user),
        inflight_per_user=max_requests_inflight_per_user, watches_per_user=max_watches_per_user,
        public_metrics=public_metrics,
        memory_limit=memory_limit or None,
        machinepoollet_token=(read_token(machinepoollet_token_file)
                              if machinepoollet_token_file is not None else None),
        stream_ping_interval=stream_ping_interval,
    )
    try:
        authenticator = Authenticator.from_file(token_file)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--token-file") from None

    try:
        store = open_store(store_url, etcd_tls=etcd_tls(etcd_cafile, etcd_certfile, etcd_keyfile))
    except (ValueError, OSError, sqlite3.Error, StoreError) as exc:
        raise click.BadParameter(f"{store_url}: {exc}", param_hint="--store") from None

    async def main() -> None:
        try:
            logging.getLogger("ironpool.apiserver").info(
                "serving on %s:%d, store %s at revision %d",
                host,
                port,
                store_url,
                await store.current_revision(),
            )
            await serve(
                store,
                authenticator,
                host,
                port,
                tls=tls,
                options=options,
            )
        finally:
            await store.close()

    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop comes with uvicorn[standard]
        run = asyncio.run
    else:
        run = uvloop.run
    try:
        run(main())
    except ListenError as exc:
        raise click.BadParameter(str(exc), param_hint="--listen") from None
    except SchemaTooNew as exc:  # an etcd store is first read here
        raise click.BadParameter(str(exc), param_hint="--store") from None
