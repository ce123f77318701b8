"""qconvert imports and runs where the POSIX-only names are missing (Windows): `signal.SIGHUP`,
`os.pathconf`, `os.O_NONBLOCK`, `os.sysconf`, `os.confstr`, `os.sched_getaffinity`, `fcntl`.

Each check runs in a fresh interpreter that deletes those names before qconvert is imported,
then runs `inspect`, `quantize` and `export-c` through click's runner and checks the written
files against the same commands run with the names present."""

from __future__ import annotations

import subprocess
import sys

from helpers.oracles import ROOT, SAMPLE_MODELS

POSIX_ONLY = (("signal", "SIGHUP"), ("os", "pathconf"), ("os", "O_NONBLOCK"), ("os", "sysconf"),
              ("os", "confstr"), ("os", "sched_getaffinity"))

_SCRIPT = """
import os, signal, sys
if {strip}:
    for module, name in {names!r}:
        if hasattr(sys.modules[module], name):
            delattr(sys.modules[module], name)
    sys.modules["fcntl"] = None  # `import fcntl` raises ImportError, as on Windows
from click.testing import CliRunner
from qconvert.cli import main
model, out = sys.argv[1], sys.argv[2]
for args in (["inspect", model],
             ["quantize", model, "--calibration-random", "4", "-o", out + "/q.tflite"],
             ["export-c", out + "/q.tflite", "-o", out + "/c", "--name", "m"]):
    result = CliRunner().invoke(main, args, catch_exceptions=False)
    assert result.exit_code == 0, (args, result.output)
assert not hasattr(signal, "SIGHUP") or not {strip}
print("ok")
"""


def _run(tmp_path, strip: bool):
    out = tmp_path / ("stripped" if strip else "posix")
    out.mkdir()
    script = _SCRIPT.format(strip=strip, names=POSIX_ONLY)
    done = subprocess.run([sys.executable, "-c", script, str(SAMPLE_MODELS / "digits_cnn.tflite"),
                           str(out)], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().endswith("ok")
    return out


def test_runs_without_posix_only_names(tmp_path):
    stripped = _run(tmp_path, strip=True)
    posix = _run(tmp_path, strip=False)
    assert (stripped / "q.tflite").read_bytes() == (posix / "q.tflite").read_bytes()
    assert (stripped / "c" / "m.c").read_bytes() == (posix / "c" / "m.c").read_bytes()


def test_no_unguarded_posix_only_names():
    """Every use of a POSIX-only name in the package sits where a fallback handles its absence
    (`getattr` with a default, or a try catching AttributeError / ImportError)."""
    import re

    allowed = {"output_files.py", "parallel.py", "onnx_reader.py", "memory_limit.py",
               "allocator.py"}
    pattern = re.compile(r"signal\.SIGHUP|os\.pathconf|os\.O_NONBLOCK|os\.sysconf|os\.confstr|"
                         r"sched_getaffinity|import fcntl|import termios|import pwd|import grp|"
                         r"os\.getuid|os\.geteuid|os\.fork\b|os\.setsid|signal\.SIGKILL|"
                         r"signal\.SIGALRM|signal\.alarm|os\.killpg")
    found = {p.name for p in (ROOT / "qconvert").rglob("*.py") if pattern.search(p.read_text())}
    assert found <= allowed, found - allowed
