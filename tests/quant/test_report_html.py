"""`--report-html`: one self-contained page that parses as XML, with one SQNR bar per layer of
the JSON report (and one "added" bar per ONNX layer that has that figure), a scatter point per
plotted output value, no script and no external reference."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest
from click.testing import CliRunner

from helpers.oracles import TEST_MODELS
from qconvert.cli.app import main
from qconvert.quant.report_html import render_html

SVG = "{http://www.w3.org/2000/svg}"


@pytest.mark.parametrize("src,data", [("digits_cnn.onnx", "digits_data_nchw.npz:calib"),
                                      ("digits_cnn.tflite", "digits_data_nhwc.npz:calib")])
def test_html_report_has_a_bar_per_layer_and_a_scatter(tmp_path, src, data):
    out = tmp_path / ("m" + src[src.index("."):])
    page, js = tmp_path / "r.html", tmp_path / "r.json"
    r = CliRunner().invoke(main, ["quantize", str(TEST_MODELS / src), "--calibration",
                                  str(TEST_MODELS / data), "-o", str(out), "--report", str(js),
                                  "--report-html", str(page)])
    assert r.exit_code == 0, r.output
    text = page.read_text()
    assert "<script" not in text and "http://" not in text.replace(
        "http://www.w3.org/", "")
    root = ET.fromstring(text)  # well-formed
    report = json.loads(js.read_text())
    bars = [e for e in root.iter(f"{SVG}rect") if "bar" in e.get("class", "")]
    end_to_end = [b.get("data-layer") for b in bars if b.get("data-kind") == "sqnr_db"]
    expected = [row["layer"] for row in report["layers"] if row["sqnr_db"] is not None]
    assert end_to_end == expected and len(expected) >= 5
    added = [b for b in bars if b.get("data-kind") == "added_sqnr_db"]
    measured = [b for b in added if not b.find(f"{SVG}title").text.endswith(": exact")]
    # the JSON writes an infinite SQNR (the bar "exact") as null
    assert len(measured) == sum(row.get("added_sqnr_db") is not None
                                for row in report["layers"])
    points = [e for e in root.iter(f"{SVG}circle")]
    assert len(points) == min(2000, report["samples"] * 10)  # 10 logits per sample
    assert "_output_pairs" not in report


def test_html_escapes_names():
    result = {"layers": [{"layer": "a<b>&\"c", "op": "Conv2D", "sqnr_db": 12.0}],
              "samples": 1, "method": "minmax", "output_sqnr_db": {"y<": None}}
    text = render_html(result, "m&<.onnx")
    ET.fromstring(text)
    assert "a<b>" not in text and "a&lt;b&gt;&amp;" in text
