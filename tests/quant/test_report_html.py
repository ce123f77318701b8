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


def test_full_names_wrapped_legend_and_scale_table():
    """Must not clip a long (Keras-style) name; a legend names every colour shown; every layer
    row has its output and input scale / zero point and its 16x8 tag."""
    long = "functional_1/" + "very_long_block_name/" * 6 + "conv2d_17/Relu"
    result = {"layers": [
        {"layer": long, "op": "Conv2D", "sqnr_db": 31.0, "added_sqnr_db": 12.0, "bits": 16,
         "output": {"tensor": long, "scale": 0.125, "zero_point": -3},
         "input": [{"tensor": "x", "scale": 0.5, "zero_point": 7}]},
        {"layer": "fc", "op": "FullyConnected", "sqnr_db": 15.0, "added_sqnr_db": None,
         "output": {"tensor": "y", "scale": 0.25, "zero_point": 0}, "input": []}],
        "samples": 1, "method": "mse", "output_sqnr_db": {"y": 15.0}}
    text = render_html(result, "m.tflite")
    root = ET.fromstring(text)
    names = [td.text for td in root.iter("{http://www.w3.org/1999/xhtml}td")
             if td.get("class") == "name"]
    assert names == [long, "fc"]  # whole, in a wrapping cell
    assert "word-break: break-all" in text
    legend = next(p for p in root.iter("{http://www.w3.org/1999/xhtml}p")
                  if p.get("class") == "legend")
    legend_text = "".join(legend.itertext())
    assert all(w in legend_text for w in ("30 dB", "20 to 30 dB", "below 20 dB",
                                         "added by the layer", "16x8"))
    assert "0.125 / -3" in text and "0.5 / 7" in text and "0.25 / 0" in text
    rows = [tr for tr in root.iter("{http://www.w3.org/1999/xhtml}tr")]
    assert any("".join(tr.itertext()).startswith("0" + long + "Conv2D16") for tr in rows)
