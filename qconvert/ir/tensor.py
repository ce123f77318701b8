"""Tensors of the IR: a name, a shape, a dtype, optional constant data and quantization.

Shapes are tuples whose entries are ints for static dimensions and strings (a symbolic name such
as ``"N"``) or ``None`` for dynamic ones; a shape of ``None`` means the rank is unknown (an
output of an op qconvert does not know, where ONNX shape inference had nothing to say). Dtypes are numpy dtype names (``"float32"``, ``"int8"``).
Dtypes numpy cannot hold (TFLite strings, resources, int4...) are named in `RAW_DTYPES`; their
constant data is kept as raw bytes (a uint8 array) so it survives a round trip.
Constant data is treated as immutable: a pass that changes it makes a copy.
"""

from __future__ import annotations

import copy as _copy
from dataclasses import dataclass, field

import numpy as np


RAW_DTYPES = frozenset({"string", "resource", "variant", "int4", "uint4", "bfloat16",
                        "float8e4m3fn", "float8e5m2"})


@dataclass
class QuantParams:
    """Affine quantization `real = scale * (q - zero_point)`.

    `axis` is the quantized dimension for per-channel parameters and `None` for per-tensor ones.
    `min`/`max` are the optional calibration ranges some TFLite files carry.
    """

    scale: np.ndarray
    zero_point: np.ndarray
    axis: int | None = None
    min: np.ndarray | None = None
    max: np.ndarray | None = None

    def __post_init__(self):
        self.scale = np.asarray(self.scale, dtype=np.float32).reshape(-1)
        self.zero_point = np.asarray(self.zero_point, dtype=np.int64).reshape(-1)

    def copy(self) -> "QuantParams":
        """A copy with its own arrays."""
        return QuantParams(*(None if a is None else np.array(a) for a in
                             (self.scale, self.zero_point)), self.axis,
                           *(None if a is None else np.array(a) for a in (self.min, self.max)))

    @property
    def per_channel(self) -> bool:
        """True when the parameters vary along `axis` (more than one scale)."""
        return self.axis is not None and self.scale.size > 1


@dataclass
class Tensor:
    """A named value: graph input, intermediate activation, or constant (when `data` is set).

    `extra` keeps format-specific fields that have no IR meaning but must survive a round trip
    (TFLite `shape_signature`, `is_variable`, `has_rank`).
    """

    name: str
    shape: tuple | None
    dtype: str
    data: np.ndarray | None = None
    quant: QuantParams | None = None
    extra: dict = field(default_factory=dict)

    def copy(self) -> "Tensor":
        """A copy sharing the constant data (immutable) and nothing else."""
        return Tensor(self.name, self.shape, self.dtype, self.data,
                      None if self.quant is None else self.quant.copy(),
                      copy_value(self.extra) if self.extra else {})

    @property
    def is_constant(self) -> bool:
        return self.data is not None

    @property
    def static_shape(self) -> bool:
        return self.shape is not None and all(isinstance(d, (int, np.integer)) for d in self.shape)

    def num_elements(self, dynamic_as: int = 1) -> int:
        """Element count, with dynamic dimensions counted as `dynamic_as`."""
        n = 1
        for d in self.shape or ():
            n *= int(d) if isinstance(d, (int, np.integer)) else dynamic_as
        return n

    def nbytes(self, dynamic_as: int = 1) -> int:
        """Size in bytes (dtype size times elements); 0 for dtypes without a fixed size."""
        if self.dtype in RAW_DTYPES:
            return 0 if self.data is None else int(self.data.nbytes)
        itemsize = np.dtype(self.dtype).itemsize
        return itemsize * self.num_elements(dynamic_as)


_IMMUTABLE = (str, int, float, bool, bytes, type(None), np.generic)
_PLAIN = frozenset({str, int, float, bool, bytes, type(None)})


def copy_value(value):
    """A deep copy of an attribute or extra value: what `copy.deepcopy` gives, faster for the
    plain values (numbers, strings, lists and dicts of them) attributes hold."""
    if isinstance(value, _IMMUTABLE):
        return value
    if isinstance(value, list):
        return [v if type(v) in _PLAIN else copy_value(v) for v in value]
    if isinstance(value, dict):
        return {k: v if type(v) in _PLAIN else copy_value(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return tuple(copy_value(v) for v in value)
    return _copy.deepcopy(value)
