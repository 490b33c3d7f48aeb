"""The committed stubs under ironpool/iri/gen are exactly what ``make stubs`` produces."""

from __future__ import annotations

from pathlib import Path

from ironpool.iri import regen


def test_committed_stubs_are_fresh(tmp_path: Path) -> None:
    out = tmp_path / "gen"
    regen.generate(out)
    committed = regen.DEFAULT_OUT
    fresh_files = {p.relative_to(out) for p in out.rglob("*") if p.is_file()}
    committed_files = {
        p.relative_to(committed) for p in committed.rglob("*") if p.is_file() and "__pycache__" not in p.parts
    }
    assert fresh_files == committed_files, "stub file set differs: run `make stubs`"
    stale = [
        str(rel) for rel in sorted(fresh_files) if (out / rel).read_bytes() != (committed / rel).read_bytes()
    ]
    assert not stale, (
        f"stale generated stubs (run `make stubs`): {stale}; generators here: {regen.generator_versions()}"
    )


def test_stubs_are_self_contained() -> None:
    # protoc emits top-level imports (``from meta.v1alpha1 import ...``); regen must rewrite all.
    for path in regen.DEFAULT_OUT.rglob("*.py*"):
        if path.suffix not in (".py", ".pyi"):
            continue  # compiled bytecode beside them
        text = path.read_text()
        for pkg in regen.PACKAGES:
            assert f"\nfrom {pkg}.v1alpha1 import" not in text, path
            assert f"\nimport {pkg}.v1alpha1" not in text, path


def test_missing_proto_dir_is_reported(tmp_path: Path) -> None:
    import pytest

    with pytest.raises(FileNotFoundError, match=r"meta/v1alpha1/api\.proto"):
        regen.generate(tmp_path / "out", proto_dir=tmp_path)
    assert not (tmp_path / "out").exists()
