"""The static memory plan of `qconvert export-c`: every activation at a fixed arena offset.

    plan = plan_memory(tensors, steps)        # plan.arena_size, plan.offset[name], plan.scratch

Inputs: the activation tensors (name -> bytes) and the steps in execution order (`PlanStep`:
what each reads and writes, which output is an alias of which input, which input it may
overlap and how, its scratch bytes). What it does, in order:

1. Aliases: a Reshape / Squeeze output is the same bytes as its input; an alias chain is one
   buffer whose lifetime is the union of its members'.
2. Lifetimes: a buffer lives from the step that writes it (graph inputs: step -1, copied in)
   to the last step that reads it (graph outputs: to the end, copied out).
3. Overlap: a step whose input buffer dies at that step may put its output over it when the
   kernel allows. `("same", slot)`: output element i is written after input element i is
   read and nothing later reads elements before i (element-wise kernels): output at the input's
   offset. `("reads", slot, minread)`: `minread[i]` is the lowest input byte that output element
   i reads (the kernel walks its output in memory order; see kernels/qconvert_nn.h): writing
   element i may only overwrite input bytes no later element reads, which bounds the output's
   displacement D from the input (`D + i < min(minread[i + 1:])`); the largest such D <= 0
   gives the smallest footprint (in-place depthwise convolution: the output starts about one
   row before its input). `("bands", slot, ends, reads)`: the kernel is called once per band
   of output rows (CMSIS-NN's kernels, whose inner order is the library's): band b writes
   output bytes up to `ends[b]` (exclusive) in any order while reading input bytes from
   `reads[b]` on, so its writes must stay below what it and later bands read
   (`D + ends[b] <= min(reads[b:])`). Overlapped buffers become one block with fixed relative
   offsets.
4. Offsets: blocks (and per-step scratch buffers, alive for their step only) are placed greedy
   by size, largest first, each at the lowest 4-byte-aligned offset free for its lifetime: the
   baseline TFLite Micro's GreedyMemoryPlanner uses.
5. Check: no two tensors alive at the same step share a byte unless step 3 allowed exactly that
   overlap; a violation is an internal error, never a silently wrong model.
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
    #                                ("bands", slot, ends, reads)
    scratch: int = 0        # scratch bytes the kernel needs during this step


@dataclass
class MemoryPlan:
    """Arena offsets of every tensor and scratch buffer, and the arena size in bytes."""

    arena_size: int
    offset: dict                    # tensor name -> byte offset in the arena
    scratch: dict                   # step index -> byte offset of its scratch buffer
    overlapped: list = field(default_factory=list)  # (step, input, output, displacement)


def _align(n: int) -> int:
    return (int(n) + ALIGN - 1) // ALIGN * ALIGN


class _Block:
    """Buffers with fixed offsets relative to each other, placed as one."""

    def __init__(self, members, size, start, end):
        self.members = members      # {buffer root: relative offset}
        self.size = size
        self.start, self.end = start, end
        self.offset = None


def plan_memory(sizes: dict, steps: list, graph_inputs, graph_outputs) -> MemoryPlan:
    """The plan for `steps` over tensors of `sizes` bytes (see the module docstring)."""
    root = {name: name for name in sizes}
    for step in steps:
        if step.alias:
            root[step.outputs[0]] = root[step.inputs[0]]
    start, end = _lifetimes(root, steps, graph_inputs, graph_outputs)
    buffer_size = {}
    for name, r in root.items():
        buffer_size[r] = max(buffer_size.get(r, 0), int(sizes[name]))
    blocks = {r: _Block({r: 0}, buffer_size[r], start[r], end[r]) for r in buffer_size}
    overlapped = []
    for index, step in enumerate(steps):
        for candidate in ([] if step.alias else step.overlap or []):
            done = _merge(candidate, index, step, root, start, end, blocks, buffer_size)
            if done is not None:
                overlapped.append(done)
                break
    unique = list({id(b): b for b in blocks.values()}.values())
    items = [(b.size, b.start, b.end, b) for b in unique]
    scratch_blocks = {}
    for index, step in enumerate(steps):
        if step.scratch > 0:
            b = _Block({}, int(step.scratch), index, index)
            scratch_blocks[index] = b
            items.append((b.size, index, index, b))
    order = sorted(range(len(items)), key=lambda i: (-items[i][0], items[i][1], i))
    placed = []
    for i in order:
        size, s, e, block = items[i]
        block.offset = _lowest_free(placed, size, s, e)
        placed.append((block.offset, size, s, e))
    arena = _align(max([o + sz for o, sz, _, _ in placed] + [0]))
    offset = {name: blocks[root[name]].offset + blocks[root[name]].members[root[name]]
              for name in sizes}
    scratch = {i: b.offset for i, b in scratch_blocks.items()}
    plan = MemoryPlan(arena, offset, scratch, overlapped)
    _check(plan, sizes, root, start, end, steps)
    return plan


def _merge(candidate, index, step, root, start, end, blocks, buffer_size):
    """Put the step's output over input `candidate[1]` when allowed: (step, input, output,
    displacement), else None."""
    slot = candidate[1]
    x, y = root[step.inputs[slot]], root[step.outputs[0]]
    if x == y or end[x] != index or start[y] != index:
        return None
    if sum(root[n] == x for n in step.inputs) != 1:
        return None  # the same buffer read twice by the step (x + x)
    block = blocks[x]
    if any(blocks[m] is block and m != x and end[m] >= index for m in block.members):
        return None
    if len(blocks[y].members) != 1:
        return None
    d = _displacement(candidate, buffer_size[x], buffer_size[y])
    if d is None:
        return None
    base = block.members[x] + d
    shift = max(0, -base)
    for m in block.members:
        block.members[m] += shift
    block.members[y] = base + shift
    block.size = max(block.size + shift, base + shift + buffer_size[y])
    block.start, block.end = min(block.start, start[y]), max(block.end, end[y])
    blocks[y] = block
    return (index, step.inputs[slot], step.outputs[0], d)


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
    """The output's offset relative to the input's when they overlap, or None (no gain)."""
    if overlap[0] == "same":
        return 0 if out_size <= in_size else None
    if overlap[0] == "bands":
        ends = np.asarray(overlap[2], dtype=np.int64)
        reads = np.asarray(overlap[3], dtype=np.int64)
        if ends.size == 0 or int(ends[-1]) != out_size:
            return None
        future = np.minimum.accumulate(reads[::-1])[::-1]  # min over bands >= b
        d = int(min(0, (future - ends).min()))
        footprint = max(in_size, d + out_size) - d
        return d if footprint < in_size + out_size else None
    minread = np.asarray(overlap[2], dtype=np.int64)
    if minread.size != out_size or out_size == 0:
        return None
    future = np.minimum.accumulate(minread[::-1])[::-1]  # min over elements >= i
    later = np.append(future[1:], np.iinfo(np.int64).max)  # min over elements > i
    limit = later - np.arange(out_size) - 1
    d = int(min(0, limit.min()))
    footprint = max(in_size, d + out_size) - d
    return d if footprint < in_size + out_size else None


def _lowest_free(placed, size, s, e) -> int:
    """Lowest aligned offset where `size` bytes are free during steps [s, e]."""
    busy = sorted((o, o + sz) for o, sz, ps, pe in placed if ps <= e and s <= pe)
    candidate = 0
    for lo, hi in busy:
        if candidate + size <= lo:
            break
        candidate = max(candidate, _align(hi))
    return candidate


def _check(plan, sizes, root, start, end, steps) -> None:
    allowed = {(root[x], root[y]) for _, x, y, _ in plan.overlapped}
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
    for i, (a, a0, a1, as_, ae) in enumerate(spans):
        for b, b0, b1, bs, be in spans[i + 1:]:
            if as_ <= be and bs <= ae and a0 < b1 and b0 < a1:
                if (a, b) not in allowed and (b, a) not in allowed:
                    raise RuntimeError(f"internal: memory plan overlaps {a!r} and {b!r}")
    if any(o < 0 for o in plan.offset.values()) or any(
            plan.offset[n] + int(s) > plan.arena_size for n, s in sizes.items()):
        raise RuntimeError("internal: memory plan outside the arena")
