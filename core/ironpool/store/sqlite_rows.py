"""The SQLite store's object rows under a key prefix, in key order: as they are now (the ``objects``
table), or as they were at an older revision (the objects not written since, and the first logged
``prev`` of those that were)."""

from __future__ import annotations

import sqlite3
from typing import Any

from ironpool.store.sqlite_schema import prefix_end


def object_rows(db: sqlite3.Connection, prefix: str, start_after: str | None, rev: int, current: bool, *,
                keys_only: bool = False, limit: int = -1) -> sqlite3.Cursor:
    """``(key, value)`` under ``prefix`` after ``start_after`` at ``rev`` (``current``: the store's
    revision, read from ``objects`` alone), in key order; ``keys_only``: the value is None;
    ``limit``: at most so many rows, -1 for all."""
    end = prefix_end(prefix)
    # One lower bound, not two: given "key >= prefix AND key > after" SQLite seeks to the prefix
    # and steps over every key up to ``after``, so each page of a long list cost more than the last.
    start, above = (start_after, ">") if start_after and start_after >= prefix else (prefix, ">=")
    if current:
        value = "NULL" if keys_only else "value"
        sql = f"SELECT key, {value} FROM objects WHERE key {above} ?"
        params: list[Any] = [start]
        if end is not None:
            sql += " AND key < ?"
            params.append(end)
        return db.execute(sql + " ORDER BY key LIMIT ?", [*params, limit])
    bound = "" if end is None else " AND key < :end"
    value, prev = ("NULL", "NULL") if keys_only else ("value", "e.prev")
    sql = f"""
        SELECT key, {value} FROM objects
         WHERE key {above} :start{bound} AND mod_rev <= :rev
        UNION ALL
        SELECT e.key, {prev} FROM events e JOIN (
            SELECT key, MIN(rev) AS first FROM events
             WHERE rev > :rev AND key {above} :start{bound} GROUP BY key
        ) c ON e.rev = c.first
         WHERE e.prev IS NOT NULL
        ORDER BY 1 LIMIT :limit
    """
    return db.execute(sql, {"start": start, "end": end, "rev": rev, "limit": limit})
