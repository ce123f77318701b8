"""No test module imports another test module: shared builders, oracles and fixtures live in
the `helpers` package, shared fixtures in a folder's conftest.py (issue 25 item 5). This test
is the guard: tests/conftest.py no longer puts the test folders on sys.path, but pytest's
default import mode still puts each collected module's own folder there, so an import of a
test module could work by accident of collection order. REMAINING lists cross imports not yet
moved (none now); it may only shrink (a new cross import fails, and so does a stale entry)."""

from __future__ import annotations

import re
from pathlib import Path

TESTS = Path(__file__).parent
_IMPORT = re.compile(r"^\s*(?:from\s+(test_\w+)\s+import|import\s+(test_\w+))", re.M)

# (importing module, imported test module) still to be moved into helpers/: none left
REMAINING: set = set()


def cross_imports() -> set:
    """Every (module, imported test module) pair under tests/, by module stem."""
    found = set()
    for path in TESTS.rglob("*.py"):
        for m in _IMPORT.finditer(path.read_text()):
            found.add((path.stem, m.group(1) or m.group(2)))
    return found


def test_no_new_import_of_one_test_module_by_another():
    assert cross_imports() - REMAINING == set()


def test_remaining_list_holds_only_cross_imports_that_still_exist():
    assert REMAINING - cross_imports() == set()


def test_the_pattern_sees_both_import_spellings():
    text = "from test_a import x\n    import test_b\nfrom helpers.x import y\n"
    assert [a or b for a, b in _IMPORT.findall(text)] == ["test_a", "test_b"]
