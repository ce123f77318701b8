"""The `qconvert` program's allocator settings (qconvert/allocator.py): freed arrays are reused
instead of faulted in again; a library user's process is left alone; without glibc nothing
changes and nothing fails."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from conftest import ROOT
from qconvert import allocator, cli

# arrays of 1-30 MB, three alive at a time, as a batch's activations come and go; prints the
# page faults they took (the kernel's count, an oracle independent of qconvert)
_CHURN = r"""
import resource, sys
import numpy as np
if sys.argv[1] == "program":
    from qconvert.cli import as_program
    as_program()
sizes = np.random.default_rng(0).integers(1 << 20, 30 << 20, 40)
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
live = []
for size in sizes:
    a = np.empty(int(size), np.uint8)
    a.fill(1)
    live.append(a)
    if len(live) > 3:
        live.pop(0)
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def _faults(mode: str) -> int:
    out = subprocess.run([sys.executable, "-c", _CHURN, mode], cwd=ROOT, capture_output=True,
                         text=True, check=True)
    return int(out.stdout.strip())


def _glibc() -> bool:
    try:
        return (os.confstr("CS_GNU_LIBC_VERSION") or "").startswith("glibc")
    except (AttributeError, OSError, ValueError):
        return False


def test_the_program_reuses_freed_arrays():
    """With glibc, the program's process takes under half the page faults of a plain process
    for the same allocations (measured 3000 against 9657); elsewhere the settings are not
    applied and the counts are alike."""
    plain, program = _faults("plain"), _faults("program")
    if _glibc():
        assert allocator._mallopt() is not None  # (not applied here: the test process's own)
        assert program < plain / 2, (program, plain)
    else:
        assert allocator._mallopt() is None
        assert program > plain / 2, (program, plain)


def test_a_library_user_keeps_its_allocator(monkeypatch):
    """`cli.main` (qconvert used from Python) never changes the allocator; `cli.run` (the
    program) does, once, before the command."""
    calls = []
    monkeypatch.setattr(allocator, "tune_for_program", lambda: calls.append("tune") or True)
    monkeypatch.setattr(cli, "_PROGRAM", {"exits_after": False})
    with pytest.raises(SystemExit):
        cli.main(["--version"])
    assert calls == []
    monkeypatch.setattr(sys, "argv", ["qconvert", "--version"])
    with pytest.raises(SystemExit) as exc:
        cli.run()
    assert exc.value.code == 0
    assert calls == ["tune"] and cli._PROGRAM["exits_after"] is True


@pytest.mark.parametrize("missing", ["confstr", "mallopt", "refused"])
def test_without_glibc_nothing_changes_and_nothing_fails(monkeypatch, missing):
    """No glibc (musl, macOS, Windows), no `mallopt`, or a setting refused: False, no error."""
    if missing == "confstr":
        monkeypatch.setattr(allocator.os, "confstr", lambda name: "musl", raising=False)
    elif missing == "mallopt":
        class NoMallopt:
            def __init__(self, name):
                pass

        monkeypatch.setattr(allocator.ctypes, "CDLL", NoMallopt)
        monkeypatch.setattr(allocator.os, "confstr", lambda name: "glibc 2.36", raising=False)
    else:
        class Refusing:
            def __init__(self, name):
                self.mallopt = lambda param, value: 0

        monkeypatch.setattr(allocator.ctypes, "CDLL", Refusing)
        monkeypatch.setattr(allocator.os, "confstr", lambda name: "glibc 2.36", raising=False)
    assert allocator.tune_for_program() is False
