"""Which scale groups go int16 (16x8): `--activations int16` or `--int16-layers auto|N|NAMES`.

- `--activations int16`: every group that can be int16 (`int16.candidates`, I/O included).
- `--int16-layers NAME,NAME...`: the groups the named layers write.
- `--int16-layers N`: the N groups whose int8 rounding costs the output SQNR most.
- `--int16-layers auto`: the sensitivity pass below decides.

Sensitivity pass. On the report's samples (at most SENSITIVITY_SAMPLES), a fake-quantized run
of the float graph (`simulate.QdqSimulation`) with every activation on its int8 grid gives the
output noise energy N0 against the float model; one more run per candidate group, with that
group alone on its int16 grid, gives N_g, so `removed_g = N0 - N_g` is the output noise its
int8 rounding causes (the "cost" of that layer, `estimated_gain_db` = 10 log10(N0 / N_g)). Each
candidate is priced alone with `footprint`: the bytes of RAM (activation arena) plus flash
(int64 biases, int16 constants) it adds to the int8 model.
`auto` then walks the candidates in order of noise removed per byte added; for each it runs the
model with the groups kept so far plus this one and keeps it when that raises the output SQNR
(`step_gain_db`, measured, not summed) by at least AUTO_MIN_DB and by at least AUTO_DB_PER_KIB
dB per KiB it adds to RAM + flash, priced with the groups kept so far (a layer off the arena's
peak costs only its biases; the one that moves the peak pays for all of it).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from qconvert.errors import QConvertError

from .footprint import footprint
from .int16 import apply_widths, candidates, groups_by_layer, scale_groups
from .plan import plan_activations
from .simulate import QdqSimulation, db, output_noise

AUTO_MIN_DB = 0.1
AUTO_DB_PER_KIB = 0.5
SENSITIVITY_SAMPLES = 16


@dataclass
class Int16Choice:
    """The groups chosen and how they were chosen (for the report)."""

    mode: str                        # "int16", "names", "count" or "auto"
    groups: list                     # `int16.Group`s made int16
    sensitivity: list = field(default_factory=list)  # one dict per candidate (N / auto)
    estimate: dict = field(default_factory=dict)     # simulated output SQNR, int8 and chosen


def parse_int16_layers(text: str | None):
    """'auto' -> ("auto", None); '3' -> ("count", 3); 'a,b' -> ("names", ["a", "b"])."""
    if text is None:
        return None
    text = text.strip()
    if text == "auto":
        return "auto", None
    if text.isdigit():
        if int(text) < 1:
            raise QConvertError("--int16-layers N needs N >= 1")
        return "count", int(text)
    names = [n.strip() for n in text.split(",") if n.strip()]
    if not names:
        raise QConvertError("--int16-layers: give auto, a count or layer names")
    return "names", names


def choose(float_graph, qplan8, ranges: dict, activations: str, int16_layers, io_type: str,
           feeds: dict, batch_size: int, opset=None) -> Int16Choice:
    """The groups to make int16 (module docstring). `qplan8` is the int8 plan of `float_graph`,
    `feeds` the report's samples."""
    groups = scale_groups(float_graph)
    if activations == "int16":
        return Int16Choice("int16", candidates(groups, io_edges_fixed=False))
    mode, arg = parse_int16_layers(int16_layers)
    edges_fixed = io_type != "float32"
    if mode == "names":
        return Int16Choice("names", groups_by_layer(groups, arg, edges_fixed))
    pool = candidates(groups, edges_fixed)
    if not pool:
        return Int16Choice(mode, [])
    n = min(SENSITIVITY_SAMPLES, len(next(iter(feeds.values()))))
    feeds = {k: v[:n] for k, v in feeds.items()}
    run = _Runs(float_graph, qplan8, ranges, pool, feeds, batch_size, opset)
    rows = sensitivity(run, pool)
    if mode == "count":
        ranked = sorted(rows, key=lambda r: -r["removed"])
        keep = {id(r["group"]) for r in ranked[:arg]}
        chosen = [r["group"] for r in rows if id(r["group"]) in keep]
        run.widen(chosen)
        noise = run.noise()
    else:
        keep, noise = _auto(float_graph, run, rows)
        chosen = [r["group"] for r in rows if id(r["group"]) in keep]
    for r in rows:
        r["chosen"] = id(r["group"]) in keep
    estimate = {"int8_db": _round(db(run.signal, run.base)),
                "chosen_db": _round(db(run.signal, noise))}
    return Int16Choice(mode, chosen, rows, estimate)


