"""``ironpool backup`` and ``ironpool restore`` (see :mod:`ironpool.allinone.backup`)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import click

from ironpool.cli.apiserver_cmd import etcd_tls, etcd_tls_options


@click.command("backup")
@click.argument("file", type=click.Path(path_type=Path, dir_okay=False))
@click.option("--data-dir", type=click.Path(path_type=Path, file_okay=False), default=None,
              envvar="IRONPOOL_DATA_DIR",
              help="The `ironpool up` data dir whose store (ironpool.db) to back up [default: "
                   "/var/lib/ironpool as root, else ~/.local/share/ironpool].")
@click.option("--store", "store_url", default=None, metavar="URL",
              help="Back up this store instead: sqlite:///PATH/ironpool.db, or "
                   "etcd://HOST:PORT[,HOST:PORT...][/KEY-PREFIX] (a snapshot of the whole cluster).")
@click.option("--include-secrets", is_flag=True,
              help="Also copy the data dir's tokens.csv and pki/ (the admin token, the CA and its key), "
                   "so the restored installation keeps its clients' credentials.")
@etcd_tls_options
def backup(file: Path, data_dir: Path | None, store_url: str | None, include_secrets: bool,
           etcd_cafile: str | None, etcd_certfile: str | None, etcd_keyfile: str | None) -> None:
    """Write a consistent backup of the store to FILE while it serves (a .tar.gz, mode 0600).

    SQLite (`ironpool up`'s data dir, or --store sqlite://): SQLite's online backup of the live file,
    every write acknowledged before it started and nothing half-done. etcd (--store etcd://): etcd's
    snapshot of the whole keyspace at one revision. Bring it back with `ironpool restore`.
    """
    from ironpool.allinone.backup import BackupError, backup_etcd, backup_sqlite
    from ironpool.allinone.datadir import DataDir, default_data_dir

    dirs = DataDir((data_dir or default_data_dir()).absolute())
    started = time.monotonic()
    try:
        if store_url is not None and store_url.startswith("etcd://"):
            from ironpool.store.etcd import parse_url

            if include_secrets:
                raise click.BadParameter("an etcd cluster's certificates and token files are not in "
                                         "its keyspace; back them up with the hosts' configuration",
                                         param_hint="--include-secrets")
            try:
                endpoints, prefix, _ = parse_url(store_url.removeprefix("etcd://"))
            except ValueError as exc:
                raise click.BadParameter(str(exc), param_hint="--store") from None
            tls = etcd_tls(etcd_cafile, etcd_certfile, etcd_keyfile)
            manifest = asyncio.run(backup_etcd(file, endpoints, prefix, tls))
        else:
            if store_url is not None and not store_url.startswith("sqlite://"):
                raise click.BadParameter(f"{store_url!r}: use sqlite:///PATH or etcd://HOST:PORT",
                                         param_hint="--store")
            db = Path(store_url.removeprefix("sqlite://").partition("?")[0]) if store_url else dirs.db
            if not db.is_file():
                raise click.BadParameter(f"{db}: no store file there", param_hint="--store/--data-dir")
            manifest = backup_sqlite(file, db, secrets_of=dirs if include_secrets else None)
    except BackupError as exc:
        raise click.ClickException(str(exc)) from None
    objects = f", {manifest.objects} objects" if manifest.objects >= 0 else ""
    click.echo(f"backup {file}: {manifest.store} store {manifest.source} at revision {manifest.revision}"
               f"{objects}, schema version {manifest.schema_version}, secrets "
               f"{'included' if manifest.secrets else 'not included'} "
               f"({file.stat().st_size} bytes, {time.monotonic() - started:.2f}s)")


@click.command("restore")
@click.argument("file", type=click.Path(path_type=Path, dir_okay=False, exists=True))
@click.option("--data-dir", type=click.Path(path_type=Path, file_okay=False), required=True,
              help="The new data dir: an `ironpool up` data dir for a SQLite backup, an etcd member's "
                   "--data-dir for an etcd one. It must not exist or be empty.")
@click.option("--keep-host-state", is_flag=True,
              help="SQLite backup: --data-dir is the existing data dir of an `ironpool up` whose store "
                   "was lost (move a damaged ironpool.db away first); its machines' disks, storage "
                   "pool folder and images stay, so the restored installation adopts them. Nothing "
                   "that exists there is overwritten.")
@click.option("--etcd-name", default="default", show_default=True,
              help="etcd backup: the restored member's --name.")
@click.option("--etcd-initial-cluster", default="default=http://localhost:2380", show_default=True,
              help="etcd backup: the new cluster's --initial-cluster (restore every member with it).")
@click.option("--etcd-initial-advertise-peer-urls", "etcd_peer_url", default="http://localhost:2380",
              show_default=True, help="etcd backup: the restored member's peer URL.")
@click.option("--etcd-initial-cluster-token", default="etcd-cluster", show_default=True,
              help="etcd backup: the new cluster's --initial-cluster-token.")
def restore(file: Path, data_dir: Path, keep_host_state: bool, etcd_name: str, etcd_initial_cluster: str,
            etcd_peer_url: str, etcd_initial_cluster_token: str) -> None:
    """Bring the backup FILE back into a new data dir (or, with --keep-host-state, into the data dir
    whose store was lost, beside its machines and volumes).

    Then start it: `ironpool up --data-dir DIR` (SQLite), or etcd with `--data-dir DIR` and the same
    name, peer URL and initial cluster, and the apiservers on it (etcd). The poollets adopt the domains
    and volumes of the restored objects by uid; what they find that the backup does not know (made
    after it) is reported as orphaned on the pool (Events, log) and removed only after the
    garbage-collection grace period (--gc-grace; --gc-policy report never removes it).
    """
    from ironpool.allinone.backup import BackupError
    from ironpool.allinone.backup import restore as do_restore
    from ironpool.store.interface import StoreError
    from ironpool.store.snapshot import EtcdMemberSpec

    member = EtcdMemberSpec(etcd_name, etcd_initial_cluster, etcd_peer_url, etcd_initial_cluster_token)
    try:
        manifest = do_restore(file, data_dir, member, keep_host_state=keep_host_state)
    except (BackupError, StoreError) as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(f"restored {file} ({manifest.store} store at revision {manifest.revision}, taken "
               f"{manifest.created_at}) into {data_dir}")
    if manifest.store == "sqlite":
        click.echo(f"start it: ironpool up --data-dir {data_dir}"
                   + ("" if manifest.secrets else "  (a new admin token and CA are made: the backup "
                                                  "holds no secrets)"))
    else:
        click.echo(f"start it: etcd --name {etcd_name} --data-dir {data_dir} "
                   f"--initial-advertise-peer-urls {etcd_peer_url} ...; then the apiservers on it")
