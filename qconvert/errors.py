"""The one error type the CLI turns into a single clear line.

Anything that is the user's input's fault (a corrupt file, an unsupported op, a bad path) is
raised as `QConvertError`; the CLI prints `qconvert: error: <file>: <cause>` and exits non-zero
without a traceback. Anything else is a bug and keeps its traceback.
"""

from __future__ import annotations


class QConvertError(Exception):
    """A user-facing failure: `path` names the file at fault (if any), `cause` says why."""

    def __init__(self, cause: str, path: str | None = None):
        super().__init__(cause)
        self.cause = cause
        self.path = path

    def with_path(self, path: str) -> "QConvertError":
        """Return this error naming `path`, unless it already names a file."""
        if self.path is None:
            self.path = str(path)
        return self

    def __str__(self) -> str:
        line = f"{self.path}: {self.cause}" if self.path else self.cause
        return one_line(line)


def one_line(text: str) -> str:
    """`text` with line breaks and other control characters escaped (a file name may hold a
    newline; the error must still be one line)."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() or c == " " else
                   c.encode("unicode_escape", "backslashreplace").decode("ascii")
                   for c in text)
