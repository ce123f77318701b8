"""Calibration data for `qconvert quantize`: every source format, image preprocessing checked
against values computed here by hand, every bad-input error (one line naming the file), random
data, batching and the stderr-only progress bar."""

from __future__ import annotations

import io
import re
import sys

import numpy as np
import pytest

from helpers.oracles import TEST_MODELS
from qconvert.errors import QConvertError
from qconvert.ir.graph import Graph, Model
from qconvert.ir.tensor import Tensor
from qconvert.quant.calibration_data import (PILLOW_HINT, RANDOM_CALIBRATION_WARNING, InputSpec,
                                             input_specs, load_calibration, random_calibration)
from qconvert.quant.progress import Progress, iter_batches

NCHW = InputSpec("input", (1, 1, 16, 16), "float32", "NCHW")  # digits_cnn.onnx
NHWC = InputSpec("serving_default_keras_tensor:0", (None, 16, 16, 1), "float32", "NHWC")
FLAT = InputSpec("x", ("N", 6), "float32", None)


def _err(path, specs, **kw) -> QConvertError:
    with pytest.raises(QConvertError) as info:
        load_calibration(path, specs, **kw)
    exc = info.value
    assert "\n" not in str(exc)  # one line for the CLI
    return exc


def _png(path, pixels, mode=None):
    from PIL import Image

    Image.fromarray(np.asarray(pixels, dtype=np.uint8), mode=mode).save(path)
    return path


# -- model inputs ---------------------------------------------------------------------------------
def _graph(*tensors):
    g = Graph()
    for t in tensors:
        g.add_tensor(t)
        g.inputs.append(t.name)
    return g


def test_input_specs_layout_from_format():
    g = _graph(Tensor("img", (None, 16, 16, 1), "float32"), Tensor("v", ("N", 640), "int8"))
    tfl = input_specs(g, "tflite")
    assert tfl == [InputSpec("img", (None, 16, 16, 1), "float32", "NHWC"),
                   InputSpec("v", ("N", 640), "int8", None)]
    assert input_specs(g, "onnx")[0].layout == "NCHW"
    assert input_specs(Model("onnx", [g]))[0].layout == "NCHW"
    assert tfl[0].sample_shape == (16, 16, 1) and tfl[0].channels == 1
    assert InputSpec("a", (1, 3, 8, 8), "float32", "NCHW").channels == 3
    with pytest.raises(ValueError):
        input_specs(g, "caffe")


def test_input_specs_of_shared_models():
    from qconvert.formats.model_io import load_model

    onnx = load_model(TEST_MODELS / "digits_cnn.onnx")
    assert input_specs(onnx.graph, "onnx") == [NCHW]


# -- .npy -----------------------------------------------------------------------------------------
def test_npy_batch_single_sample_and_squeeze(tmp_path):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((5, 6))
    np.save(tmp_path / "batch.npy", x)  # float64 into a float32 input: fine
    out = load_calibration(tmp_path / "batch.npy", [FLAT])
    assert list(out) == ["x"] and out["x"].dtype == np.float32
    np.testing.assert_array_equal(out["x"], x.astype(np.float32))

    spec = InputSpec("in", (1, 3, 4, 4), "float32", "NCHW")
    one = rng.standard_normal((1, 3, 4, 4)).astype(np.float32)  # the full input shape
    np.save(tmp_path / "one.npy", one)
    assert load_calibration(tmp_path / "one.npy", [spec])["in"].shape == (1, 3, 4, 4)
    np.save(tmp_path / "bare.npy", one[0])  # one sample without a batch axis
    assert load_calibration(tmp_path / "bare.npy", [spec])["in"].shape == (1, 3, 4, 4)
    per_sample_batch = rng.standard_normal((7, 1, 3, 4, 4)).astype(np.float32)
    np.save(tmp_path / "squeeze.npy", per_sample_batch)
    got = load_calibration(tmp_path / "squeeze.npy", [spec])["in"]
    np.testing.assert_array_equal(got, per_sample_batch[:, 0])

    assert load_calibration(tmp_path / "squeeze.npy", [spec], limit=3)["in"].shape[0] == 3


