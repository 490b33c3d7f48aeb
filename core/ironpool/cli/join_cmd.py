"""``ironpool join-token create`` on the control plane host and ``ironpool join`` on another host."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from ironpool.cli.common import (
    allocation_options,
    collect_options,
    fence_after_option,
    gc_options,
    guest_cpu_options,
    quantity_option,
    run_in_foreground,
)


def _pool_name(pool: str) -> str:
    from ironpool.allinone.datadir import dns_label

    if dns_label(pool) != pool:
        raise click.BadParameter(f"{pool!r} is not a DNS label (lower case a-z, 0-9 and '-'; "
                                 f"e.g. {dns_label(pool)!r})", param_hint="--pool")
    return pool


def _servers(value: str, option: str) -> list[str]:
    servers = [s.strip().rstrip("/") for s in value.split(",") if s.strip()]
    if not servers:
        raise click.BadParameter("no server URL given", param_hint=option)
    for server in servers:
        if not server.startswith("https://"):
            raise click.BadParameter(f"{server!r} is not an https:// URL (tokens do not cross a network "
                                     "in clear text)", param_hint=option)
    return servers


@click.group("join-token")
def join_token() -> None:
    """Issue pool identities for other hosts (run on the control plane host)."""


@join_token.command("create")
@click.option("--pool", required=True, help="The pool the joining host serves (MachinePool and VolumePool).")
@click.option("--data-dir", type=click.Path(path_type=Path, file_okay=False), default=None,
              envvar="IRONPOOL_DATA_DIR",
              help="Data dir of the control plane (its tokens.csv and pki/ca.crt) [default: that of "
                   "`ironpool up`].")
@click.option("--server", default=None, metavar="URL[,URL...]",
              help="The apiserver URL(s) the joining host reaches [default: the one `ironpool up` "
                   "recorded; give the address other hosts see when it listens on loopback].")
def create(pool: str, data_dir: Path | None, server: str | None) -> None:
    """Add a bootstrap token for POOL to the control plane's token file and print the `ironpool join`
    command that uses it (as `kubeadm token create --print-join-command`).

    The token may only ask for POOL's client certificates, which the controller-manager approves and
    signs; the command pins the CA by its hash instead of carrying it. The apiservers read the token
    file again within a second; apiservers reading a copy of it on another host need the new line too.
    Keep the command as you would a password until the host has joined, and revoke the token with
    `ironpool join-token delete --pool POOL` when no more hosts are to join with it.
    """
    from ironpool.allinone.datadir import DataDir, DataDirError, default_data_dir
    from ironpool.allinone.join_token import (
        JoinTokenError,
        add_bootstrap_token,
        ca_cert_hash,
        join_command,
        load_ca,
    )

    _pool_name(pool)
    dirs = DataDir((data_dir or default_data_dir()).absolute())
    ca_path = dirs.pki / "ca.crt"
    try:
        servers = _servers(server or dirs.read_installation().get("api", ""), "--server")
    except DataDirError as exc:
        raise click.ClickException(str(exc)) from None
    except click.BadParameter as exc:
        if server is None:
            raise click.UsageError(f"--server: {dirs.root} records no HTTPS apiserver ({exc.message}); "
                                   "give --server https://HOST:PORT") from None
        raise
    if not dirs.tokens.is_file() or not ca_path.is_file():
        raise click.UsageError(f"--data-dir {dirs.root}: no tokens.csv and pki/ca.crt there; is it the data "
                               "dir of the control plane?")
    try:
        ca_pem = ca_path.read_bytes()
        ca = load_ca(ca_pem, str(ca_path))
        token = add_bootstrap_token(dirs.tokens, pool)
    except (OSError, JoinTokenError) as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(f"pool {pool}: bootstrap token {token.id} added to {dirs.tokens}; CA {ca_path} "
               f"({ca_cert_hash(ca)})", err=True)
    click.echo("run this on the host that serves the pool:", err=True)
    click.echo(join_command(servers, token, ca_pem, pool))


def _token_file(data_dir: Path | None) -> Path:
    from ironpool.allinone.datadir import DataDir, default_data_dir

    dirs = DataDir((data_dir or default_data_dir()).absolute())
    if not dirs.tokens.is_file():
        raise click.UsageError(f"--data-dir {dirs.root}: no tokens.csv there; is it the data dir of the "
                               "control plane?")
    return dirs.tokens


_DATA_DIR = click.option("--data-dir", type=click.Path(path_type=Path, file_okay=False), default=None,
                         envvar="IRONPOOL_DATA_DIR",
                         help="Data dir of the control plane [default: that of `ironpool up`].")


@join_token.command("list")
@_DATA_DIR
def list_tokens(data_dir: Path | None) -> None:
    """The pools whose bootstrap tokens and identities the control plane's token file holds (tokens are
    not shown)."""
    from ironpool.allinone.join_token import JoinTokenError, pools_with_identities

    try:
        pools = pools_with_identities(_token_file(data_dir))
    except JoinTokenError as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(f"{'POOL':<24} IDENTITIES")
    for pool, count in sorted(pools.items()):
        click.echo(f"{pool:<24} {count}")


@join_token.command("delete")
@click.option("--pool", required=True, help="The pool whose identities go.")
@_DATA_DIR
def delete(pool: str, data_dir: Path | None) -> None:
    """Revoke every join token of POOL: its bootstrap tokens (and earlier MachinePool and VolumePool
    identity tokens) leave the token file, and the apiservers refuse them within a second: no host can
    join as POOL with them any more. A host already running on its client certificates keeps them
    until they expire (as in Kubernetes); a host joined with an identity token stops reporting."""
    from ironpool.allinone.join_token import JoinTokenError, remove_identities

    token_file = _token_file(data_dir)
    try:
        removed = remove_identities(token_file, _pool_name(pool))
    except JoinTokenError as exc:
        raise click.ClickException(str(exc)) from None
    if not removed:
        raise click.ClickException(f"{token_file} holds no identity of pool {pool}")
    click.echo(f"pool {pool}: {removed} tokens removed from {token_file}")


@click.command("join")
@click.argument("server")
@click.option("--token", required=True, envvar="IRONPOOL_JOIN_TOKEN",
              help="The bootstrap token `ironpool join-token create` printed (ID.SECRET), exchanged for the "
                   "pool's client certificates; or an earlier MACHINEPOOL-TOKEN.VOLUMEPOOL-TOKEN pair.")
@click.option("--discovery-token-ca-cert-hash", "--ca-cert-hash", "ca_cert_hash", default=None,
              metavar="sha256:HEX",
              help="Trust only a CA whose public key hashes to this (kubeadm's pin): the CA is then "
                   "discovered from the control plane's kube-public/cluster-info.")
@click.option("--ca-data", default=None,
              help="The control plane's CA, PEM in base64, instead of discovering it.")
@click.option("--ca-file", type=click.Path(path_type=Path, dir_okay=False, exists=True), default=None,
              help="The control plane's CA as a PEM file, instead of discovering it.")
@click.option("--pool", required=True, help="The pool this host serves: the one the token was issued for.")
@click.option("--data-dir", type=click.Path(path_type=Path, file_okay=False), default=None,
              envvar="IRONPOOL_DATA_DIR", help="CA, client configs, sockets, images, volumes, logs "
                   "[default: /var/lib/ironpool as root, else ~/.local/share/ironpool].")
@click.option("--libvirt-uri", default="qemu:///system", show_default=True, help="libvirt connection URI.")
@click.option("--provider-id", default=None, help="spec.providerID of the pools [default: ironpool://HOSTNAME].")
@click.option("--storage-pool", default=None,
              help="libvirt dir storage pool for volumes, created in DATA_DIR/volumes if missing "
                   "[default: ironpool-<hash of DATA_DIR>].")
@click.option("--classes", "classes", multiple=True, type=click.Path(path_type=Path, exists=True),
              help="MachineClass/VolumeClass manifests this host's runtimes offer (file or folder, "
                   "repeatable) [default: the classes shipped with ironpool].")
@click.option("--images", type=click.Path(path_type=Path, file_okay=False), default=None,
              help="Image catalog folder [default: DATA_DIR/images].")
@click.option("--tiny-image/--no-tiny-image", default=True, show_default=True,
              help="Build the tiny bootable image into the catalog if it is missing.")
@click.option("--domain-type", type=click.Choice(["auto", "kvm", "qemu"]), default="auto", show_default=True)
@guest_cpu_options
@click.option("--network-mode", type=click.Choice(["user", "nat", "isolated", "bridge"]), default="user",
              show_default=True, help="How Networks without a mode label are realised on this host.")
@click.option("--network-bridge", default="", help="The host bridge of --network-mode bridge.")
@click.option("--capacity-cpu", default=None, help="Cores the MachinePool offers [default: this host's].")
@click.option("--capacity-memory", default=None, help="Memory the MachinePool offers, e.g. 8Gi.")
@allocation_options
@click.option("--capacity-storage", default=None, help="Storage the VolumePool offers [default: free space].")
@click.option("--heartbeat-interval", default=10.0, show_default=True, type=click.FloatRange(0.1))
@fence_after_option
@gc_options
@click.option("--log-level", default="INFO", show_default=True,
              type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"], case_sensitive=False),
              help="Level of DATA_DIR/logs/ironpool.log.")
def join(server: str, token: str, ca_data: str | None, ca_file: Path | None, ca_cert_hash: str | None,
         pool: str, data_dir: Path | None, libvirt_uri: str, provider_id: str | None,
         storage_pool: str | None, classes: tuple[Path, ...], images: Path | None, tiny_image: bool,
         domain_type: str, vcpu_slice_ms: float, max_booting: int | None, network_mode: str,
         network_bridge: str,
         capacity_cpu: str | None,
         capacity_memory: str | None, cpu_allocation_ratio: float, reserved_cpu: str, reserved_memory: str,
         capacity_storage: str | None, heartbeat_interval: float, fence_after: float,
         gc_policy: str, gc_grace: float, gc_max_per_pass: int, log_level: str) -> None:
    """Serve POOL from this host for the control plane at SERVER (https://HOST:PORT, or several,
    comma-separated, tried in turn): libvirt machine and volume runtimes, machinepoollet and
    volumepoollet. With a bootstrap token they run on client certificates the control plane signs
    (the key never leaves DATA_DIR/pki), renewed before they expire; the CA is discovered and checked
    against --discovery-token-ca-cert-hash. Ctrl-C stops it; running it again resumes (on the stored
    certificates: the token is needed only while they are missing or expired); `ironpool down
    --data-dir` stops it and, with --purge, removes what it made."""
    from ironpool.allinone.datadir import DataDirError, default_data_dir
    from ironpool.allinone.join import Join, JoinError, JoinOptions
    from ironpool.allinone.join_token import (
        BootstrapToken,
        JoinTokenError,
        check_ca_hash,
        decode_ca,
        load_ca,
        parse_token,
    )
    from ironpool.allinone.progress import Progress
    from ironpool.certificates.discovery import DiscoveryError, parse_hash

    servers = _servers(server, "SERVER")
    _pool_name(pool)
    if ca_data is not None and ca_file is not None:
        raise click.UsageError("give the control plane's CA with at most one of --ca-data and --ca-file")
    try:
        join_token = parse_token(token)
        bootstrap = isinstance(join_token, BootstrapToken)
        if not bootstrap and ca_data is None and ca_file is None:
            raise click.UsageError("give the control plane's CA with exactly one of --ca-data and --ca-file "
                                   "(an identity token cannot discover it: use a bootstrap token)")
        if bootstrap and ca_data is None and ca_file is None and not ca_cert_hash:
            raise click.UsageError("--discovery-token-ca-cert-hash: required to trust the CA discovered from "
                                   "the control plane (as `ironpool join-token create` prints it), or give "
                                   "--ca-file")
        ca_pem = b""  # discovered at start
        if ca_file is not None:
            ca_pem = ca_file.read_bytes()
            load_ca(ca_pem, f"--ca-file {ca_file}")
        elif ca_data is not None:
            ca_pem = decode_ca(ca_data)
        if ca_cert_hash:
            ca_cert_hash = parse_hash(ca_cert_hash)
            if ca_pem:
                check_ca_hash(ca_pem, ca_cert_hash)
    except (JoinTokenError, DiscoveryError) as exc:
        raise click.UsageError(str(exc)) from None
    try:
        options = JoinOptions(
            data_dir=data_dir or default_data_dir(), libvirt_uri=libvirt_uri, pool=pool,
            storage_pool=storage_pool or "", images=images, tiny_image=tiny_image, domain_type=domain_type,
            vcpu_slice_ms=vcpu_slice_ms, max_booting=max_booting,
            network_mode=network_mode, network_bridge=network_bridge,
            capacity_cpu=quantity_option(capacity_cpu, "--capacity-cpu"),
            capacity_memory=quantity_option(capacity_memory, "--capacity-memory"),
            cpu_allocation_ratio=cpu_allocation_ratio,
            reserved_cpu=quantity_option(reserved_cpu, "--reserved-cpu") or 0,
            reserved_memory=quantity_option(reserved_memory, "--reserved-memory") or 0,
            capacity_storage=quantity_option(capacity_storage, "--capacity-storage"),
            heartbeat_interval=heartbeat_interval, fence_after=fence_after, log_level=log_level,
            gc=collect_options(gc_policy, gc_grace, gc_max_per_pass),
            servers=servers, token=join_token, ca_pem=ca_pem, ca_cert_hash=ca_cert_hash or "",
        )
    except ValueError as exc:  # options that do not fit together, named
        raise click.UsageError(str(exc)) from None
    if provider_id:
        options.provider_id = provider_id
    if classes:
        options.classes = list(classes)
    progress = Progress(sys.stdout)
    progress.note(f"joining {', '.join(servers)} as pool {pool} (data dir {options.data_dir})")
    system = Join(options, progress)

    def started(host: Join) -> None:
        progress.block(f"pool {pool} joined ({progress.elapsed():.1f}s):", host.summary())
        progress.note(f"Stop with Ctrl-C (or: kill {os.getpid()}; or: ironpool down --data-dir "
                      f"{host.dirs.root}).")

    run_in_foreground(system, progress, started, "ironpool join", (JoinError, DataDirError))
    progress.note("ironpool join stopped.")
