"""Every file a command writes goes through here: checked up front, written all-or-nothing.

`OutputFiles` is one command's set of outputs. `add` checks a path before any work is done (its
folder exists and is writable, the name fits the file system, it is not a folder, it does not
resolve, symlinks followed, to any of the command's inputs) and `add_inputs` adds inputs found
later (an ONNX model's external-data files). `commit` writes every output as a temporary file
with a short name (`.qc<8 hex>.tmp`, so it never exceeds NAME_MAX even when the output's own name
is 255 bytes long) in the folder of the file it replaces, then renames them all into place; on
any failure (a full disk, a signal, a bug) every temporary file is removed and no output changes.

An output that is a FIFO or a character device (`-o /dev/null`) is written into, never replaced
by a regular file; a FIFO with no reader is refused rather than waited on. A symlinked output is
written through: the file it points to is replaced and the link stays.

Signals: `handle_termination` makes SIGTERM (and SIGHUP) interrupt the command like SIGINT, so
temporary files are cleaned up. From the first rename on, signals are dropped, so none can split
the renames; one that arrives after the commit point is ignored, the command's work being
complete by then. Python cannot raise out of every place a handler may run: an exception in a
weakref callback, a `__del__` or a garbage-collector callback is printed as "Exception ignored"
and dropped. So the handler also records the signal, such a dropped interrupt is not printed,
and `commit` raises it before it writes anything: a signal is never lost and never leaves a
traceback on the terminal.
"""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import stat
import sys
from pathlib import Path

from ..errors import QConvertError

# SIGHUP and os.pathconf / O_NONBLOCK are POSIX only: on Windows the names are missing, so each
# is looked up with a fallback (the package must import and run there too); O_BINARY is Windows
# only, and without it os.write would turn every b"\n" into b"\r\n".
_SIGNALS = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP")
                 if hasattr(signal, name))
_O_BINARY = getattr(os, "O_BINARY", 0)
_O_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_STATE = {"committed": False, "pending": None, "deferred": 0}


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP arrived: unwinds like Ctrl-C so temporary files are removed."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def _on_signal(signum, _frame):
    """Before the commit point a signal unwinds the command; from the first rename on it is
    dropped (the outputs are being, or have been, put in place as a whole)."""
    if _STATE["committed"]:
        return
    _STATE["pending"] = signum
    if _STATE["deferred"]:  # inside `deferred_signals`: raised when the block ends
        return
    _raise_for(signum)


@contextlib.contextmanager
def deferred_signals(raise_after: bool = True):
    """A block no signal interrupts: one that arrives is recorded and raised when the block
    ends. For what an exception must not cut in two: importing onnx / protobuf (their C++
    initialization, interrupted, aborted the process with SIGABRT or SIGSEGV) and creating a
    temporary file and recording it for removal (a 0-byte file was left behind). With
    `raise_after` False the signal stays pending for the caller's next `raise_pending_signal`."""
    _STATE["deferred"] += 1
    try:
        yield
    finally:
        _STATE["deferred"] -= 1
    if raise_after:
        raise_pending_signal()


def _raise_for(signum: int):
    if signum == signal.SIGINT:
        raise KeyboardInterrupt
    raise Terminated(signum)


def raise_pending_signal() -> None:
    """Raise a signal's interrupt that Python dropped (it hit a callback that cannot raise)."""
    signum = _STATE["pending"]
    if signum is not None and not _STATE["committed"]:
        _raise_for(signum)


def _quiet_dropped_interrupt(previous):
    """An unraisable-exception hook that keeps a dropped signal interrupt off the terminal (it
    stays recorded for `raise_pending_signal`) and passes everything else on."""

    def hook(unraisable):
        if isinstance(unraisable.exc_value, KeyboardInterrupt) and _STATE["pending"] is not None:
            return
        previous(unraisable)

    return hook