def test_integer_data(tmp_path):
    spec = InputSpec("q", (1, 4), "int8", None)
    np.save(tmp_path / "i.npy", np.array([[-128, 0, 5, 127]], dtype=np.int64))
    got = load_calibration(tmp_path / "i.npy", [spec])["q"]
    assert got.dtype == np.int8 and got.tolist() == [[-128, 0, 5, 127]]
    np.save(tmp_path / "u.npy", np.array([[0, 1, 2, 3]], dtype=np.uint8))  # ints into float
    got = load_calibration(tmp_path / "u.npy", [InputSpec("f", (1, 4), "float32")])["f"]
    assert got.dtype == np.float32 and got.tolist() == [[0, 1, 2, 3]]


# -- .npz -----------------------------------------------------------------------------------------
def test_npz_per_input_name_single_array_and_key(tmp_path):
    a = InputSpec("a", (None, 3), "float32")
    b = InputSpec("b", (None, 2), "int8")
    np.savez(tmp_path / "two.npz", a=np.ones((4, 3)), b=np.zeros((4, 2), np.int8),
             labels=np.arange(4))
    out = load_calibration(tmp_path / "two.npz", [a, b])
    assert out["a"].shape == (4, 3) and out["b"].dtype == np.int8 and "labels" not in out

    np.savez(tmp_path / "single.npz", whatever=np.ones((2, 3)))
    assert load_calibration(tmp_path / "single.npz", [a])["a"].shape == (2, 3)

    np.savez(tmp_path / "several.npz", calib=np.ones((2, 3)), test=np.zeros((5, 3)))
    assert load_calibration(f"{tmp_path / 'several.npz'}:test", [a])["a"].shape == (5, 3)


def test_npz_ambiguous_lists_keys(tmp_path):
    np.savez(tmp_path / "several.npz", calib=np.ones((2, 6)), test=np.zeros((5, 6)))
    exc = _err(tmp_path / "several.npz", [FLAT])
    assert exc.path == str(tmp_path / "several.npz")
    assert "calib, test" in exc.cause and ":<key>" in exc.cause
    exc = _err(f"{tmp_path / 'several.npz'}:train", [FLAT])
    assert "'train'" in exc.cause and "calib, test" in exc.cause


def test_npz_missing_input_of_multi_input_model(tmp_path):
    np.savez(tmp_path / "d.npz", a=np.ones((2, 3)))
    exc = _err(tmp_path / "d.npz", [InputSpec("a", (None, 3), "float32"),
                                    InputSpec("b", (None, 3), "float32")])
    assert "'b'" in exc.cause and "arrays: a" in exc.cause


def test_shared_digits_data():
    calib = np.load(TEST_MODELS / "digits_data_nchw.npz")["calib"]
    out = load_calibration(f"{TEST_MODELS / 'digits_data_nchw.npz'}:calib", [NCHW])
    assert out["input"].shape == (128, 1, 16, 16) and out["input"].dtype == np.float32
    np.testing.assert_array_equal(out["input"], calib)
    out = load_calibration(f"{TEST_MODELS / 'digits_data_nhwc.npz'}:calib", [NHWC], limit=10)
    assert out[NHWC.name].shape == (10, 16, 16, 1)
    # NHWC data for the NCHW model: a shape error that says so
    exc = _err(f"{TEST_MODELS / 'digits_data_nhwc.npz'}:calib", [NCHW])
    assert "NHWC data" in exc.cause and "[N, 1, 16, 16]" in exc.cause
    exc = _err(TEST_MODELS / "digits_data_nchw.npz", [NCHW])
    assert "calib, test, labels" in exc.cause
    exc = _err(f"{TEST_MODELS / 'digits_data_nchw.npz'}:calib", [NHWC])
    assert "NCHW data" in exc.cause


# -- folders of .npy ------------------------------------------------------------------------------
def test_folder_of_npy_sorted_samples_and_batches(tmp_path):
    d = tmp_path / "calib"
    d.mkdir()
    np.save(d / "b.npy", np.full((2, 6), 2.0))  # a batch
    np.save(d / "a.npy", np.full(6, 1.0))  # one sample without batch
    np.save(d / "c.npy", np.full((1, 6), 3.0))
    (d / "README.txt").write_text("ignored")
    got = load_calibration(d, [FLAT])["x"]
    assert got[:, 0].tolist() == [1.0, 2.0, 2.0, 3.0]
    assert load_calibration(d, [FLAT], limit=2)["x"][:, 0].tolist() == [1.0, 2.0]


