"""Fixtures shared by every test. The shared helpers (models, oracles, the C harness) are the
package `helpers` (tests/helpers/), importable because pytest puts tests/ on sys.path for this
file.

Some test modules reuse another's model builders across folders (`from test_int_executor import
tflm`, ...); the test folders go on sys.path here so those imports keep working (test module
names are unique across folders). Moving those builders into `helpers` is the cleaner end.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

_TESTS = Path(__file__).resolve().parent
for _folder in sorted(_TESTS.iterdir()):
    if (_folder / "__init__.py").exists() or not any(_folder.glob("test_*.py")):
        continue
    if str(_folder) not in sys.path:
        sys.path.append(str(_folder))


@pytest.fixture
def tmp_copy(tmp_path):
    """Copy a model into a fresh temporary directory and return the new path."""

    def copy(path: Path, name: str | None = None) -> Path:
        target = tmp_path / (name or path.name)
        target.write_bytes(path.read_bytes())
        return target

    return copy
