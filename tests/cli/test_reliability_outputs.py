"""Reliability, classes 1, 2 and 7 of the adversarial sweep: outputs never replace an input
(symlinks, hard links, `..` paths followed), FIFOs and character devices are written into or
refused, multi-file outputs are all-or-nothing under a full disk and under SIGINT / SIGTERM, no
temporary file is left, long and strange file names end in one line. Generators draw the cases
(hypothesis); every failure must be the tool's one line, exit 1, nothing written, inputs unchanged.
"""

from __future__ import annotations

import errno
import hashlib
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings, strategies as st

from helpers.oracles import ROOT, TEST_MODELS
from qconvert.formats import output_files
from qconvert.cli.app import main

ONNX = TEST_MODELS / "digits_cnn.onnx"
TFLITE_INT8 = TEST_MODELS / "ad01_int8.tflite"
CALIB = TEST_MODELS / "digits_data_nchw.npz"
EXAMPLES = int(os.environ.get("QCONVERT_SWEEP_EXAMPLES", "12"))  # bench/reliability_sweep.py
SETTINGS = settings(max_examples=EXAMPLES, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture])


def run(args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def assert_clean_failure(result, *names):
    assert result.exit_code == 1, (result.exit_code, result.output)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("qconvert: error: "), result.stderr
    assert "Traceback" not in result.output
    for name in names:
        assert name in lines[0]


def digest(folder: Path) -> dict:
    """{relative path: (kind, sha256)} of everything under `folder` (links not followed)."""
    out = {}
    for p in sorted(folder.rglob("*")):
        if p.is_symlink():
            out[str(p.relative_to(folder))] = ("link", os.readlink(p))
        elif p.is_file():
            out[str(p.relative_to(folder))] = ("file", hashlib.sha256(p.read_bytes()).hexdigest())
    return out


def workspace(tmp: Path) -> dict:
    """A model with external data, calibration and eval data in `tmp`."""
    import onnx

    from helpers.oracles import OnnxNet

    net = OnnxNet(1)
    x = net.input("x", [1, 2, 8, 8])
    net.conv(x, 2, 4, "y")
    m = onnx.load_from_string(net.build(["y"]))
    onnx.save_model(m, tmp / "m.onnx", save_as_external_data=True, all_tensors_to_one_file=True,
                    location="m.data", size_threshold=0)
    data = np.random.default_rng(0).standard_normal((4, 1, 2, 8, 8)).astype(np.float32)
    np.save(tmp / "c.npy", data)
    np.savez(tmp / "e.npz", x=data)
    return {"model": tmp / "m.onnx", "calibration": tmp / "c.npy", "eval": tmp / "e.npz",
            "external": tmp / "m.data"}


ALIASES = st.sampled_from(["same", "symlink", "dotdot", "hardlink", "symlink_chain"])
TARGETS = st.sampled_from(["model", "calibration", "eval", "external"])
OUTPUT_SLOTS = st.sampled_from(["-o", "--report"])


def aliased(tmp: Path, target: Path, how: str, k: int) -> Path:
    if how == "same":
        return target
    if how == "dotdot":
        (tmp / "sub").mkdir(exist_ok=True)
        return tmp / "sub" / ".." / target.name
    link = tmp / f"alias{k}{target.suffix}"
    if how == "hardlink":
        os.link(target, link)
    elif how == "symlink":
        link.symlink_to(target)
    else:
        mid = tmp / f"mid{k}"
        mid.symlink_to(target)
        link.symlink_to(mid)
    return link


@SETTINGS
@given(target=TARGETS, how=ALIASES, slot=OUTPUT_SLOTS, k=st.integers(0, 10**6))
def test_no_output_resolves_to_an_input(tmp_path_factory, target, how, slot, k):
    tmp = tmp_path_factory.mktemp("alias")
    files = workspace(tmp)
    out = aliased(tmp, files[target], how, k)
    args = ["quantize", files["model"], "--calibration", files["calibration"], "--eval",
            files["eval"]]
    args += ["-o", out] if slot == "-o" else ["-o", tmp / "q.onnx", "--report", out]
    before = digest(tmp)
    result = run(args)
    assert_clean_failure(result, "refusing to overwrite an input")
    assert digest(tmp) == before


@pytest.mark.parametrize("command", ["convert", "fuse", "export-c-header"])
def test_other_commands_refuse_inputs_too(tmp_path, command):
    files = workspace(tmp_path)
    extra = ["--calibration", files["calibration"]] if command == "export-c-header" else []
    for target in ("model", "external") + (("calibration",) if extra else ()):
        before = digest(tmp_path)
        result = run([command, files["model"], *extra, "-o", files[target]])
        assert_clean_failure(result, "refusing to overwrite an input")
        assert digest(tmp_path) == before


def test_char_device_output_is_written_into(tmp_path):
    result = run(["convert", ONNX, "-o", "/dev/null"])
    assert result.exit_code == 0, result.output
    assert Path("/dev/null").is_char_device()
    assert not list(Path("/dev").glob(".qc*.tmp"))


def test_fifo_output_without_reader_is_refused(tmp_path):
    fifo = tmp_path / "out.onnx"
    os.mkfifo(fifo)
    result = run(["convert", ONNX, "-o", fifo])
    assert_clean_failure(result, "FIFO")
    assert fifo.is_fifo() and os.listdir(tmp_path) == ["out.onnx"]


def test_fifo_output_with_reader_gets_the_bytes(tmp_path):
    expected = tmp_path / "regular.onnx"
    assert run(["convert", ONNX, "-o", expected]).exit_code == 0
    fifo = tmp_path / "out.onnx"
    os.mkfifo(fifo)
    got = []

    def reader():
        fd = os.open(fifo, os.O_RDONLY)  # blocks until the writer opens
        with os.fdopen(fd, "rb") as f:
            got.append(f.read())

    t = threading.Thread(target=reader, daemon=True)
    t.start()
    deadline = time.time() + 10
    result = None
    while time.time() < deadline:  # the reader must have opened before the writer's check
        result = run(["convert", ONNX, "-o", fifo])
        if result.exit_code == 0:
            break
        time.sleep(0.05)
    t.join(10)
    assert result.exit_code == 0, result.output
    assert fifo.is_fifo()
    assert got == [expected.read_bytes()]


# -- full disk (class 2) ----------------------------------------------------------------------
def _full_disk_after(monkeypatch, budget: int):
    real = output_files._write_all

    def write_all(fd, data):
        nonlocal budget
        view = memoryview(data).cast("B")
        if len(view) > budget:
            real(fd, view[:budget])
            budget = 0
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        budget -= len(view)
        real(fd, view)

    monkeypatch.setattr(output_files, "_write_all", write_all)


@SETTINGS
@given(budget=st.integers(0, 220_000), command=st.sampled_from(["export", "fuse", "quantize"]))
def test_full_disk_leaves_nothing(tmp_path_factory, monkeypatch, budget, command):
    tmp = tmp_path_factory.mktemp("enospc")
    if command == "export":
        args = ["export-c-header", TFLITE_INT8, "-o", tmp / "w.h", "--with-kernels"]
        names = ["w.h", "qconvert_fc_1x4.c", "qconvert_fc_1x4.h"]
    elif command == "fuse":
        args = ["fuse", ONNX, "-o", tmp / "f.onnx", "--report", tmp / "r.json"]
        names = ["f.onnx", "r.json"]
    else:
        args = ["quantize", ONNX, "--calibration", f"{CALIB}:calib", "-o", tmp / "q.onnx",
                "--report", tmp / "r.json"]
        names = ["q.onnx", "r.json"]
    with monkeypatch.context() as mp:
        _full_disk_after(mp, budget)
        result = run(args)
    written = sorted(os.listdir(tmp))
    if result.exit_code == 0:
        assert written == sorted(names)
    else:
        assert_clean_failure(result, "No space left")
        assert written == []


# -- signals (class 2) ------------------------------------------------------------------------
def _cli(args, **kw):
    return subprocess.Popen([sys.executable, "-m", "qconvert.cli", *map(str, args)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT, **kw)


def _wait_until_handling(p) -> float:
    """Wait until the child `qconvert` catches SIGTERM, i.e. its command runs under
    `handle_termination` (SigCgt of /proc/PID/status; Python itself catches only SIGINT): a
    signal before that lands in the interpreter's own start-up (site, imports), where Python's
    default handling applies and qconvert has no say. The seconds waited; at once when the child
    has already ended."""
    t0 = time.time()
    status = Path(f"/proc/{p.pid}/status")
    while p.poll() is None and time.time() - t0 < 60:
        try:
            caught = [ln for ln in status.read_text().splitlines() if ln.startswith("SigCgt:")]
        except OSError:
            break
        if caught and int(caught[0].split()[1], 16) & (1 << (signal.SIGTERM - 1)):
            break
        time.sleep(0.002)
    return time.time() - t0


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_signals_leave_all_or_nothing(tmp_path, signum):
    """Kill `export-c-header --with-kernels` at points spread over its command's run (from the
    moment it handles signals): either exit 0 with all three files, or a non-zero exit with
    none, and never a temporary file or a traceback."""
    probe = tmp_path / "probe"
    probe.mkdir()
    p = _cli(["export-c-header", TFLITE_INT8, "-o", probe / "w.h", "--with-kernels"])
    _wait_until_handling(p)
    t0 = time.time()
    p.communicate(timeout=120)
    span = time.time() - t0
    names = {"w.h", "qconvert_fc_1x4.c", "qconvert_fc_1x4.h"}
    rng = np.random.default_rng(int(signum))
    for i, delay in enumerate(sorted(rng.uniform(0.0, 1.1, 3) * span)):
        d = tmp_path / f"run{i}"
        d.mkdir()
        p = _cli(["export-c-header", TFLITE_INT8, "-o", d / "w.h", "--with-kernels"])
        _wait_until_handling(p)
        time.sleep(delay)
        p.send_signal(signum)
        _, err = p.communicate(timeout=120)
        written = set(os.listdir(d))
        assert "Traceback" not in err.decode(), err
        if p.returncode == 0:
            assert written == names
        else:
            assert written == set(), (p.returncode, written)


def test_sigterm_during_a_large_onnx_write_leaves_no_temp(tmp_path, monkeypatch):
    """A SIGTERM that arrives while the temporary file is being written removes it."""
    real = output_files._write_all

    def slow_write(fd, data):
        real(fd, memoryview(data)[:10])
        os.kill(os.getpid(), signal.SIGTERM)
        real(fd, memoryview(data)[10:])

    monkeypatch.setattr(output_files, "_write_all", slow_write)
    result = CliRunner().invoke(main, ["convert", str(ONNX), "-o", str(tmp_path / "o.onnx")])
    assert result.exit_code == 128 + signal.SIGTERM
    assert "terminated" in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert os.listdir(tmp_path) == []


class _DropsASignal:
    """Raises `signum` from its `__del__`: the handler's interrupt is raised inside a finalizer,
    where Python prints "Exception ignored" and drops it (as in an import lock's weakref
    callback, where CI once caught a Ctrl-C)."""

    def __init__(self, signum):
        self.signum = signum

    def __del__(self):
        signal.raise_signal(self.signum)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
@pytest.mark.parametrize("when", ["before the work", "while writing"])
def test_a_signal_python_drops_still_stops_the_command(tmp_path, monkeypatch, signum, when):
    """A signal whose interrupt is raised where Python cannot raise (a finalizer) is neither
    printed nor lost: the command ends as interrupted and writes nothing."""
    if when == "before the work":
        real_add = output_files.OutputFiles.add

        def add(self, path):
            _DropsASignal(signum)  # collected at once: the interrupt is dropped here
            return real_add(self, path)

        monkeypatch.setattr(output_files.OutputFiles, "add", add)
    else:
        real_write = output_files._write_all

        def write_all(fd, data):
            _DropsASignal(signum)
            real_write(fd, data)

        monkeypatch.setattr(output_files, "_write_all", write_all)
    result = CliRunner().invoke(main, ["convert", str(ONNX), "-o", str(tmp_path / "o.onnx")])
    assert result.exit_code == (130 if signum == signal.SIGINT else 128 + signum)
    assert result.stderr.strip().splitlines() == [
        "qconvert: interrupted; nothing written" if signum == signal.SIGINT
        else "qconvert: terminated (SIGTERM); nothing written"]
    assert os.listdir(tmp_path) == []


def test_a_dropped_signal_ends_a_command_that_writes_nothing(monkeypatch):
    """`inspect` writes no file; a dropped Ctrl-C still ends it as interrupted, not with exit 0."""
    from qconvert.cli import app as cli

    real_echo = cli.click.echo
    calls = []

    def echo(*args, **kw):
        if not calls:
            _DropsASignal(signal.SIGINT)
        calls.append(1)
        return real_echo(*args, **kw)

    monkeypatch.setattr(cli.click, "echo", echo)
    result = CliRunner().invoke(main, ["inspect", str(ONNX)])
    assert result.exit_code == 130
    assert "Exception ignored" not in result.stderr and "Traceback" not in result.stderr


def test_other_unraisable_exceptions_are_still_reported(monkeypatch):
    """Only a dropped signal interrupt is kept quiet; any other exception in a finalizer goes
    to the hook that was there before, and that hook is back afterwards."""
    seen = []
    monkeypatch.setattr(sys, "unraisablehook", lambda u: seen.append(u.exc_value))
    before = sys.unraisablehook

    class Broken:
        def __del__(self):
            raise ValueError("finalizer bug")

    with output_files.handle_termination():
        Broken()
    assert [str(e) for e in seen] == ["finalizer bug"]
    assert sys.unraisablehook is before


# -- names (class 7) --------------------------------------------------------------------------
@SETTINGS
@given(length=st.integers(200, 300))
def test_long_output_names(tmp_path_factory, length):
    tmp = tmp_path_factory.mktemp("long")
    name = "m" * (length - len(".onnx")) + ".onnx"
    result = run(["convert", ONNX, "-o", tmp / name])
    if length <= 255:
        assert result.exit_code == 0, result.output
        assert os.listdir(tmp) == [name]
    else:
        assert_clean_failure(result, "longer than the file system allows")
        assert os.listdir(tmp) == []


NAME_CHARS = st.characters(blacklist_categories=("Cs",), blacklist_characters="/\x00")


@SETTINGS
@given(stem=st.text(NAME_CHARS, min_size=1, max_size=20).filter(lambda s: s not in (".", "..")))
def test_strange_file_names_give_one_line(tmp_path_factory, stem):
    tmp = tmp_path_factory.mktemp("names")
    bad = tmp / f"{stem}\n.onnx"
    bad.write_bytes(b"not a model")
    result = run(["inspect", bad])
    assert_clean_failure(result)
    good = tmp / f"{stem}.onnx"
    shutil.copy(ONNX, good)
    out, plain = tmp / f"{stem}\nout.onnx", tmp / "plain.onnx"
    assert run(["convert", good, "-o", out]).exit_code == 0
    assert run(["convert", good, "-o", plain]).exit_code == 0
    assert out.read_bytes() == plain.read_bytes()


@SETTINGS
@given(name=st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
                    max_size=12))
def test_header_name_is_checked_in_one_line(tmp_path_factory, name):
    tmp = tmp_path_factory.mktemp("hname")
    result = run(["export-c-header", TFLITE_INT8, "-o", tmp / "w.h", "--name", name])
    valid = name.isascii() and name[:1].isalpha() and name.replace("_", "a").isalnum()
    if valid:
        assert result.exit_code == 0, result.output
    else:
        assert_clean_failure(result, str(TFLITE_INT8))
        assert os.listdir(tmp) == []


def test_usage_errors_are_one_line(tmp_path):
    result = run(["export-c-header", TFLITE_INT8, "-o", tmp_path / "w.h", "--name"])
    assert_clean_failure(result, "--name")