@contextlib.contextmanager
def handle_termination(process_exits_after: bool = False):
    """Within the block SIGINT raises KeyboardInterrupt and SIGTERM / SIGHUP raise `Terminated`,
    until a commit starts renaming; then they are dropped. At the end the previous handlers come
    back, except when `process_exits_after` (the `qconvert` program itself) and the command
    committed: then the signals stay ignored until the process exits, so a late signal cannot
    turn a complete run into a killed one. (Python runs signal handlers in the main thread only,
    whichever thread the signal hit, so a flag is enough; no signal mask is needed.)"""
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    saved = {s: signal.getsignal(s) for s in _SIGNALS}
    saved_hook = sys.unraisablehook
    _STATE["committed"] = False
    _STATE["pending"] = None
    sys.unraisablehook = _quiet_dropped_interrupt(saved_hook)
    for s in _SIGNALS:
        signal.signal(s, _on_signal)
    try:
        yield
        raise_pending_signal()  # a command that wrote nothing still ends as interrupted
    finally:
        sys.unraisablehook = saved_hook
        if process_exits_after and _STATE["committed"]:
            for s in _SIGNALS:
                signal.signal(s, signal.SIG_IGN)
        else:
            for s, handler in saved.items():
                signal.signal(s, handler if handler is not None else signal.SIG_DFL)
        _STATE["committed"] = False
        _STATE["pending"] = None


