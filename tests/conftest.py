"""Fixtures shared by every test. The shared helpers (models, oracles, the C harness) are the
package `helpers` (tests/helpers/), importable because pytest puts tests/ on sys.path for this
file. The test folders are not on sys.path: a test module cannot import another
(tests/test_test_imports.py)."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def tmp_copy(tmp_path):
    """Copy a model into a fresh temporary directory and return the new path."""

    def copy(path: Path, name: str | None = None) -> Path:
        target = tmp_path / (name or path.name)
        target.write_bytes(path.read_bytes())
        return target

    return copy