def test_folder_with_dynamic_dims_must_agree(tmp_path):
    spec = InputSpec("s", (None, None), "float32")
    d = tmp_path / "calib"
    d.mkdir()
    np.save(d / "a.npy", np.zeros((1, 4)))
    np.save(d / "b.npy", np.zeros((1, 5)))
    exc = _err(d, [spec])
    assert exc.path == str(d / "b.npy") and "a.npy" in exc.cause


# -- images ---------------------------------------------------------------------------------------
RGB = np.array([[[10, 20, 30], [40, 50, 60]],
                [[70, 80, 90], [250, 0, 128]]], dtype=np.uint8)  # H=2, W=2, C=3


def test_images_nhwc_mean_std_per_channel(tmp_path):
    pytest.importorskip("PIL")
    d = tmp_path / "images"
    d.mkdir()
    _png(d / "0.png", RGB)
    _png(d / "1.png", 255 - RGB)
    spec = InputSpec("img", (1, 2, 2, 3), "float32", "NHWC")
    mean, std = [1.0, 2.0, 3.0], [2.0, 4.0, 8.0]
    got = load_calibration(d, [spec], mean=mean, std=std)["img"]
    expected = np.stack([RGB, 255 - RGB]).astype(np.float64)
    expected = (expected - np.array(mean)) / np.array(std)
    assert got.shape == (2, 2, 2, 3) and got.dtype == np.float32
    np.testing.assert_allclose(got, expected, rtol=1e-6)
    # one number for every channel
    got = load_calibration(d, [spec], mean=127.5, std=127.5)["img"]
    np.testing.assert_allclose(got[0], (RGB - 127.5) / 127.5, rtol=1e-6)
    # --scale; and raw pixels without any option
    got = load_calibration(d, [spec], scale=1 / 255)["img"]
    np.testing.assert_allclose(got[0], RGB / 255, rtol=1e-6)
    np.testing.assert_array_equal(load_calibration(d, [spec])["img"][1], 255 - RGB)


def test_images_nchw_layout(tmp_path):
    pytest.importorskip("PIL")
    path = _png(tmp_path / "x.png", RGB)
    spec = InputSpec("img", (1, 3, 2, 2), "float32", "NCHW")
    got = load_calibration(path, [spec], mean=[0, 10, 20])["img"]  # a single image file
    assert got.shape == (1, 3, 2, 2)
    expected = RGB.transpose(2, 0, 1) - np.array([0, 10, 20])[:, None, None]
    np.testing.assert_array_equal(got[0], expected)


def test_images_grayscale_resize_and_dynamic_size(tmp_path):
    pytest.importorskip("PIL")
    d = tmp_path / "gray"
    d.mkdir()
    _png(d / "big.png", np.full((8, 6, 3), 77, np.uint8))  # RGB gray 77 -> L 77
    _png(d / "small.bmp", np.full((3, 3), 200, np.uint8))
    spec = InputSpec("g", (None, 4, 5, 1), "float32", "NHWC")  # H=4, W=5
    got = load_calibration(d, [spec])["g"]
    assert got.shape == (2, 4, 5, 1)
    np.testing.assert_array_equal(got[0], 77)  # uniform images stay uniform
    np.testing.assert_array_equal(got[1], 200)
    dyn = InputSpec("g", (None, 1, None, None), "float32", "NCHW")  # first image's size
    assert load_calibration(d, [dyn])["g"].shape == (2, 1, 8, 6)


def test_images_into_integer_inputs(tmp_path):
    pytest.importorskip("PIL")
    path = _png(tmp_path / "p.png", RGB)
    u8 = InputSpec("u", (1, 2, 2, 3), "uint8", "NHWC")
    got = load_calibration(path, [u8])["u"]
    assert got.dtype == np.uint8
    np.testing.assert_array_equal(got[0], RGB)
    i8 = InputSpec("i", (1, 2, 2, 3), "int8", "NHWC")
    got = load_calibration(path, [i8], mean=128)["i"]
    np.testing.assert_array_equal(got[0], RGB.astype(np.int16) - 128)
    exc = _err(path, [i8])
    assert "do not fit" in exc.cause and "int8" in exc.cause and exc.path == str(path)
    exc = _err(path, [i8], std=3)
    assert "not integers" in exc.cause


def test_images_need_an_image_input(tmp_path):
    pytest.importorskip("PIL")
    path = _png(tmp_path / "p.png", RGB)
    exc = _err(path, [FLAT])
    assert "not an image input" in exc.cause


