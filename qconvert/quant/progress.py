"""Walking calibration data: `iter_batches` slices it for the model, `Progress` draws a
progress bar (click's) on stderr when stderr is a terminal and stays silent otherwise."""

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
    """A progress bar on stderr drawn by click: ``calibrating [####----] 3/10 12.5/s 00:00:02``
    (position, rate in samples per second, time left), as wide as the terminal allows.

    Drawn only when the stream (stderr by default) is a terminal, so tests, pipes and CI logs
    stay clean; never writes to stdout. The line never exceeds the terminal's width (a
    narrower terminal drops the rate, then the time left, then the label: a wrapped line
    would cascade into new lines at each redraw). Use as a context manager and call
    `update(n)`::

        with Progress(len(batches), "calibrating") as bar:
            for batch in batches:
                ...
                bar.update(1)
    """

    def __init__(self, total: int, label: str = "", stream=None):
        self.total = max(int(total), 0)
        self.label = label
        self.done = 0
        self.stream = sys.stderr if stream is None else stream
        try:
            self.enabled = bool(self.stream.isatty())
        except (AttributeError, ValueError):
            self.enabled = False
        self._start = time.monotonic()
        self._bar = None

    def __enter__(self) -> "Progress":
        if self.enabled:
            self._bar = _bar(self)
            self._bar.__enter__()
            self._bar.render_progress()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def update(self, n: int = 1) -> None:
        """Advance by `n` samples and redraw."""
        step = min(int(n), self.total - self.done) if self.total else int(n)
        self.done += step
        if self._bar is not None and step > 0:
            self._bar.update(step)

    def close(self) -> None:
        """End the bar's line (if one was drawn)."""
        if self._bar is not None:
            self._bar.__exit__(None, None, None)
            self._bar = None

    def rate(self) -> str:
        """Samples per second so far, e.g. ``12.5/s``."""
        elapsed = max(time.monotonic() - self._start, 1e-9)
        return f"{self.done / elapsed:.1f}/s"


def fitting(columns: int, label: str, total: int) -> dict:
    """The click.progressbar settings whose line fits `columns`: label, position, rate and
    time left, dropped in that order from the least needed as the terminal narrows."""
    pos = 2 * len(str(total)) + 1
    wanted = [("rate", 10), ("eta", 10), ("label", len(label) + 2)]
    need = pos + 4 + sum(width for _, width in wanted)  # +4: the brackets and spaces
    keep = {name for name, _ in wanted}
    for name, width in wanted:  # drop the rate first, then the time left, then the label
        if need <= columns - 1:
            break
        keep.discard(name)
        need -= width
    return {"label": label if "label" in keep else "", "show_eta": "eta" in keep,
            "rate": "rate" in keep}


def _bar(progress: Progress):
    import shutil

    import click

    columns = shutil.get_terminal_size().columns
    fit = fitting(columns, progress.label, progress.total)
    return click.progressbar(
        length=progress.total, label=fit["label"], file=progress.stream, width=0,
        show_pos=True, show_percent=False, show_eta=fit["show_eta"], fill_char="#",
        empty_char="-", bar_template="%(label)s [%(bar)s] %(info)s", info_sep=" ",
        item_show_func=(lambda _item: progress.rate()) if fit["rate"] else None)