class _Runs:
    """The fake-quantized runs of the sensitivity pass: one simulation, groups moved between
    their int8 and int16 grids in place."""

    def __init__(self, float_graph, qplan8, ranges, pool, feeds, batch_size, opset):
        self.feeds, self.batch_size = feeds, batch_size
        self.reference = _reference(float_graph, feeds, batch_size)
        self.sim = QdqSimulation(float_graph, qplan8, opset)
        self.sim_source = float_graph
        self.params16 = plan_activations(float_graph, ranges,
                                         {n for g in pool for n in g.members})
        self.signal, self.base = output_noise(self.reference, self.sim.run(feeds, batch_size))

    def widen(self, groups) -> None:
        for g in groups:
            for name in g.members:
                self.sim.set_params(name, *self.params16[name], 16)

    def narrow(self, groups) -> None:
        for g in groups:
            for name in g.members:
                self.sim.set_params(name, *self.sim.int8[name], 8)

    def noise(self) -> float:
        return output_noise(self.reference, self.sim.run(self.feeds, self.batch_size))[1]


def _round(x: float) -> float:
    return x if not np.isfinite(x) else round(float(x), 2)


def _reference(float_graph, feeds, batch_size) -> dict:
    from qconvert.executor.float_executor import run_float_batched

    with np.errstate(all="ignore"):
        return run_float_batched(float_graph, feeds, batch_size)


def sensitivity(run: _Runs, pool) -> list:
    """[{"group", "layer", "op", "removed", "gain_db", "extra_bytes"}...]: per candidate group
    the output noise its int8 rounding causes (module docstring) and the bytes it adds alone."""
    float_graph = run.sim_source
    price0 = _price(float_graph, [])
    rows = []
    for g in pool:
        run.widen([g])
        noise = run.noise()
        run.narrow([g])
        removed = max(run.base - noise, 0.0)
        rows.append({"group": g, "layer": g.layer, "op": g.op, "removed": removed,
                     "gain_db": _gain(run.base, noise),
                     "extra_bytes": _price(float_graph, [g]) - price0})
    return rows


def _gain(before: float, after: float) -> float:
    """dB by which the output SQNR rises when its noise goes from `before` to `after`."""
    if before <= 0:
        return 0.0
    return _round(10 * np.log10(before / max(after, before * 1e-9)))


def _price(float_graph, groups) -> int:
    """RAM + flash bytes of `float_graph` with `groups` int16 (`footprint`)."""
    if not groups:
        fp = footprint(float_graph)
    else:
        g = float_graph.copy()
        widths = apply_widths(g, groups)
        fp = footprint(g, widths.int16)
    return fp["arena_bytes"] + fp["flash_bytes"]


def _auto(float_graph, run: _Runs, rows) -> tuple:
    """The groups `auto` keeps (module docstring rule) and the output noise with them."""
    order = sorted(rows, key=lambda r: -r["removed"] / max(r["extra_bytes"], 1))
    kept: list = []
    noise = run.base
    cost = _price(float_graph, [])
    for r in order:
        if r["removed"] <= 0 or noise <= 0:
            continue
        price = _price(float_graph, [k["group"] for k in kept] + [r["group"]])
        extra = max(price - cost, 0)
        run.widen([r["group"]])
        after = run.noise()
        r["step_gain_db"], r["step_extra_bytes"] = _gain(noise, after), int(extra)
        if r["step_gain_db"] >= max(AUTO_MIN_DB, AUTO_DB_PER_KIB * extra / 1024):
            kept.append(r)
            noise, cost = after, price
        else:
            run.narrow([r["group"]])
    return {id(r["group"]) for r in kept}, noise
