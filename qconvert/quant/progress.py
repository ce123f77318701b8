"""Walking calibration data: `iter_batches` slices it for the model, `Progress` draws a
progress bar on stderr when stderr is a terminal and stays silent otherwise."""

from __future__ import annotations

import sys
import time


def iter_batches(data: dict, batch_size: int):
    """Yield ``{name: array[i:i + batch_size]}`` over the samples of `data` (views, in order; the
    last batch may be smaller). Every array must have the same number of samples."""
    if int(batch_size) < 1:
        raise ValueError(f"batch_size must be at least 1, not {batch_size}")
    counts = {len(a) for a in data.values()}
    if len(counts) > 1:
        raise ValueError(f"arrays have different sample counts: {sorted(counts)}")
    n = counts.pop() if counts else 0
    for i in range(0, n, int(batch_size)):
        yield {k: a[i:i + batch_size] for k, a in data.items()}


class Progress:
    """A progress bar on stderr: ``label [#####.....] done/total``.

    Drawn only when the stream (stderr by default) is a terminal, so tests and CI logs stay
    clean; never writes to stdout. Use as a context manager and call `update(n)`::

        with Progress(len(batches), "calibrating") as bar:
            for batch in batches:
                ...
                bar.update(1)
    """

    WIDTH = 30
    MIN_INTERVAL = 0.1  # seconds between redraws (the last one is always drawn)

    def __init__(self, total: int, label: str = "", stream=None):
        self.total = max(int(total), 0)
        self.label = label
        self.done = 0
        self.stream = sys.stderr if stream is None else stream
        try:
            self.enabled = bool(self.stream.isatty())
        except (AttributeError, ValueError):
            self.enabled = False
        self._drawn = False
        self._last = 0.0

    def __enter__(self) -> "Progress":
        self._draw(force=True)
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def update(self, n: int = 1) -> None:
        """Advance by `n` and redraw (at most every `MIN_INTERVAL` seconds, and at the end)."""
        self.done = min(self.done + int(n), self.total) if self.total else self.done + int(n)
        self._draw(force=self.done >= self.total)

    def close(self) -> None:
        """End the bar's line (if one was drawn)."""
        if self.enabled and self._drawn:
            self._draw(force=True)
            self.stream.write("\n")
            self.stream.flush()
            self._drawn = False
            self.enabled = False

    def render(self) -> str:
        """The bar's text, e.g. ``calibrating [###...] 3/10``."""
        filled = self.WIDTH if self.total == 0 else self.WIDTH * self.done // self.total
        bar = "#" * filled + "." * (self.WIDTH - filled)
        prefix = f"{self.label} " if self.label else ""
        return f"{prefix}[{bar}] {self.done}/{self.total}"

    def _draw(self, force: bool = False) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if not force and now - self._last < self.MIN_INTERVAL:
            return
        self._last = now
        self.stream.write("\r" + self.render())
        self.stream.flush()
        self._drawn = True
