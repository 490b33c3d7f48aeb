"""Fixtures shared by the apiserver tests that run the registry in-process."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from ironpool.store.sqlite import SQLiteStore


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SQLiteStore]:
    """A fresh SQLite store in the test's own folder, closed afterwards."""
    s = SQLiteStore(str(tmp_path / "store.db"))
    yield s
    await s.close()
