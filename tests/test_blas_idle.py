"""The `qconvert` program's idle OpenBLAS threads (qconvert/blas_idle.py): asleep instead of
polling after a product; a user's choice and a library user's process left alone."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np

from helpers.oracles import ROOT
from qconvert import blas_idle

# one product on every BLAS thread, then 0.3 s of sleep: prints the CPU seconds the whole
# process (all its threads) spent during that sleep, the kernel's count (an oracle independent
# of qconvert), and whether numpy's BLAS is an OpenBLAS with more than one thread here
_AFTER_PRODUCT = r"""
import os, resource, sys, time
if sys.argv[1] == "program":
    from qconvert.cli import as_program
    as_program()
import numpy as np
a = np.ones((1024, 1024), np.float32)
for _ in range(3):
    a @ a
def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime
before = cpu()
time.sleep(0.3)
from qconvert.executor.parallel import _openblas
blas = _openblas()  # (get, set) of OpenBLAS's thread count, or None for another BLAS
threads = blas is not None and blas[0]() > 1  # OPENBLAS_NUM_THREADS=1 starts no threads
print(cpu() - before, int(threads))
"""


def _idle_cpu(mode: str, user_timeout: str | None = None) -> tuple:
    env = {k: v for k, v in os.environ.items()
           if k not in (blas_idle.VARIABLE, blas_idle.OLD_NAME)}
    if user_timeout is not None:
        env[blas_idle.VARIABLE] = user_timeout
    out = subprocess.run([sys.executable, "-c", _AFTER_PRODUCT, mode], cwd=ROOT, env=env,
                         capture_output=True, text=True, check=True)
    seconds, threads = out.stdout.split()
    return float(seconds), threads == "1"


def test_the_programs_blas_threads_sleep_after_a_product():
    """A plain process's OpenBLAS threads poll for about 0.1 s after a multi-threaded product
    (measured 0.10-0.11 CPU s during the sleep on an idle machine, 0.05 with both cores busy
    with other work); the program's sleep at once (0.0007 s). With one CPU, or another BLAS,
    there are no such threads: neither process spends CPU."""
    (plain, threads), (program, _) = _idle_cpu("plain"), _idle_cpu("program")
    assert program < 0.01, program
    if threads:
        assert plain > 0.02, plain
    else:
        assert plain < 0.01, plain


def test_a_users_timeout_is_kept():
    """OPENBLAS_THREAD_TIMEOUT set by the user wins in the program too: its threads poll."""
    seconds, threads = _idle_cpu("program", "28")
    assert seconds > 0.02 if threads else seconds < 0.01, seconds


def test_only_a_process_without_numpy_is_changed(monkeypatch):
    """numpy loaded (a library user, this test process): nothing set; not yet: set, unless the
    user chose a timeout under either name."""
    assert "numpy" in sys.modules and np is not None
    environ = {}
    assert blas_idle.sleep_idle_threads(environ) is False and environ == {}
    monkeypatch.delitem(sys.modules, "numpy")
    assert blas_idle.sleep_idle_threads(environ) is True
    assert environ == {"OPENBLAS_THREAD_TIMEOUT": "4"}
    for name in ("OPENBLAS_THREAD_TIMEOUT", "GOTO_THREAD_TIMEOUT"):
        chosen = {name: "12"}
        assert blas_idle.sleep_idle_threads(chosen) is False and chosen == {name: "12"}