def test_corrupt_image_names_the_file(tmp_path):
    pytest.importorskip("PIL")
    d = tmp_path / "images"
    d.mkdir()
    _png(d / "a.png", RGB)
    (d / "b.jpg").write_bytes(b"\xff\xd8\xff\xe0 definitely not a jpeg")
    exc = _err(d, [InputSpec("img", (1, 2, 2, 3), "float32", "NHWC")])
    assert exc.path == str(d / "b.jpg") and exc.cause.startswith("cannot read image")


def test_pillow_missing(tmp_path, monkeypatch):
    d = tmp_path / "images"
    d.mkdir()
    (d / "a.png").write_bytes(b"not even read")
    monkeypatch.setitem(sys.modules, "PIL", None)  # `from PIL import ...` raises ImportError
    exc = _err(d, [InputSpec("img", (1, 2, 2, 3), "float32", "NHWC")])
    assert exc.cause == PILLOW_HINT and "pip install pillow" in exc.cause
    assert "qconvert[images]" in exc.cause and exc.path == str(d)
    np.save(tmp_path / "ok.npy", np.zeros((1, 6)))  # arrays never need Pillow
    assert load_calibration(tmp_path / "ok.npy", [FLAT])["x"].shape == (1, 6)


# -- bad input ------------------------------------------------------------------------------------
def test_wrong_shape(tmp_path):
    np.save(tmp_path / "w.npy", np.zeros((3, 7), np.float32))
    exc = _err(tmp_path / "w.npy", [FLAT])
    assert exc.path == str(tmp_path / "w.npy")
    assert "[3, 7]" in exc.cause and "[N, 6]" in exc.cause and "'x'" in exc.cause


def test_wrong_dtype(tmp_path):
    spec = InputSpec("q", (1, 4), "int8")
    np.save(tmp_path / "f.npy", np.zeros((2, 4), np.float32))
    exc = _err(tmp_path / "f.npy", [spec])
    assert "float32" in exc.cause and "int8" in exc.cause
    np.save(tmp_path / "big.npy", np.array([[0, 1, 2, 300]]))
    assert "do not fit" in _err(tmp_path / "big.npy", [spec]).cause
    np.save(tmp_path / "s.npy", np.array([["a"] * 6]))
    assert "not numbers" in _err(tmp_path / "s.npy", [FLAT]).cause
    np.save(tmp_path / "huge.npy", np.full((1, 6), 1e300))
    assert "range of float32" in _err(tmp_path / "huge.npy", [FLAT]).cause


@pytest.mark.parametrize("bad, word", [(np.nan, "NaN"), (np.inf, "infinity")])
def test_nan_and_inf(tmp_path, bad, word):
    x = np.zeros((4, 6), np.float32)
    x[2, 3] = bad
    np.save(tmp_path / "n.npy", x)
    exc = _err(tmp_path / "n.npy", [FLAT])
    assert word in exc.cause and "sample 2" in exc.cause and exc.path == str(tmp_path / "n.npy")


def test_empty_inputs(tmp_path):
    d = tmp_path / "empty"
    d.mkdir()
    (d / "notes.txt").write_text("no data here")
    exc = _err(d, [FLAT])
    assert exc.path == str(d) and "no calibration data" in exc.cause
    np.save(tmp_path / "zero.npy", np.zeros((0, 6), np.float32))
    assert "no samples" in _err(tmp_path / "zero.npy", [FLAT]).cause
    assert "no such file" in _err(tmp_path / "missing.npy", [FLAT]).cause