def _same_file(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def _name_max(folder: Path) -> int:
    """The longest file name `folder`'s file system takes, in bytes (255 where unknown)."""
    try:
        return os.pathconf(folder, "PC_NAME_MAX")
    except (OSError, ValueError, AttributeError):  # AttributeError: no os.pathconf (Windows)
        return 255


def _write_all(fd: int, data) -> None:
    """Write all of `data` to `fd` (one place for tests to simulate a full disk)."""
    view = memoryview(data).cast("B")
    while view:
        n = os.write(fd, view[: 1 << 24])
        view = view[n:]


class OutputFiles:
    """The outputs of one command, checked before the work and committed together."""

    def __init__(self, inputs=()):
        self._inputs: list = []
        self._outputs: dict = {}  # shown path -> resolved target
        self.add_inputs(inputs)

    def add_inputs(self, paths) -> None:
        """Record more inputs (files or folders) and re-check the outputs against them."""
        for p in paths:
            if p is not None:
                self._inputs.append(Path(p))
        for shown, target in self._outputs.items():
            self._check_not_input(shown, target)

    def add(self, path) -> Path:
        """Check output `path` now (before any work); returns it as a Path. Each output is added
        once: a path given for two outputs (`-o x --report x`) is refused, however spelled."""
        shown = str(path)
        p = Path(path)
        if not shown:  # -o '': the error names the command's model instead
            raise QConvertError("the output path is empty")
        if shown in self._outputs:  # e.g. -o x.onnx --report x.onnx
            raise QConvertError("two outputs of this command are the same file; "
                                "give each its own path", shown)
        try:
            target = p.resolve()
        except (OSError, RuntimeError) as exc:  # a symlink loop
            raise QConvertError(f"cannot resolve the output path ({exc})", shown) from exc
        parent = target.parent
        if not parent.is_dir():
            raise QConvertError("output directory does not exist", shown)
        if len(os.fsencode(target.name)) > _name_max(parent):
            raise QConvertError(f"output file name is longer than the file system allows "
                                f"({_name_max(parent)} bytes)", shown)
        if target.is_dir():
            raise QConvertError("output path is a directory", shown)
        kind = self._special_kind(target)
        if kind is None and not os.access(parent, os.W_OK):
            raise QConvertError("output directory is not writable", shown)
        if kind not in (None, "fifo", "char"):
            raise QConvertError(f"output is a {kind}, not a file; refusing to replace it", shown)
        for other_shown, other in self._outputs.items():
            if other == target or _same_file(other, target):
                raise QConvertError(f"two outputs of this command are the same file "
                                    f"({other_shown}); give each its own path", shown)
        self._check_not_input(shown, target)
        self._outputs[shown] = target
        return p

    @staticmethod
    def _special_kind(target: Path):
        try:
            mode = os.stat(target).st_mode
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise QConvertError(f"cannot use as output: {exc.strerror}", str(target)) from exc
        if stat.S_ISREG(mode):
            return None
        if stat.S_ISFIFO(mode):
            return "fifo"
        if stat.S_ISCHR(mode):
            return "char"
        return {stat.S_IFBLK: "block device", stat.S_IFSOCK: "socket"}.get(
            stat.S_IFMT(mode), "special file")

    def _check_not_input(self, shown: str, target: Path) -> None:
        for source in self._inputs:
            try:
                src = source.resolve()
            except (OSError, RuntimeError):
                continue
            if src == target or _same_file(src, target):
                raise QConvertError(f"refusing to overwrite an input of this command "
                                    f"({source}); choose another output", shown)
            if src.is_dir() and src in target.parents and target.exists():
                raise QConvertError(f"refusing to overwrite a file in the input folder "
                                    f"{source}; choose another output", shown)

    def commit(self, contents: dict) -> None:
        """Write `contents` ({path given to `add`: bytes}) all-or-nothing.

        Temporary files first (a full disk or a signal here removes them all and changes no
        output), then FIFOs / devices, then the renames with SIGINT / SIGTERM held back.
        """
        items = []
        for path, data in contents.items():
            shown = str(path)
            if shown not in self._outputs:
                self.add(path)
            items.append((shown, self._outputs[shown], data))
        temps: list = []
        raise_pending_signal()
        try:
            regular = []
            for shown, target, data in items:
                if self._special_kind(target) is None:
                    tmp = self._write_temp(shown, target, data, temps)
                    regular.append((shown, tmp, target))
            raise_pending_signal()  # streams cannot be taken back
            for shown, target, data in items:
                if self._special_kind(target) is not None:
                    self._write_stream(shown, target, data)
            raise_pending_signal()
            _STATE["committed"] = True  # the commit point: from here signals are dropped
            for shown, tmp, target in regular:
                try:
                    os.replace(tmp, target)
                except OSError as exc:
                    raise QConvertError(f"cannot write: {exc.strerror}", shown) from exc
                temps.remove(tmp)
        finally:
            for tmp in temps:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)

    @staticmethod
    def _write_temp(shown: str, target: Path, data, temps: list) -> Path:
        fd = None
        for _ in range(100):
            tmp = target.parent / f".qc{os.urandom(4).hex()}.tmp"  # secrets: +5 ms of imports
            try:
                with deferred_signals(raise_after=False):  # created and recorded, or neither
                    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _O_BINARY,
                                 0o644)
                    temps.append(tmp)
                break
            except FileExistsError:
                continue
            except OSError as exc:
                raise QConvertError(f"cannot write: {exc.strerror}", shown) from exc
        if fd is None:
            raise QConvertError("cannot create a temporary file", shown)
        try:
            _write_all(fd, data)
            os.fsync(fd)
        except OSError as exc:
            raise QConvertError(f"cannot write: {exc.strerror}", shown) from exc
        finally:
            os.close(fd)
        return tmp

    @staticmethod
    def _write_stream(shown: str, target: Path, data) -> None:
        try:
            fd = os.open(target, os.O_WRONLY | _O_NONBLOCK | _O_BINARY)
        except OSError as exc:
            if exc.errno == errno.ENXIO:
                raise QConvertError("output is a FIFO that nobody reads; refusing to wait",
                                    shown) from exc
            raise QConvertError(f"cannot write: {exc.strerror}", shown) from exc
        try:
            if _O_NONBLOCK:
                os.set_blocking(fd, True)
            _write_all(fd, data)
        except OSError as exc:
            raise QConvertError(f"cannot write: {exc.strerror}", shown) from exc
        finally:
            os.close(fd)


def write_outputs(contents: dict, inputs=()) -> None:
    """Check and write `contents` ({path: bytes}) in one transaction (see `OutputFiles`)."""
    outputs = OutputFiles(inputs)
    for path in contents:
        outputs.add(path)
    outputs.commit(contents)
