"""One resource summary (issue 27, item 3): flash, peak arena, MACs and an instruction
estimate per Cortex-M core, the same numbers in `inspect`, `quantize`, `export-c` and the HTML.
Oracles: export-c's own --report totals (its memory plan) for flash and arena, and
docs/bench_mcu.json (the measured instructions) for the rates, derived again here."""

from __future__ import annotations

import json
import statistics
import sys

import pytest
from click.testing import CliRunner

from helpers.oracles import ROOT, SAMPLE_MODELS
from qconvert.cli.app import main

DIGITS = SAMPLE_MODELS / "digits_cnn.onnx"
CALIB = SAMPLE_MODELS / "digits_calib_nchw.npy"
KWS = SAMPLE_MODELS / "kws_ref_model.tflite"


def _invoke(*args):
    result = CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result


def test_committed_rates_are_bench_mcu_json_derived_again():
    """The table qconvert ships (quant/mcu_rates.py) is what docs/bench_mcu.json gives
    (fails after a new benchmark until `python bench/mcu_rates.py --write`)."""
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        import mcu_rates as generator
    finally:
        sys.path.pop(0)
    from qconvert.quant.mcu_rates import RATES

    bench = json.loads((ROOT / "docs" / "bench_mcu.json").read_text())
    assert RATES == generator.rates(bench)
    # one rate recomputed by hand: the median of instructions / MACs on Cortex-M4, portable
    from qconvert.formats.layer_table import summary
    from qconvert.formats.model_io import load_model

    ratios = [r["instructions"] / summary(load_model(ROOT / r["source"]), "")["totals"]["macs"]
              for r in bench["records"] if r.get("board") == "m4" and r.get("image") == "portable"
              and r.get("status") == "ok"]
    assert RATES["Cortex-M4"]["portable"][0] == round(statistics.median(ratios), 2)


def test_same_numbers_in_inspect_quantize_export_c_and_html(tmp_path):
    q = tmp_path / "q.tflite"
    quantized = _invoke("quantize", DIGITS, "--calibration", CALIB, "-o", q, "--report",
                        tmp_path / "q.json", "--report-html", tmp_path / "q.html")
    exported = _invoke("export-c", q, "-o", tmp_path / "c", "--report", tmp_path / "c.json")
    inspected = _invoke("inspect", q, "--json")
    totals = json.loads((tmp_path / "c.json").read_text())["totals"]
    from_export = json.loads((tmp_path / "c.json").read_text())["resources"]
    from_quantize = json.loads((tmp_path / "q.json").read_text())["resources"]
    from_inspect = json.loads(inspected.stdout)["resources"]
    assert from_export == from_quantize == from_inspect
    assert from_export["flash_bytes"] == totals["constant_bytes"] > 0
    assert from_export["arena_bytes"] == totals["arena_bytes"] > 0
    assert from_export["macs"] == totals["macs"] == json.loads(inspected.stdout)["totals"]["macs"]
    from qconvert.quant.mcu_rates import RATES

    for core, kinds in RATES.items():
        for kernels, (median, low, high, _) in kinds.items():
            got = from_export["instructions"][core][kernels]
            assert got["instructions"] == round(totals["macs"] * median)
            assert got["low"] <= got["instructions"] <= got["high"]
    line = f"resources: flash (constants) {totals['constant_bytes']} bytes, peak arena (RAM) " \
           f"{totals['arena_bytes']} bytes"
    for result in (quantized, exported, _invoke("inspect", q)):
        assert line in result.stdout
    page = (tmp_path / "q.html").read_text()
    assert f"<th>peak arena (RAM)</th><td>{totals['arena_bytes']} bytes</td>" in page


def test_float_model_has_macs_but_no_arena_yet():
    res = json.loads(_invoke("inspect", DIGITS, "--json").stdout)
    assert res["resources"]["arena_bytes"] is None and res["resources"]["flash_bytes"] is None
    assert res["resources"]["macs"] == res["totals"]["macs"] > 0
    assert "peak arena (RAM) - (quantize first)" in _invoke("inspect", DIGITS).stdout


@pytest.mark.parametrize("kernels", ["portable", "cmsis-nn"])
def test_export_c_resources_follow_its_own_plan(tmp_path, kernels):
    _invoke("export-c", KWS, "-o", tmp_path / "c", "--kernels", kernels, "--report",
            tmp_path / "c.json")
    doc = json.loads((tmp_path / "c.json").read_text())
    assert doc["resources"]["arena_bytes"] == doc["totals"]["arena_bytes"]
    assert doc["resources"]["flash_bytes"] == doc["totals"]["constant_bytes"]
