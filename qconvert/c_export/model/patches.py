"""`export-c --patches N`: the first high-resolution stage of a CNN run tile by tile (MCUNetV2's
patch-based inference), so its large activations never exist whole.

    steps, note = patch_stage(graph, steps, n, plan_of)   # steps with the stage as one step

The stage: the first chain of convolutions, depthwise convolutions and pools in execution order
(each layer reading only the previous one's output, which nothing else reads and which is no
graph output), cut where the arena is smallest (`plan_of` prices a candidate list of steps).
Its last output is split into N x N tiles; each tile's input region is found backwards through
the chain (every layer's kernel extent, stride, dilation and padding: the halo, recomputed by
neighbouring tiles). Per tile, the generated C copies the stage input's region into a patch
buffer and runs every layer of the chain on patch buffers (two, used in turn) as a sub-image:
the same portable kernel (its geometry struct, qconvert_conv_params or qconvert_dw_params)
with in_h / in_w / out_h / out_w of the patch and pad_top / pad_left
of the rows and columns outside the real image only (inside it, the patch holds real pixels),
then copies the tile into the stage output (which may start over the stage input: a row of
tiles writes only output rows no later row of tiles' input region reaches). Every output pixel
is computed by the same kernel from the same input values as the whole layer computes it, so
the result is bit-exact. The stage runs qconvert's portable kernels under both kernel sets.

Refused with a note (the export goes on without patches): no such chain of two layers or more,
or patching does not lower the arena.
"""

from __future__ import annotations

import re
from string import Template

import numpy as np

from qconvert.ir.node import Node

from .memory_plan import PlanStep
from .steps import Step, tensor_dims

_KERNELS = re.compile(
    r"^qconvert_(conv|conv_fast|depthwise_conv|dw|dw_hwc|avgpool|maxpool|avgpool_fast|"
    r"maxpool_fast)_s8\(")
_PARAMS = re.compile(r"static const (\w+) @L_params = ")  # the geometry struct's type
_OPS = ("Conv2D", "DepthwiseConv2D", "AveragePool", "MaxPool")


def patch_stage(graph, steps, n, plan_of) -> tuple:
    """(steps with the best patched stage in place of its layers, a one-line note)."""
    chain, why = _chain(graph, steps)
    if len(chain) < 2:
        return steps, f"patches: not used: {why}"
    base = plan_of(steps)
    best = None
    for length in range(2, len(chain) + 1):
        made = _stage(graph, [steps[k] for k in chain[:length]], n)
        trial = steps[:chain[0]] + [made] + steps[chain[length - 1] + 1:]
        arena = plan_of(trial)
        if best is None or arena < best[0]:
            best = (arena, length, trial)
    arena, length, trial = best
    if arena >= base:
        return steps, (f"patches: not used: patching the first {len(chain)} layers does not "
                       f"lower the arena ({base} bytes)")
    names = ", ".join(f"{steps[k].node.op} {steps[k].index}" for k in chain[:length])
    return trial, (f"patches: layers {names} run in {n} x {n} tiles: arena {base} -> {arena} "
                   "bytes")


def _eligible(graph, step) -> str:
    """'' when `step` can run on a patch, else why not."""
    node = step.node
    if node.op not in _OPS:
        return f"{node.op} {node.name!r} mixes pixels a tile does not hold"
    if not _KERNELS.match(step.call.template) or not re.search(r"&@L_params[,)]",
                                                               step.call.template):
        return f"{node.op} {node.name!r} has no portable int8 kernel call to patch"
    if tensor_dims(graph, node.inputs[0])[0] != 1:
        return f"{node.op} {node.name!r} has a batch of more than one"
    return ""


def _chain(graph, steps) -> tuple:
    """(positions of the stage's candidate layers, why the chain stops)."""
    first = next((k for k, s in enumerate(steps) if s.node.op in _OPS), None)
    if first is None:
        return [], "the model has no convolution or pool"
    why = _eligible(graph, steps[first])
    if why:
        return [], why
    readers = {}
    for k, s in enumerate(steps):
        for t in s.plan.inputs:
            readers.setdefault(t, []).append(k)
    chain = [first]
    while True:
        out = steps[chain[-1]].plan.outputs
        nxt = readers.get(out[0], []) if len(out) == 1 else []
        if len(nxt) != 1 or out[0] in graph.outputs:
            return chain, f"{out[0]!r} is read by {len(nxt)} layers or is a model output"
        step = steps[nxt[0]]
        why = _eligible(graph, step)
        if why or step.plan.inputs != out:
            return chain, why or f"{step.node.op} {step.node.name!r} reads more than the chain"
        chain.append(nxt[0])


