"""Layer names made into unique C identifiers under one prefix.

TFLite layer names are long tensor names such as
`functional_1/activation/Relu;functional_1/batch_normalization/FusedBatchNormV3;...`. A layer's
C name is its first `;`-separated part, lower-cased, with every run of characters outside
`[a-z0-9]` turned into one `_` (`functional_1_activation_relu`), cut to `MAX_BASE` characters.
Identifiers are `<prefix>_<layer>_<suffix>`: arrays in lower case, macros in upper case.

`NameTable` hands out layer names so that no identifier of one layer equals an identifier of
another (compared case-insensitively, so the lower- and upper-case spellings are both safe):
on a clash the layer name gets `_2`, `_3`... appended.
"""

from __future__ import annotations

import re

from qconvert.errors import QConvertError

MAX_BASE = 40
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_OUTSIDE = re.compile(r"[^a-z0-9]+")


def sanitize(text: str, fallback: str) -> str:
    """`text` as a lower-case C identifier fragment (letters, digits, single underscores), or
    `fallback` when nothing is left."""
    base = _OUTSIDE.sub("_", str(text).lower()).strip("_")
    return base[:MAX_BASE].rstrip("_") or fallback


def prefix_from_stem(stem: str) -> str:
    """The default prefix from a model file's stem: sanitized, and starting with a letter."""
    base = sanitize(stem, "model")
    return base if base[0].isalpha() else f"m_{base}"


def check_prefix(name: str) -> str:
    """A `--name` given by the user: it must be a C identifier; returned lower-cased."""
    if not _IDENTIFIER.match(name or "") or name.startswith("_"):
        raise QConvertError(f"--name {name!r} is not a C identifier (letters, digits and "
                         "underscores, starting with a letter)")
    return name.lower()


def layer_base(layer_name: str, index: int) -> str:
    """The C name of a layer: the first `;` part of its name, sanitized (`layer<i>` if empty).
    A name starting with a digit stays valid: it always follows the prefix and a `_`."""
    return sanitize(str(layer_name).split(";", 1)[0], f"layer{index}")


class NameTable:
    """Unique layer names under `prefix`, given each layer's identifier suffixes."""

    def __init__(self, prefix: str, reserved=()):
        self.prefix = prefix
        self.taken = {f"{prefix}_{s}".lower() for s in reserved}

    def claim(self, base: str, suffixes) -> str:
        """`base`, or `base_2`, `base_3`... : the first whose identifiers
        `<prefix>_<name>_<suffix>` are all new; they are then taken."""
        name, n = base, 1
        while True:
            wanted = {f"{self.prefix}_{name}_{s}".lower() for s in suffixes}
            if not wanted & self.taken:
                self.taken |= wanted
                return name
            n += 1
            name = f"{base}_{n}"
