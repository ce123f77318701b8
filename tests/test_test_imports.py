"""No test module imports another test module: shared builders, oracles and fixtures live in
the `helpers` package (issue 25 item 5). The cross imports not yet moved are listed in
REMAINING; the list may only shrink (a new cross import fails, and so does a stale entry)."""

from __future__ import annotations

import re
from pathlib import Path

TESTS = Path(__file__).parent
_IMPORT = re.compile(r"^\s*(?:from\s+(test_\w+)\s+import|import\s+(test_\w+))", re.M)

# (importing module, imported test module) still to be moved into helpers/.
REMAINING = {
    ('test_export_c', 'test_export_c_header'),
    ('test_export_c_cmsis_1xn', 'test_export_c_fast'),
    ('test_export_c_concat', 'test_export_c'),
    ('test_export_c_concat', 'test_export_c_header'),
    ('test_export_c_convfc', 'test_export_c'),
    ('test_export_c_convfc', 'test_export_c_fast'),
    ('test_export_c_helium_tiles', 'test_export_c_fast'),
    ('test_export_c_pool_pad', 'test_export_c_fast'),
    ('test_export_c_resize', 'test_export_c'),
    ('test_export_c_resize', 'test_export_c_s16'),
    ('test_export_c_s16', 'test_int16'),
    ('test_export_c_s16', 'test_int16_executor'),
    ('test_export_c_sanitize', 'test_export_c'),
    ('test_export_c_sanitize', 'test_export_c_s16'),
    ('test_export_c_sanitize', 'test_export_c_streaming'),
    ('test_export_c_sanitize', 'test_int16_executor'),
    ('test_export_c_transpose_conv', 'test_export_c_fast'),
    ('test_int16', 'test_int16_executor'),
    ('test_int16_executor', 'test_int_executor'),
    ('test_onnx_export_ops', 'test_layout_nhwc'),
    ('test_quant_concat_fixed_range', 'test_export_c'),
}


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