def test_corrupt_and_misnamed_files(tmp_path):
    (tmp_path / "bad.npy").write_bytes(b"garbage")
    assert "not a .npy file" in _err(tmp_path / "bad.npy", [FLAT]).cause
    np.save(tmp_path / "t.npy", np.zeros((100, 6)))
    data = (tmp_path / "t.npy").read_bytes()
    (tmp_path / "trunc.npy").write_bytes(data[: len(data) // 2])
    assert _err(tmp_path / "trunc.npy", [FLAT]).path == str(tmp_path / "trunc.npy")
    (tmp_path / "bad.npz").write_bytes(b"PK\x03\x04 broken zip")
    assert "not a valid .npz" in _err(tmp_path / "bad.npz", [FLAT]).cause
    (tmp_path / "data.csv").write_text("1,2,3")
    assert "unsupported" in _err(tmp_path / "data.csv", [FLAT]).cause
    np.save(tmp_path / "obj.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    assert "Python objects" in _err(tmp_path / "obj.npy", [FLAT]).cause


def test_npy_for_a_multi_input_model(tmp_path):
    np.save(tmp_path / "x.npy", np.zeros((1, 6)))
    exc = _err(tmp_path / "x.npy", [FLAT, InputSpec("y", (1, 2), "float32")])
    assert "2 inputs" in exc.cause and ".npz" in exc.cause


def test_bad_normalization_options(tmp_path):
    np.save(tmp_path / "x.npy", np.zeros((1, 6)))
    assert "not both" in _err(tmp_path / "x.npy", [FLAT], mean=1, scale=2).cause
    assert "--std must be positive" in _err(tmp_path / "x.npy", [FLAT], std=0).cause
    assert "no channel axis" in _err(tmp_path / "x.npy", [FLAT], mean=[1, 2, 3]).cause


# -- random data, batches, progress ---------------------------------------------------------------
def test_random_calibration():
    specs = [InputSpec("f", (None, 3, 4), "float32"), InputSpec("q", (1, 500), "int8"),
             InputSpec("d", ("N", None), "float16")]
    data = random_calibration(specs, 8, seed=1)
    assert data["f"].shape == (8, 3, 4) and data["f"].dtype == np.float32
    assert data["q"].dtype == np.int8 and data["q"].min() == -128 and data["q"].max() == 127
    assert data["d"].shape == (8, 1) and data["d"].dtype == np.float16
    again = random_calibration(specs, 8, seed=1)
    assert all(np.array_equal(data[k], again[k]) for k in data)
    assert "random" in RANDOM_CALIBRATION_WARNING and "mean nothing" in RANDOM_CALIBRATION_WARNING


def test_iter_batches():
    data = {"a": np.arange(10), "b": np.arange(20).reshape(10, 2)}
    batches = list(iter_batches(data, 4))
    assert [len(b["a"]) for b in batches] == [4, 4, 2]
    np.testing.assert_array_equal(np.concatenate([b["b"] for b in batches]), data["b"])
    with pytest.raises(ValueError):
        list(iter_batches({"a": np.zeros(3), "b": np.zeros(4)}, 2))


class _Tty(io.StringIO):
    def isatty(self):
        return True


def test_progress_silent_without_a_terminal(capsys):
    stream = io.StringIO()
    with Progress(5, "calibrating", stream=stream) as bar:
        bar.update(5)
    assert stream.getvalue() == ""
    with Progress(3, "calibrating") as bar:  # real stderr: not a TTY under pytest
        bar.update(3)
    assert capsys.readouterr() == ("", "")


def _drawn_lines(text: str) -> list:
    """The lines a terminal would show, cursor escapes removed."""
    import re

    text = re.sub(r"\x1b\[\?25[lh]", "", text)
    return [line for chunk in text.split("\n") for line in chunk.split("\r") if line.strip()]


def test_progress_draws_on_a_terminal(capsys, monkeypatch):
    """click's bar: label, position, rate; the last line complete; nothing on stdout."""
    monkeypatch.setenv("COLUMNS", "100")
    stream = _Tty()
    with Progress(4, "calibrating", stream=stream) as bar:
        bar.update(1)
        bar.update(3)
    lines = _drawn_lines(stream.getvalue())
    assert stream.getvalue().endswith("\n")
    assert lines[-1].startswith("calibrating [") and "#" in lines[-1]
    assert re.search(r"\] 4/4 [\d.]+/s", lines[-1]), lines[-1]
    assert capsys.readouterr().out == ""


@pytest.mark.parametrize("columns", [100, 60, 40, 24])
def test_progress_line_never_exceeds_the_terminal(monkeypatch, columns):
    """Must not: a line wider than the terminal (it wrapped and cascaded at 40 columns)."""
    monkeypatch.setenv("COLUMNS", str(columns))
    stream = _Tty()
    with Progress(597, "calibrating", stream=stream) as bar:
        for _ in range(10):
            bar.update(60)
    lines = _drawn_lines(stream.getvalue())
    assert lines and max(len(line.rstrip()) for line in lines) <= columns
    assert "597/597" in lines[-1]
