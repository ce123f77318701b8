"""The static memory plan of `qconvert export-c`: every activation at a fixed arena offset.

    plan = plan_memory(tensors, steps)        # plan.arena_size, plan.offset[name], plan.scratch

Inputs: the activation tensors (name -> bytes) and the steps in execution order (`PlanStep`:
what each reads and writes, which output is an alias of which input, which input it may
overlap and how, its scratch bytes). What it does, in order:

1. Aliases: a Reshape / Squeeze / ExpandDims output is the same bytes as its input; an alias
   chain is one buffer whose lifetime is the union of its members'.
2. Lifetimes: a buffer lives from the step that writes it (graph inputs: step -1, copied in)
   to the last step that reads it (graph outputs: to the end, copied out).
3. Overlap: a step whose input buffer dies at that step may put its output over it when the
   kernel allows, at any displacement D (output offset minus input offset) up to a largest one
   `dmax` the kernel's read order gives. `("same", slot)`: output element i is written after
   input element i is read and nothing later reads elements before i (element-wise kernels):
   D <= 0. `("reads", slot, minread)`: `minread[i]` is the lowest input byte that output
   element i reads (the kernel walks its output in memory order; see kernels/qconvert_nn.h):
   writing element i may only overwrite input bytes no later element reads
   (`D + i < min(minread[i + 1:])`; in-place depthwise convolution: the output may start about
   one row before its input). `("bands", slot, ends, reads)`: the kernel is called once per
   band of output rows (CMSIS-NN's kernels, whose inner order is the library's): band b writes
   output bytes up to `ends[b]` (exclusive) in any order while reading input bytes from
   `reads[b]` on, so `D + ends[b] <= min(reads[b:])` (a layer may offer several band heights,
   the fifth field: output rows per band). `("tiles", slot, ends, reads)`: the same rule for
   a step whose one call already works band by band (`patches`: rows of tiles; the fast int8
   convolution: pairs of output pixels, `steps_fast.conv_bands`), so it costs no speed. Every rule holds for any smaller D too, so D is rounded down to a multiple of
   `ALIGN` (4 bytes): every offset stays a multiple of 4, hence of every element size (int16
   at even offsets, int32 / float at multiples of 4: a Cortex-M0 faults on a misaligned
   halfword or word, and C forbids such typed accesses anywhere). An overlap is a pairwise
   relaxation (not a fixed offset): each buffer keeps its own offset and a chain of overlaps
   never grows a rigid block.
4. Offsets: buffers and per-step scratch buffers (alive for their step only) are placed one by
   one, each at a free 4-byte-aligned offset for its lifetime (first fit: the lowest; best fit:
   the smallest hole it fits), in several orders (largest first as TFLite Micro's
   GreedyMemoryPlanner, largest lifetime x size first, by birth, longest-lived first, by
   death from the last: an output placed before the input it may start below);
   the smallest arena wins, the first heuristic on ties (deterministic).
5. Bands: a banded overlap costs speed (one kernel call per band of output rows), so the plan
   decides per layer: whole-layer calls unless banding lowers the arena, and then, layer by
   layer, the coarsest choice that keeps the arena as small as the finest bands make it: a
   whole-layer call, else the tallest bands offered (`MemoryPlan.banded`: rows per band).
6. Check: no two tensors alive at the same step share a byte unless step 3 allowed exactly that
   overlap at that displacement, and every offset is a multiple of `ALIGN`; a violation is an
   internal error, never a silently wrong model.

`op_order` chooses the execution order of the steps (where branches allow) with this plan.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

ALIGN = 4


@dataclass
class PlanStep:
    """One kernel call as the planner sees it."""

    inputs: list            # activation tensor names it reads
    outputs: list           # tensor names it writes
    alias: bool = False     # outputs[0] is the same bytes as inputs[0] (no code)
    overlap: list | None = None    # candidates: ("same", slot), ("reads", slot, minread) or
    #                                ("bands", slot, ends, reads[, rows per band]) or
    #                                ("tiles", slot, ends, reads): bands in one call
    scratch: int = 0        # scratch bytes the kernel needs during this step
    pinned: bool = False    # has effects beyond its tensors: never moved by `op_order`


@dataclass
class MemoryPlan:
    """Arena offsets of every tensor and scratch buffer, and the arena size in bytes."""

    arena_size: int
    offset: dict                    # tensor name -> byte offset in the arena
    scratch: dict                   # step index -> byte offset of its scratch buffer
    overlapped: list = field(default_factory=list)  # (step, input, output, displacement)
    banded: dict = field(default_factory=dict)      # step -> output rows per band, for the
    #                                                 steps whose output overlaps by bands


def _align(n: int) -> int:
    return (int(n) + ALIGN - 1) // ALIGN * ALIGN


def _align_down(n: int) -> int:
    """The largest multiple of ALIGN <= n (negative n too): a displacement every element
    type keeps aligned on."""
    return int(n) // ALIGN * ALIGN


@dataclass
class _Relax:
    """Output buffer `y` of step `step` may sit at displacement <= `dmax` over input `x`."""

    step: int
    x: str
    y: str
    dmax: int
    bands: bool
    rows: int = 0    # output rows per band (a banded candidate)


def plan_memory(sizes: dict, steps: list, graph_inputs, graph_outputs, bands=None,
                search: bool = True) -> MemoryPlan:
    """The plan for `steps` over tensors of `sizes` bytes (see the module docstring).
    `bands`: the steps allowed to run band by band (None: the plan decides, step 5);
    `search=False`: greedy by size, first fit only (TFLite Micro's placement)."""
    root = {name: name for name in sizes}
    for step in steps:
        if step.alias:
            root[step.outputs[0]] = root[step.inputs[0]]
    start, end = _lifetimes(root, steps, graph_inputs, graph_outputs)
    buffer_size = {}
    for name, r in root.items():
        buffer_size[r] = max(buffer_size.get(r, 0), int(sizes[name]))
    relax = _relaxations(steps, root, start, end, buffer_size)
    if bands is None:
        return _decide_bands(sizes, steps, root, start, end, buffer_size, relax, search)
    allowed = [r for r in relax if not r.bands or r.step in bands]
    return _plan(sizes, steps, root, start, end, buffer_size, _finest(allowed), search)


def _finest(relax) -> list:
    """The relaxations with, per banded step, only its most permissive band height."""
    best = {}
    for r in relax:
        if r.bands and (r.step not in best or r.dmax > best[r.step].dmax):
            best[r.step] = r
    return [r for r in relax if not r.bands or best[r.step] is r]


def _decide_bands(sizes, steps, root, start, end, buffer_size, relax, search) -> MemoryPlan:
    """Step 5: whole-layer calls unless bands lower the arena; then, layer by layer, the
    coarsest choice (a whole-layer call, else the tallest bands) that keeps the arena as small
    as the finest bands make it."""
    whole = [r for r in relax if not r.bands]
    best = _plan(sizes, steps, root, start, end, buffer_size, whole, search)
    if len(whole) == len(relax):
        return best
    finest = _finest(relax)
    banded = _plan(sizes, steps, root, start, end, buffer_size, finest, search)
    if banded.arena_size >= best.arena_size:
        return best
    start_choice = {r.step: r for r in finest if r.bands and r.step in banded.banded}
    plans = [_coarsen(sizes, steps, root, start, end, buffer_size, relax, search, banded,
                      dict(start_choice), heights) for heights in (True, False)]
    return min(plans, key=lambda plan: plan.arena_size)  # the first (taller bands) on ties


def _coarsen(sizes, steps, root, start, end, buffer_size, relax, search, best, choice,
             heights) -> MemoryPlan:
    """Layer by layer, the coarsest band choice (whole layer, then the tallest bands when
    `heights`) whose arena is no larger than the best so far."""
    whole = [r for r in relax if not r.bands]
    for step in sorted(choice):
        options = sorted((r for r in relax if r.bands and r.step == step),
                         key=lambda r: (-r.rows, r.dmax)) if heights else []
        for option in [None, *options]:
            if option is choice[step]:
                break
            trial = whole + [r for s, r in choice.items() if s != step] + \
                ([option] if option is not None else [])
            plan = _plan(sizes, steps, root, start, end, buffer_size, trial, search)
            if plan.arena_size <= best.arena_size:
                best = plan
                if option is None:
                    del choice[step]
                else:
                    choice[step] = option
                break
    return best


def _relaxations(steps, root, start, end, buffer_size) -> list:
    """Every overlap a step's kernel allows between a dying input and its new output."""
    out = []
    for index, step in enumerate(steps):
        if step.alias or not step.overlap or not step.outputs:
            continue
        y = root[step.outputs[0]]
        if start[y] != index:
            continue
        for candidate in step.overlap:
            x = root[step.inputs[candidate[1]]]
            if x == y or end[x] != index or sum(root[n] == x for n in step.inputs) != 1:
                continue  # the input lives on, or the step reads it twice (x + x)
            d = _displacement(candidate, buffer_size[x], buffer_size[y])
            if d is not None:
                bands = candidate[0] == "bands"
                rows = int(candidate[4]) if bands and len(candidate) > 4 else int(bands)
                out.append(_Relax(index, x, y, d, bands, rows))
    return out


def _plan(sizes, steps, root, start, end, buffer_size, relax, search) -> MemoryPlan:
    """Place every buffer and scratch (step 4) with the relaxations `relax`: the smallest of
    the heuristics, each over single buffers (every relaxation free) and over blocks (chains of
    overlapped buffers at their largest displacement, placed as one)."""
    scratch_items = [((index,), int(step.scratch), index, index)
                     for index, step in enumerate(steps) if step.scratch > 0]
    pairs = {}
    for r in relax:  # the most permissive rule per pair; a whole-layer one before a band one
        key = (r.x, r.y)
        old = pairs.get(key)
        if old is None or (r.dmax, not r.bands) > (old.dmax, not old.bands):
            pairs[key] = r
    singles = [(r, buffer_size[r], start[r], end[r]) for r in sorted(buffer_size)
               if buffer_size[r] > 0]
    members, blocks = _blocks(pairs, start, end, buffer_size)
    modes = ((singles + scratch_items, pairs, None), (blocks + scratch_items, {}, members))
    best = None
    for items, item_pairs, within in (modes if search else modes[1:]):
        for order_key, best_fit in (_HEURISTICS if search else _HEURISTICS[:1]):
            order = sorted(range(len(items)), key=lambda i: order_key(items[i]) + (i,))
            placed = _place(items, order, item_pairs, best_fit)
            arena = _align(max([placed[it[0]] + it[1] for it in items] + [0]))
            if best is None or arena < best[0]:
                if within is not None:
                    placed = {**{m: placed[b] + rel for m, (b, rel) in within.items()},
                              **{k: o for k, o in placed.items() if isinstance(k, tuple)}}
                best = (arena, placed)
    arena, placed = best
    offset = {name: placed.get(root[name], 0) for name in sizes}
    scratch = {k[0]: o for k, o in placed.items() if isinstance(k, tuple)}
    overlapped, banded = [], {}
    for (x, y), r in sorted(pairs.items(), key=lambda kv: (kv[1].step, kv[0])):
        ox, oy = placed.get(x, 0), placed.get(y, 0)
        if ox < oy + buffer_size[y] and oy < ox + buffer_size[x]:
            step = steps[r.step]
            name_x = next(n for n in step.inputs if root[n] == x)
            overlapped.append((r.step, name_x, step.outputs[0], oy - ox))
            if r.bands:
                banded[r.step] = r.rows
    plan = MemoryPlan(arena, offset, scratch, overlapped, banded)
    _check(plan, sizes, root, start, end, steps, pairs)
    return plan


def _blocks(pairs, start, end, buffer_size) -> tuple:
    """({buffer: (block key, relative offset)}, block items): each relaxation in step order
    joins its output to its input's block at the largest displacement, when no other member
    of that block is still alive (a chain of in-place layers is one block)."""
    where = {r: (r, 0) for r in buffer_size}
    info = {r: [buffer_size[r], start[r], end[r], [r]] for r in buffer_size}  # key -> block
    for (x, y), r in sorted(pairs.items(), key=lambda kv: (kv[1].step, kv[0])):
        bx, rel_x = where[x]
        by, _ = where[y]
        if bx == by or len(info[by][3]) != 1:
            continue
        if any(m != x and end[m] >= r.step for m in info[bx][3]):
            continue
        base = rel_x + r.dmax
        shift = max(0, -base)
        block = info[bx]
        for m in block[3]:
            where[m] = (bx, where[m][1] + shift)
        where[y] = (bx, base + shift)
        block[0] = max(block[0] + shift, base + shift + buffer_size[y])
        block[1], block[2] = min(block[1], start[y]), max(block[2], end[y])
        block[3].append(y)
        del info[by]
    items = [(k, v[0], v[1], v[2]) for k, v in sorted(info.items()) if v[0] > 0]
    return where, items


# (sort key of an item (key, size, start, end), best fit?): tried in this order
_HEURISTICS = (
    (lambda it: (-it[1], it[2]), False),                       # TFLite Micro's greedy
    (lambda it: (-it[1], it[2]), True),
    (lambda it: (-it[1] * (it[3] - it[2] + 1), -it[1]), False),  # area first
    (lambda it: (-it[1] * (it[3] - it[2] + 1), -it[1]), True),
    (lambda it: (it[2], -it[1]), False),                        # by birth
    (lambda it: (it[2], -it[1]), True),
    (lambda it: (-(it[3] - it[2]), -it[1]), False),             # longest-lived first
    (lambda it: (-(it[3] - it[2]), -it[1]), True),
    (lambda it: (-it[3], -it[1]), False),                       # by death, the last first
    (lambda it: (-it[3], -it[1]), True),
)


def _place(items, order, pairs, best_fit) -> dict:
    """{item key: offset}, items placed in `order`."""
    placed = {}
    spans = []  # (key, offset, size, start, end)
    for i in order:
        key, size, s, e = items[i]
        busy = []
        for k2, o2, sz2, s2, e2 in spans:
            if s2 > e or s > e2:
                continue
            r = pairs.get((k2, key))
            if r is not None:      # key is the output over k2: k2 shrinks to its unsafe part
                lo, hi = o2 + max(r.dmax, -size) + size, o2 + sz2
            else:
                r = pairs.get((key, k2))
                lo, hi = (o2, o2 - max(r.dmax, -sz2)) if r is not None else (o2, o2 + sz2)
            if lo - size < hi:  # forbidden offsets: (lo - size, hi)
                busy.append((lo, hi))
        offset = _lowest_free(busy, size, best_fit)
        placed[key] = offset
        spans.append((key, offset, size, s, e))
    return placed


def _lowest_free(busy, size, best_fit=False) -> int:
    """An aligned offset where `size` bytes miss every [lo, hi) of `busy`: the lowest, or with
    `best_fit` the one leaving the smallest hole (the top when none fits)."""
    candidate, best = 0, None
    for lo, hi in sorted(busy):
        if candidate + size <= lo:
            if not best_fit:
                return candidate
            hole = lo - candidate
            if best is None or hole < best[0]:
                best = (hole, candidate)
        candidate = max(candidate, _align(hi))
    return best[1] if best is not None else candidate


def _lifetimes(root, steps, graph_inputs, graph_outputs) -> tuple:
    start, end = {}, {}
    last = len(steps)
    for name in graph_inputs:
        start[root[name]] = -1
    for index, step in enumerate(steps):
        for name in step.outputs:
            r = root[name]
            start[r] = min(start.get(r, index), index)
        for name in step.inputs:
            r = root[name]
            end[r] = max(end.get(r, index), index)
    for name in graph_outputs:
        end[root[name]] = last
    for r in set(root.values()):
        start.setdefault(r, -1)
        end[r] = max(end.get(r, start[r]), start[r])
    return start, end


def _displacement(overlap, in_size: int, out_size: int):
    """The largest displacement (output offset minus input offset) at which the output may
    overlap the input, or None (no overlap can save a byte)."""
    if overlap[0] == "same":
        return 0 if out_size <= in_size else None
    if overlap[0] in ("bands", "tiles"):
        ends = np.asarray(overlap[2], dtype=np.int64)
        reads = np.asarray(overlap[3], dtype=np.int64)
        if ends.size == 0 or int(ends[-1]) != out_size:
            return None
        future = np.minimum.accumulate(reads[::-1])[::-1]  # min over bands >= b
        d = _align_down(min(0, (future - ends).min()))
        footprint = max(in_size, d + out_size) - d
        return d if footprint < in_size + out_size else None
    minread = np.asarray(overlap[2], dtype=np.int64)
    if minread.size != out_size or out_size == 0:
        return None
    future = np.minimum.accumulate(minread[::-1])[::-1]  # min over elements >= i
    later = np.append(future[1:], np.iinfo(np.int64).max)  # min over elements > i
    limit = later - np.arange(out_size) - 1
    d = _align_down(min(0, limit.min()))
    footprint = max(in_size, d + out_size) - d
    return d if footprint < in_size + out_size else None


def _check(plan, sizes, root, start, end, steps, pairs=None) -> None:
    """Step 6: live tensors share bytes only as a relaxation allows; all inside the arena, all
    at multiples of ALIGN."""
    pairs = pairs or {}
    misaligned = [str(n) for n, o in [*plan.offset.items(), *plan.scratch.items()] if o % ALIGN]
    if misaligned:
        raise RuntimeError(f"internal: memory plan puts {misaligned[0]!r} at a misaligned "
                           "offset")
    spans = []
    for name, size in sizes.items():
        if root[name] != name or size == 0:
            continue
        spans.append((name, plan.offset[name], plan.offset[name] + int(size), start[name],
                      end[name]))
    for index, step in enumerate(steps):
        if step.scratch > 0:
            o = plan.scratch[index]
            spans.append((f"<scratch {index}>", o, o + int(step.scratch), index, index))
    spans.sort(key=lambda sp: sp[1])
    for i, (a, a0, a1, as_, ae) in enumerate(spans):
        for b, b0, b1, bs, be in spans[i + 1:]:
            if b0 >= a1:
                break
            if as_ <= be and bs <= ae:
                if not (_allowed(pairs.get((a, b)), a0, b0)
                        or _allowed(pairs.get((b, a)), b0, a0)):
                    raise RuntimeError(f"internal: memory plan overlaps {a!r} and {b!r}")
    if any(o < 0 for o in plan.offset.values()) or any(
            plan.offset[n] + int(s) > plan.arena_size for n, s in sizes.items()):
        raise RuntimeError("internal: memory plan outside the arena")


def _allowed(relax, x_offset, y_offset) -> bool:
    return relax is not None and y_offset - x_offset <= relax.dmax
