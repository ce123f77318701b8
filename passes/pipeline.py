"""The fusion pipeline of `qconvert fuse`: an explicit ordered list, fusions to a fixed point.

`FUSE_PIPELINE` is the default order. Consecutive passes of `FIXED_POINT_PASSES` run as a group,
round after round, until a round changes nothing, so Conv -> Add -> Mul and Conv -> Mul -> Add
both collapse fully whatever the order of the passes within the group.
"""

from __future__ import annotations

from qconvert.ir import Model

from .registry import PassContext, get_pass, run_passes

FIXED_POINT_PASSES = ("fuse-conv-batchnorm", "fuse-conv-mul", "fuse-conv-add", "fuse-matmul-add")
FUSE_PIPELINE = ("fold-constants", "eliminate", *FIXED_POINT_PASSES, "batchnorm-to-affine",
                 *FIXED_POINT_PASSES, "fuse-activation", "eliminate")
MAX_ROUNDS = 100


def _steps(names) -> list:
    """Group consecutive fixed-point passes: ['a', ('f1', 'f2'), 'b']."""
    steps: list = []
    for name in names:
        if name in FIXED_POINT_PASSES and steps and isinstance(steps[-1], tuple):
            steps[-1] = steps[-1] + (name,)
        elif name in FIXED_POINT_PASSES:
            steps.append((name,))
        else:
            steps.append(name)
    return steps


def run_pipeline(model: Model, names=FUSE_PIPELINE, context: PassContext | None = None,
                 progress=None, after=None) -> dict:
    """Run `names` over `model` (fusion groups to a fixed point); return {pass: rewrites}.

    Counts of a pass that appears more than once are added up. `progress(name)` is called before
    each pass, `after(name, rewrites)` after it, if given (`--verify` checks the model there).
    """
    context = context or PassContext(model.format)
    for name in names:
        get_pass(name)  # unknown names fail before any work
    totals = {name: 0 for name in names}
    for step in _steps(names):
        group = step if isinstance(step, tuple) else (step,)
        for _ in range(MAX_ROUNDS if isinstance(step, tuple) else 1):
            changed = 0
            for name in group:
                if progress:
                    progress(name)
                n = run_passes(model, [name], context, keep_uses=True)[name]
                if after:
                    after(name, n)
                totals[name] += n
                changed += n
            if not changed:
                break
    for graph in model.graphs:  # the passes kept it current; code after them may not
        graph.invalidate_uses()
    return totals
