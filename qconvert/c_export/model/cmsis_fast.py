"""`--kernels cmsis-nn` with qconvert's fast int8 Conv2D / FullyConnected kernels where they
are faster: builds without Helium (MVE).

    step = on_dsp_builds(cmsis_step, fast_step)

Measured (bench/profile_layers.py, Cortex-M4, QEMU -icount): `qconvert_conv_fast_s8` and
`qconvert_fc_fast_s8` take fewer instructions than CMSIS-NN's `arm_convolve_wrapper_s8` and
`arm_fully_connected_s8` called once per layer on every conv and fully connected layer of
kws_ref_model, ResNet-8 and ad01 (kws 1x1 convs 0.88 M against 1.05 M, ResNet-8 3x3 convs
3.88 M against 5.49 M, ad01 640 -> 128 0.13 M against 0.16 M; one 8 -> 128 layer ties), and
CMSIS-NN's per-row calls on an overlapped output cost more still; except a fully connected
layer whose row count is not a multiple of 4 (ResNet-8's 64 -> 10: 1,960 against 1,840), which
`cmsis_lowering.lower_cmsis` leaves to CMSIS-NN. On Cortex-M55 with Helium
CMSIS-NN's kernels are faster (its fully connected about 3x), so the C chooses when it is
compiled: `#if` Helium, CMSIS-NN's call (and its banded call, its scratch check), `#else` the
fast kernel's. An array only one side reads is tagged "#helium" or "#other" (`render`
links it only in those builds); the multipliers and shifts, and a fully connected layer's
kernel sums (the fast kernel's start values: `steps_fast.fc_sums`), are shared. The plan
takes, per build, that build's scratch; its overlap must suit both kernels: each band height
CMSIS-NN offers with the fast kernel's bands merged in (every band of each keeps its own
constraint and gains only later bands' reads); where the plan bands the layer, Helium builds
call CMSIS-NN band by band and the others the fast kernel once. Where CMSIS-NN's Helium kernel
allows an overlap in one call (`helium_tiles`: 1x1 convolutions), the step also offers that
whole-layer overlap merged with the fast kernel's, which the plan prefers to bands.
"""

from __future__ import annotations

from string import Template

import numpy as np

from ..c_text import HELIUM_TEST
from .helium_tiles import merged
from .steps import Step

SHARED = ("multiplier", "shift")
# the fast step's names that a CMSIS-NN step also defines
RENAMES = {"@L_weights": "@L_fweights", "@L_quant": "@L_fquant", "@L_params": "@L_fparams"}


def _renamed(text: str) -> str:
    for old, new in RENAMES.items():
        text = text.replace(old, new)
    return text


def _either(helium: str, other: str) -> str:
    return "\n".join([f"#if {HELIUM_TEST}", helium, "#else", other, "#endif"])


def _only_helium(text: str) -> str:
    return "\n".join([f"#if {HELIUM_TEST}", text, "#endif"])


def merged_bands(cmsis, fast):
    """The overlap candidates of the combined step, safe for both kernels, or None when either
    allows none: each of CMSIS-NN's "bands" candidates (one per band height, its fifth field)
    with the fast kernel's "tiles" merged in, both band lists in order of their ends (the same
    rule, `memory_plan`)."""
    if not cmsis or not fast or fast[0][0] != "tiles":
        return None
    _, slot, ends_f, reads_f = fast[0]
    out = []
    for candidate in cmsis:
        if candidate[0] != "bands" or candidate[1] != slot:
            continue
        ends = np.concatenate([np.asarray(candidate[2], np.int64), np.asarray(ends_f, np.int64)])
        reads = np.concatenate([np.asarray(candidate[3], np.int64),
                                np.asarray(reads_f, np.int64)])
        order = np.argsort(ends, kind="stable")
        out.append(("bands", slot, ends[order], reads[order], *candidate[4:]))
    return out or None


def on_dsp_builds(cmsis: Step, fast: Step) -> Step:
    """One step: `cmsis` (a CMSIS-NN call) in Helium builds, `fast` (qconvert_conv_fast_s8 or
    qconvert_fc_fast_s8 of the same node) elsewhere (see the module docstring)."""
    shared = set(SHARED)
    if "@L_kernel_sums" in fast.call.template:
        shared.add("kernel_sums")
    fast_values = {suffix: values for suffix, _, values in fast.arrays}
    for suffix, ctype, values in cmsis.arrays:  # the same array on both sides: the bias
        if suffix in fast_values and np.array_equal(np.asarray(values),
                                                    np.asarray(fast_values[suffix])):
            shared.add(suffix)
    arrays = []
    for suffix, ctype, values in cmsis.arrays:
        base, _, tag = ctype.partition("#")
        if suffix in shared:
            arrays.append((suffix, base, values))
        else:
            assert tag in ("", "helium"), (suffix, ctype)
            arrays.append((suffix, base + "#helium", values))
    for suffix, ctype, values in fast.arrays:
        if suffix not in shared:
            assert "#" not in ctype, (suffix, ctype)
            arrays.append((_renamed("@L_" + suffix)[3:], ctype + "#other", values))
    call = _renamed(fast.call.template)
    made = Step(cmsis.index, cmsis.node, cmsis.plan,
                Template(_either(cmsis.call.template, call)), arrays,
                list(cmsis.decls) + [_renamed(d) for d in fast.decls], cmsis.files | fast.files)
    if cmsis.banded is not None:
        made.banded = Template(_either(cmsis.banded.template, call))
    if cmsis.check is not None:
        made.check = Template(_only_helium(cmsis.check.template))
    if cmsis.banded_check is not None:
        made.banded_check = Template(_only_helium(cmsis.banded_check.template))
    helium = (cmsis.scratch_builds or {}).get("helium", 0)
    other = (fast.scratch_builds or {}).get("other", 0)
    made.scratch_builds = {"helium": helium, "other": other} if helium or other else None
    made.plan.scratch = max(helium, other)
    made.plan.overlap = merged_bands(cmsis.plan.overlap, fast.plan.overlap)
    whole = merged(cmsis.helium_tiles, (fast.plan.overlap or [None])[0])
    if whole is not None:  # the Helium call of the whole layer, and the fast kernel
        made.plan.overlap = [*(made.plan.overlap or []), whole]
    return made
