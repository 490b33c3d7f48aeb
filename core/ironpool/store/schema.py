"""The version of the store's layout, and what opening data of another version does.

Every store records the schema version it was written with (SQLite: ``PRAGMA user_version``;
etcd: the key ``KEY-PREFIX#schema``). Opening a store:

- at :data:`SCHEMA_VERSION`: nothing to do;
- older (data written by an earlier release; version 0 is every release before versions were
  recorded): the migration steps from its version up run once, in order, and the new version is
  recorded with the last of them;
- newer (written by a later release): refused with :class:`SchemaTooNew`, which names both versions,
  before anything is read or written, so an older binary never rewrites data it does not understand.

A step that changes the layout goes into the backend's migration table (``sqlite_schema.MIGRATIONS``,
``etcd_schema.MIGRATIONS``) under the version it migrates *from*, and :data:`SCHEMA_VERSION` goes up.
"""

from __future__ import annotations

from ironpool import __version__
from ironpool.store.interface import StoreError

#: the layout this code reads and writes. 1: release 0's layout with its version recorded
SCHEMA_VERSION = 1


class SchemaTooNew(StoreError):
    """The store was written by a newer release than this one; its message names both versions."""

    def __init__(self, where: str, found: int) -> None:
        self.found = found
        super().__init__(
            f"{where}: the store's schema version is {found}, but this ironpool ({__version__}) knows "
            f"schema versions up to {SCHEMA_VERSION}: the data was written by a newer release. Run that "
            "release (or a newer one), or restore a backup taken with this one; refusing to open it")


class SchemaInvalid(StoreError):
    """What is stored is no ironpool store of the version it claims (a foreign or damaged file)."""


def parse_version(where: str, raw: bytes | str | int) -> int:
    """A recorded version as an int; SchemaInvalid naming ``where`` when it is none."""
    text = raw.decode(errors="replace") if isinstance(raw, bytes) else str(raw)
    if not text.strip().isdigit():
        raise SchemaInvalid(f"{where}: the recorded schema version {text!r} is not a number")
    return int(text)


def check_not_newer(where: str, found: int) -> None:
    if found > SCHEMA_VERSION:
        raise SchemaTooNew(where, found)
