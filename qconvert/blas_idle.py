"""OpenBLAS's idle threads in the `qconvert` program: asleep at once instead of spinning.

numpy's OpenBLAS starts a thread per CPU when numpy is imported, and after every
multi-threaded product its threads keep polling for more work for 2^28 clock ticks (about
0.1 s) before they sleep. The executor runs its products on one BLAS thread each and shares them among
the CPUs itself (`executor.parallel.one_blas_thread`), so that polling is pure loss: at numpy's
import, during reading (whose copies run on every CPU) and after the few products outside the
executor, a polling thread takes a core from qconvert's own threads. On the ResNet-50-shaped
bench model it was 3.8 % of all CPU samples (`perf`: `blas_thread_server`), and the
quantize took 2.20 s of CPU instead of 2.12 s (median of 8); a TFLite MobileNetV2 (the report on
the integer executor, whose products BLAS splits itself) took 3.7-3.9 s of CPU instead of
2.2-2.3 s, in the same 2.3 s.

`sleep_idle_threads` sets OPENBLAS_THREAD_TIMEOUT to OpenBLAS's shortest, 4 (2^4 ticks), before
numpy loads OpenBLAS: idle threads then wait on a condition variable, woken when a product needs
them. Results do not change (the same kernels, the same splits). A user's own
OPENBLAS_THREAD_TIMEOUT (or its older name GOTO_THREAD_TIMEOUT) is kept; a process that has
already loaded numpy (a library user, the tests) is left alone, since OpenBLAS reads the
variable once, when it loads; another BLAS ignores it.
"""

from __future__ import annotations

import os
import sys

VARIABLE = "OPENBLAS_THREAD_TIMEOUT"
OLD_NAME = "GOTO_THREAD_TIMEOUT"
SHORTEST = "4"  # OpenBLAS raises anything lower to 4: 2^4 clock ticks before sleeping


def sleep_idle_threads(environ=None) -> bool:
    """Set OPENBLAS_THREAD_TIMEOUT=4 in `environ` (this process's environment) unless the user
    chose a timeout or numpy is already loaded; True when it was set."""
    environ = os.environ if environ is None else environ
    if "numpy" in sys.modules or VARIABLE in environ or OLD_NAME in environ:
        return False
    environ[VARIABLE] = SHORTEST
    return True
