"""Calibration and evaluation data given as arrays (the Python API), checked as files are.

`qconvert.quantize(m, calibration=...)` takes one array (a single-input model), a {input name:
array} dict, or an iterable of batches (each an array or a dict, e.g. a generator reading a
dataset). Every array gets the checks and normalization `load_calibration` applies to a .npy
file (`calibration_data.prepare_samples`): dtype, sample shape, finite values, --mean / --std / --scale.
An iterable is streamed: each batch is checked and converted to the input's dtype as it arrives
and written to an anonymous temporary file, which is then mapped as one array (`_Spool`): the
stream never sits in memory whole, and calibration reads the map batch by batch.
"""

from __future__ import annotations

import numpy as np

from ..errors import QConvertError
from .calibration_data import Normalization, prepare_samples


def arrays_for_inputs(data, specs, norm: dict, max_bytes: int | None, what: str,
                      ranges: dict | None = None) -> dict:
    """{input name: array (N, *sample)} in each input's dtype from `data` (see the module
    docstring); `what` names the data in errors ("calibration", "eval_data"). `ranges`, when
    given, receives a `DataRange` per float input fed without normalization (for
    `calibration_data.scale_warning`, as `load_calibration` fills it)."""
    from . import calibration_data as cd

    specs = list(specs)
    if not specs:
        raise QConvertError("the model has no inputs to calibrate", what)
    cd._MAX_BYTES = cd.DEFAULT_MAX_BYTES if max_bytes is None else int(max_bytes)
    normalization = Normalization(**norm)
    if ranges is not None:
        normalization.ranges = ranges
    if isinstance(data, (np.ndarray, dict)):
        return _checked(_one_batch(data, specs, normalization, what), what)
    try:
        batches = iter(data)
    except TypeError:
        raise QConvertError(f"expected an array, a {{input name: array}} dict or an iterable "
                            f"of batches, not {type(data).__name__}", what) from None
    spools: dict = {}
    for i, batch in enumerate(batches):
        if not isinstance(batch, (np.ndarray, dict)):
            batch = np.asarray(batch)
        for name, array in _one_batch(batch, specs, normalization, f"{what} batch {i}").items():
            spools.setdefault(name, _Spool()).add(array, f"{what} batch {i}")
    if not spools:
        raise QConvertError("the iterable gave no batches (N = 0)", what)
    return _checked({name: spool.array() for name, spool in spools.items()}, what)


class _Spool:
    """An input's batches written one after the other to an anonymous temporary file, then
    mapped as one (N, *sample) array: reading a stream holds one batch in memory, and the
    calibration that follows reads the samples from the map batch by batch (as it reads a
    memory-mapped .npy)."""

    def __init__(self):
        import tempfile

        self.file = tempfile.TemporaryFile()
        self.count = 0
        self.sample = None
        self.dtype = None

    def add(self, array: np.ndarray, where: str) -> None:
        if self.sample is None:
            self.sample, self.dtype = array.shape[1:], array.dtype
        elif array.shape[1:] != self.sample:
            raise QConvertError(f"samples of shape {list(array.shape[1:])} after samples of "
                                f"shape {list(self.sample)}", where)
        self.file.write(np.ascontiguousarray(array, self.dtype).tobytes())
        self.count += len(array)

    def array(self) -> np.ndarray:
        self.file.flush()
        return np.memmap(self.file, self.dtype, "r", shape=(self.count, *self.sample))


def _one_batch(batch, specs, norm, where: str) -> dict:
    """One array or dict checked and converted for the model's inputs."""
    if isinstance(batch, np.ndarray):
        if len(specs) != 1:
            names = ", ".join(repr(s.name) for s in specs)
            raise QConvertError(f"one array for a model with {len(specs)} inputs ({names}); "
                                "give a {input name: array} dict", where)
        return {specs[0].name: prepare_samples(batch, specs[0], norm, where, None)}
    missing = [s.name for s in specs if s.name not in batch]
    if missing:
        raise QConvertError(f"no array for input {missing[0]!r} (the dict has "
                            f"{', '.join(map(repr, batch)) or 'no keys'})", where)
    return {s.name: prepare_samples(np.asarray(batch[s.name]), s, norm, f"{where}[{s.name!r}]", None)
            for s in specs}


def _checked(data: dict, what: str) -> dict:
    """Refuse inputs with different sample counts."""
    counts = {len(a) for a in data.values()}
    if len(counts) > 1:
        sizes = ", ".join(f"{k!r}: {len(a)}" for k, a in data.items())
        raise QConvertError(f"inputs have different numbers of samples ({sizes})", what)
    return data