def _geometry(graph, step):
    """(input H, W, C, output H, W, C, (extent, stride, pad) rows, same for columns)."""
    from qconvert.int8.prepare import layer_params

    node = step.node
    p = layer_params(graph, node)
    _, h, w, c = tensor_dims(graph, node.inputs[0])
    _, oh, ow, oc = tensor_dims(graph, node.outputs[0])
    if node.op in ("AveragePool", "MaxPool"):
        kh, kw = p["kernel_shape"]
        dh, dw = 1, 1
    else:
        weights = graph.tensors[node.inputs[1]].data
        kh, kw = int(weights.shape[1]), int(weights.shape[2])
        dh, dw = p.get("dilations", [1, 1])
    sh, sw = p["strides"]
    return (h, w, c, oh, ow, oc, ((kh - 1) * dh + 1, sh, p["pads"][0]),
            ((kw - 1) * dw + 1, sw, p["pads"][1]))


def _splits(size, n) -> list:
    """[start, stop) of n nearly equal parts of range(size)."""
    cuts = [size * k // n for k in range(n + 1)]
    return [(a, b) for a, b in zip(cuts[:-1], cuts[1:]) if b > a]


def _regions(geos, tiles, axis) -> list:
    """Per layer, per tile along `axis` (0 rows, 1 columns): [input start, input count,
    pad before, output count], walking the chain backwards from the tiles."""
    out = [[] for _ in geos]
    for a, b in tiles:
        for j in range(len(geos) - 1, -1, -1):
            size = geos[j][axis]
            extent, stride, pad = geos[j][6 + axis]
            lo = max(0, a * stride - pad)
            hi = min(size, (b - 1) * stride - pad + extent)
            out[j].append([lo, hi - lo, lo - (a * stride - pad), b - a])
            a, b = lo, hi
    return out


def _stage(graph, members, n) -> Step:
    """The chain `members` as one step running tile by tile."""
    geos = [_geometry(graph, s) for s in members]
    last = geos[-1]
    tile_rows, tile_cols = _splits(last[3], min(n, last[3])), _splits(last[4], min(n, last[4]))
    rows, cols = _regions(geos, tile_rows, 0), _regions(geos, tile_cols, 1)
    # patch buffers: layer j reads buffer j % 2 and writes the other
    buffers = [0, 0]
    for j, g in enumerate(geos):
        in_bytes = max(r[1] for r in rows[j]) * max(c[1] for c in cols[j]) * g[2]
        out_bytes = max(r[3] for r in rows[j]) * max(c[3] for c in cols[j]) * g[5]
        buffers[j % 2] = max(buffers[j % 2], in_bytes)
        buffers[(j + 1) % 2] = max(buffers[(j + 1) % 2], out_bytes)
    second = (buffers[0] + 3) // 4 * 4
    # a member's own scratch (qconvert_conv_fast_s8's columns) after the two patch buffers
    third = (second + buffers[1] + 3) // 4 * 4
    own = max([int(s.plan.scratch) for s in members if "$scratch" in s.call.template] or [0])
    arrays = [(f"tile_{axis}", "int32_t", np.asarray([(a, b - a) for a, b in t], np.int64)
               .reshape(-1))
              for axis, t in (("rows", tile_rows), ("cols", tile_cols))]
    decls, files = [], set()
    for j, s in enumerate(members):
        arrays += [(f"k{j}_{suffix}", ctype, values) for suffix, ctype, values in s.arrays]
        arrays += [(f"k{j}_rows", "int32_t", np.asarray(rows[j], np.int64).reshape(-1)),
                   (f"k{j}_cols", "int32_t", np.asarray(cols[j], np.int64).reshape(-1))]
        decls += [d.replace("@L_", f"@L_k{j}_") for d in s.decls]
        files |= s.files
    call = _tile_loop(members, geos, len(rows[0]), len(cols[0]), second, third)
    first, end = members[0], members[-1]
    node = Node("PatchStage", list(first.node.inputs[:1]), list(end.node.outputs),
                name=f"{len(members)} layers from {first.node.name}")
    # a row of tiles reads the input from its first row on and writes output rows above the
    # next row of tiles: the stage output may start below the input (memory_plan "tiles")
    w0, c0 = geos[0][1], geos[0][2]
    ends = np.array([b * last[4] * last[5] for _, b in tile_rows], dtype=np.int64)
    reads = np.array([r[0] * w0 * c0 for r in rows[0]], dtype=np.int64)
    plan = PlanStep(inputs=list(first.plan.inputs), outputs=list(end.plan.outputs),
                    overlap=[("tiles", 0, ends, reads)],
                    scratch=third + own if own else second + buffers[1])
    made = Step(first.index, node, plan, Template(call), arrays, decls, files,
                scratch_builds={"helium": plan.scratch, "other": plan.scratch})
    made.members = list(members)  # the layers it runs (export_report's MACs)
    return made


def _tile_loop(members, geos, n_rows, n_cols, second, third) -> str:
    """The C of the stage: per tile, copy in, every layer on patch buffers, copy out (a layer's
    own scratch at byte `third` of the stage's)."""
    c0, oc = geos[0][2], geos[-1][5]
    w0, ow = geos[0][1], geos[-1][4]
    lines = ["{", "    int32_t ty, tx, r, i;",
             "    int8_t *const patch[2] = {$scratch, $scratch + " + str(second) + "};",
             f"    /* {len(members)} layers in {n_rows} x {n_cols} tiles (export-c --patches) */",
             f"    for (ty = 0; ty < {n_rows}; ++ty) {{",
             f"        for (tx = 0; tx < {n_cols}; ++tx) {{",
             "            const int32_t *const rows0 = @L_k0_rows + 4 * ty;",
             "            const int32_t *const cols0 = @L_k0_cols + 4 * tx;",
             "            const int32_t *const rows_out = @L_tile_rows + 2 * ty;",
             "            const int32_t *const cols_out = @L_tile_cols + 2 * tx;",
             "            for (r = 0; r < rows0[1]; ++r) {",
             f"                const int8_t *src = $in0 + ((rows0[0] + r) * {w0} + cols0[0]) "
             f"* {c0};",
             f"                int8_t *dst = patch[0] + r * cols0[1] * {c0};",
             f"                for (i = 0; i < cols0[1] * {c0}; ++i) {{",
             "                    dst[i] = src[i];", "                }", "            }"]
    for j, s in enumerate(members):
        text = s.call.template.replace("&@L_params", "&p")
        text = text.replace("$scratch", f"($scratch + {third})")
        text = Template(text).safe_substitute({"in0": f"patch[{j % 2}]",
                                               "out0": f"patch[{(j + 1) % 2}]"})
        text = text.replace("@L_", f"@L_k{j}_")
        struct = next(m.group(1) for m in map(_PARAMS.search, s.decls) if m)
        lines += ["            {",
                  f"                {struct} p = @L_k{j}_params;",
                  f"                p.in_h = @L_k{j}_rows[4 * ty + 1];",
                  f"                p.pad_top = @L_k{j}_rows[4 * ty + 2];",
                  f"                p.out_h = @L_k{j}_rows[4 * ty + 3];",
                  f"                p.in_w = @L_k{j}_cols[4 * tx + 1];",
                  f"                p.pad_left = @L_k{j}_cols[4 * tx + 2];",
                  f"                p.out_w = @L_k{j}_cols[4 * tx + 3];",
                  *("                " + t for t in text.split("\n")), "            }"]
    done = len(members) % 2
    lines += ["            for (r = 0; r < rows_out[1]; ++r) {",
              f"                const int8_t *src = patch[{done}] + r * cols_out[1] * {oc};",
              f"                int8_t *dst = $out0 + ((rows_out[0] + r) * {ow} + cols_out[0]) "
              f"* {oc};",
              f"                for (i = 0; i < cols_out[1] * {oc}; ++i) {{",
              "                    dst[i] = src[i];", "                }",
              "            }", "        }", "    }", "}"]
    return "\n".join(lines)
