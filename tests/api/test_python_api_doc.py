"""docs/python-api.md runs (issue 27, items 1 and 6): its Python blocks in order in one
namespace, its `sh` lines through the command line, and its `c` block compiled with the model
the walk-through exported and run; all in a scratch folder that sees the repository's
sample_models/ and tests/models/ (nothing is written into the repository)."""

from __future__ import annotations

import contextlib
import io
import os
import re
import shlex
import shutil
import subprocess

import pytest
from click.testing import CliRunner

from helpers.oracles import ROOT
from qconvert.cli.app import main

DOC = ROOT / "docs" / "python-api.md"


def _blocks(kind: str) -> list:
    return re.findall(rf"```{kind}\n(.*?)```", DOC.read_text(), re.S)


@pytest.fixture
def scratch(tmp_path, monkeypatch):
    (tmp_path / "sample_models").symlink_to(ROOT / "sample_models")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "models").symlink_to(ROOT / "tests" / "models")
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc is not installed")
def test_walk_through_runs(scratch):
    python, shell, c = _blocks("python"), _blocks("sh"), _blocks("c")
    assert len(python) >= 5 and len(shell) >= 3 and len(c) == 1
    namespace: dict = {}
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        for block in python:
            exec(compile(block, str(DOC), "exec"), namespace)
    printed = out.getvalue()
    assert "onnx ['input'] ['logits']" in printed and "top-1 over 497 samples" in printed
    assert "method='best': give one of" in printed
    for block in shell:
        for line in block.strip().splitlines():
            args = shlex.split(line)
            assert args[0] == "qconvert"
            result = CliRunner().invoke(main, args[1:], catch_exceptions=False)
            assert result.exit_code == 0, (line, result.output)
    # the API and the command line wrote the same model and the same C
    assert (scratch / "digits_int8.tflite").read_bytes() == \
        (scratch / "digits_int8_cli.tflite").read_bytes()
    (scratch / "firmware.c").write_text(c[0])
    sources = [str(p) for p in (scratch / "digits_c").glob("*.c") if p.name != "main.c"]
    subprocess.run(["gcc", "-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic", "-I",
                    "digits_c", "-o", "firmware", "firmware.c", *sources], check=True)
    run = subprocess.run([os.path.join(scratch, "firmware")], capture_output=True, text=True,
                         check=True)
    assert run.stdout.strip() == "class 1"  # the vertical stroke of the doc's main.c
    assert not (ROOT / "digits_int8.tflite").exists() and not (ROOT / "digits_c").exists()
