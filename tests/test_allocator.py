"""The `qconvert` program's allocator settings (qconvert/allocator.py): freed arrays are reused
instead of faulted in again; a library user's process is left alone; without glibc nothing
changes and nothing fails."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from helpers.oracles import ROOT
from qconvert import allocator, blas_idle
from qconvert.cli import app as cli

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
    """`cli.main` (qconvert used from Python) never changes the allocator nor OpenBLAS's idle
    threads; `cli.run` (the program) does, once each, before the command (`blas_idle` first:
    it must come before anything loads numpy)."""
    calls = []
    monkeypatch.setattr(allocator, "tune_for_program", lambda: calls.append("tune") or True)
    monkeypatch.setattr(blas_idle, "sleep_idle_threads", lambda: calls.append("sleep") or True)
    monkeypatch.setattr(cli, "_PROGRAM", {"exits_after": False})
    with pytest.raises(SystemExit):
        cli.main(["--version"])
    assert calls == []
    monkeypatch.setattr(sys, "argv", ["qconvert", "--version"])

    def leave(code):  # the program's own exit would end the test process
        raise SystemExit(code)

    monkeypatch.setattr(cli, "_leave", leave)
    with pytest.raises(SystemExit) as exc:
        cli.run()
    assert exc.value.code == 0
    assert calls == ["sleep", "tune"] and cli._PROGRAM["exits_after"] is True


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


# 20 arrays of 8 MB from the heap (a plain glibc takes them there once a freed 9 MB mapping
# has raised its threshold), all freed but the last, so no free at the heap's top trims them;
# then `release_free_memory` (calibration's end): prints the resident MB before and after it
_RELEASE = r"""
import sys
import numpy as np
if sys.argv[1] == "program":
    from qconvert.cli import as_program
    as_program()
from qconvert.executor.memory_limit import release_free_memory

def resident():
    with open("/proc/self/status") as f:
        return next(int(ln.split()[1]) for ln in f if ln.startswith("VmRSS:")) // 1024

warm = np.ones(9 << 18, np.float32)
del warm
arrays = [np.ones(8 << 18, np.float32) for _ in range(20)]
last = arrays.pop()
del arrays
before = resident()
release_free_memory()
print(before, resident())
"""


def _released(mode: str) -> int:
    out = subprocess.run([sys.executable, "-c", _RELEASE, mode], cwd=ROOT, capture_output=True,
                         text=True, check=True)
    before, after = map(int, out.stdout.split())
    return before - after


def test_the_program_keeps_freed_pages_between_phases():
    """A plain process hands calibration's freed heap back to the system (the kernel's RSS
    falls by about 160 MB); the program keeps it for the plan to reuse (RSS unchanged).
    Without glibc neither is tuned and `malloc_trim` is absent: both keep theirs."""
    plain, program = _released("plain"), _released("program")
    if _glibc():
        assert plain > 100 and abs(program) < 20, (plain, program)
    else:
        assert abs(plain) < 20 and abs(program) < 20, (plain, program)


def test_keeps_freed_memory_only_once_every_setting_is_taken(monkeypatch):
    """`keeps_freed_memory` follows `tune_for_program`'s result: taken, refused, absent."""
    monkeypatch.setattr(allocator, "_TUNED", {"done": False})
    assert allocator.keeps_freed_memory() is False
    for answer, expected in ((1, True), (0, False)):
        monkeypatch.setattr(allocator, "_mallopt", lambda a=answer: (lambda p, v: a))
        assert allocator.tune_for_program() is expected
        assert allocator.keeps_freed_memory() is expected
    monkeypatch.setattr(allocator, "_mallopt", lambda: None)
    assert allocator.tune_for_program() is False
    assert allocator.keeps_freed_memory() is False
