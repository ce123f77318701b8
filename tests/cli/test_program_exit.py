"""The `qconvert` program ends without the interpreter's teardown (`cli._leave`): its status,
its whole output and its files are the command's, and nothing registered to run at exit runs.
The oracle for the output is the same command run through `cli.main` in this process."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from qconvert.cli import app as cli

ROOT = Path(__file__).resolve().parents[2]
MODEL = ROOT / "tests" / "models" / "digits_cnn.onnx"

# the program with an exit handler that leaves a mark: `run` (the program) or `main` (click's
# ordinary exit, the control)
PROGRAM = """
import atexit, sys
mark = sys.argv[1]
atexit.register(lambda: open(mark, "w").write("torn down"))
from qconvert import cli
entry = sys.argv[2]
sys.argv = ["qconvert", *sys.argv[3:]]
getattr(cli, entry)()
"""


# block-buffered streams, as a user's shell gives them (this environment may not)
BUFFERED = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}


def _program(tmp_path, entry, *args, stdout=None):
    mark = tmp_path / f"mark-{entry}"
    done = subprocess.run([sys.executable, "-c", PROGRAM, str(mark), entry, *args],
                          stdout=stdout if stdout is not None else subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, cwd=ROOT, timeout=300, env=BUFFERED)
    return done, mark.exists()


def test_the_program_skips_the_teardown_and_loses_no_output(tmp_path):
    """stdout to a file is block-buffered: everything the command printed is there, equal to
    the in-process run, though no exit handler ran (the `main` control runs it)."""
    expected = CliRunner().invoke(cli.main, ["inspect", str(MODEL)])
    assert expected.exit_code == 0 and len(expected.output.splitlines()) > 5
    for entry, torn_down in (("run", False), ("main", True)):
        out = tmp_path / f"out-{entry}.txt"
        with open(out, "w") as f:
            done, marked = _program(tmp_path, entry, "inspect", str(MODEL), stdout=f)
        assert done.returncode == 0, done.stderr
        assert out.read_text() == expected.output
        assert marked is torn_down


@pytest.mark.parametrize("args", [
    ["inspect", "no-such-model.onnx"],               # bad input: one line, status 1
    ["quantize", str(MODEL), "--no-such-option"],    # usage error
    ["--version"],
])
def test_the_program_keeps_the_commands_status_and_messages(tmp_path, args):
    expected = CliRunner().invoke(cli.main, args)
    done, marked = _program(tmp_path, "run", *args)
    assert not marked
    assert done.returncode == expected.exit_code
    assert done.stdout + done.stderr == expected.output


def test_the_program_writes_its_model_before_it_leaves(tmp_path):
    out = tmp_path / "fused.onnx"
    done, marked = _program(tmp_path, "run", "fuse", str(MODEL), "-o", str(out))
    assert done.returncode == 0, done.stderr
    assert not marked
    import onnx

    onnx.checker.check_model(onnx.load(str(out)))
    assert done.stdout.splitlines()[-1].startswith(f"wrote {out} ")


@pytest.mark.parametrize("code,status,message", [(None, 0, ""), (3, 3, ""),
                                                 ("stopped here", 1, "stopped here\n")])
def test_leave_follows_the_meaning_of_system_exit_codes(code, status, message):
    done = subprocess.run([sys.executable, "-c",
                           f"from qconvert import cli; print('before'); cli._leave({code!r})"],
                          capture_output=True, text=True, cwd=ROOT, timeout=60, env=BUFFERED)
    assert (done.returncode, done.stdout, done.stderr) == (status, "before\n", message)
