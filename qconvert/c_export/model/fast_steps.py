"""Which of qconvert's layer-specialised int8 kernels (kernels/qconvert_nn_fast.h, lowered by
`depthwise_steps`, `pool_steps`, `add_steps`; `lowering.LOWERINGS` sends the ops to them)
`--kernels cmsis-nn` keeps.

`--kernels cmsis-nn` keeps the qconvert kernel of the ops in `KEEP_ON_DSP` on cores without
Helium, where it was measured faster than CMSIS-NN's (Cortex-M4, QEMU -icount,
bench/profile_layers.py, instructions per layer): AVERAGE_POOL_2D on the DS-CNN's 25x5x64 global pool
26 K against arm_avgpool_s8's 51 K (2x2 stride 2 on 32x32x32: 0.33 M against about 0.34 M);
MAX_POOL_2D 2x2 stride 2 on 32x32x32 0.15 M against arm_max_pool_s8's 0.31 M; ADD on ResNet-8's
32x32x16 0.34 M against arm_elementwise_add_s8's 1.29 M; MUL on 32x32x16 0.34 M against
arm_elementwise_mul_s8's 0.58 M. Helium builds (__ARM_FEATURE_MVE) call CMSIS-NN's vector
kernels. DEPTHWISE_CONV_2D on the DS-CNN's 25x5x64 3x3: qconvert_dw_hwc_s8 (the weights in
TFLite's order, shared with CMSIS-NN's call) 0.42 M against arm_depthwise_conv_wrapper_s8's
0.55 M."""

from __future__ import annotations

from dataclasses import replace
from string import Template

from .helium_tiles import merged

KEEP_ON_DSP = frozenset({"AveragePool", "MaxPool", "Add", "Mul", "DepthwiseConv2D"})
_FAST_HEADER = "qconvert_nn_fast.h"


def keep_on_dsp(fast, cmsis):
    """The step `--kernels cmsis-nn` emits for a node lowered to `fast` (a qconvert kernel step)
    and `cmsis` (its CMSIS-NN step): CMSIS-NN's call on Helium builds, the qconvert kernel
    elsewhere, when the op is in KEEP_ON_DSP; else `cmsis`. Arrays of the same name are the
    same values (the depthwise steps share TFLite's weights, multipliers and shifts) and are
    written once; CMSIS-NN's scratch checks run on Helium builds only. The output overlaps its
    input only where both kernels allow it: CMSIS-NN's
    per-row "bands" (each row written below everything it and later rows read) also bound the
    qconvert kernels, which write each element after reading its taps, so a banded plan stays,
    CMSIS-NN called per row and the qconvert kernel once; where CMSIS-NN's Helium kernel allows
    an overlap in one call (`helium_tiles`: depthwise), that one merged with the qconvert
    kernel's is offered too, and the plan prefers it to bands. The scratch is CMSIS-NN's Helium
    one (the qconvert kernels need none)."""
    if cmsis is fast or _FAST_HEADER not in fast.files or fast.node.op not in KEEP_ON_DSP:
        return cmsis
    call = _per_build(cmsis.call.template, fast.call.template)
    banded = None if cmsis.banded is None else \
        Template(_per_build(cmsis.banded.template, fast.call.template))
    bands = [c for c in (cmsis.plan.overlap or []) if c[0] == "bands"]
    both = bands or [c for c in (cmsis.plan.overlap or []) if c in (fast.plan.overlap or [])]
    whole = merged(cmsis.helium_tiles, (fast.plan.overlap or [None])[0])
    if whole is not None:  # CMSIS-NN's Helium call of the whole layer, and the qconvert kernel
        both = [*both, whole]
    plan = replace(cmsis.plan, overlap=both or None)
    scratch = None
    if cmsis.scratch_builds:
        scratch = {"helium": cmsis.scratch_builds["helium"], "other": 0}
        plan.scratch = max(scratch.values())
    names = {a[0] for a in cmsis.arrays}
    arrays = cmsis.arrays + [a for a in fast.arrays if a[0] not in names]
    return replace(cmsis, call=Template(call), banded=banded, arrays=arrays,
                   decls=cmsis.decls + fast.decls, files=cmsis.files | fast.files, plan=plan,
                   scratch_builds=scratch, check=_helium_only(cmsis.check),
                   banded_check=_helium_only(cmsis.banded_check))


def _per_build(helium: str, other: str) -> str:
    return "\n".join(["#if defined(__ARM_FEATURE_MVE)", helium, "#else", other, "#endif"])


def _helium_only(check):
    """CMSIS-NN's scratch check (NAME_check) for Helium builds only: the other builds call the
    qconvert kernel, which has no scratch."""
    if check is None:
        return None
    return Template("\n".join(["#if defined(__ARM_FEATURE_MVE)", check.template, "#endif"]))
