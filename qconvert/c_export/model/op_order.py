"""The execution order of `export-c`'s layers, chosen to lower the arena where branches allow.

    order, plan = plan_in_best_order(sizes, plan_steps, graph_inputs, graph_outputs)

Every tensor is written once, so any topological order of the steps (each after the producers
of what it reads) computes the same outputs; where the graph branches (residual adds, concats,
multi-output layers) the order decides which tensors are alive together. Candidates: the
graph's own order, a greedy order that runs next the ready step growing the live bytes least
(freeing the most), and a depth-first one that finishes the branch it is in before starting
another. Each is planned (`memory_plan.plan_memory`, whole-layer calls) and the smallest arena
wins; the graph's order on ties, so a model without branches keeps its order. A graph with a
step marked `pinned` (effects beyond its tensors, e.g. resource variables), a step writing no
tensor or a tensor written by two steps keeps the graph's order.
"""

from __future__ import annotations

from .memory_plan import plan_memory


def plan_in_best_order(sizes, steps, graph_inputs, graph_outputs, bands=None) -> tuple:
    """(order: step positions in execution order, the plan of the steps in that order)."""
    best = None
    for order in candidate_orders(sizes, steps, graph_inputs, graph_outputs):
        ordered = [steps[i] for i in order]
        plan = plan_memory(sizes, ordered, graph_inputs, graph_outputs, bands=set())
        if best is None or plan.arena_size < best[1]:
            best = (order, plan.arena_size)
    order = best[0]
    plan = plan_memory(sizes, [steps[i] for i in order], graph_inputs, graph_outputs,
                       bands=bands)
    return order, plan


def candidate_orders(sizes, steps, graph_inputs, graph_outputs) -> list:
    """Distinct topological orders to try, the graph's own first."""
    original = list(range(len(steps)))
    if any(getattr(s, "pinned", False) or not s.outputs for s in steps):
        return [original]  # effects beyond the tensors: the graph's order only
    written = [t for s in steps for t in s.outputs]
    if len(written) != len(set(written)):
        return [original]  # a tensor written twice (state): its order is not the tensors'

    deps, readers = _dependencies(steps)
    out = [original]
    for order in (_greedy(sizes, steps, deps, readers, graph_outputs),
                  _depth_first(steps, deps)):
        if order not in out:
            out.append(order)
    return out


def _dependencies(steps) -> tuple:
    """({step: steps it waits for}, {tensor: steps reading it})."""
    producer = {}
    for i, s in enumerate(steps):
        for t in s.outputs:
            producer[t] = i
    deps, readers = [], {}
    for i, s in enumerate(steps):
        deps.append({producer[t] for t in s.inputs if t in producer})
        for t in s.inputs:
            readers.setdefault(t, set()).add(i)
    return deps, readers


def _roots(steps) -> dict:
    root = {}
    for s in steps:
        for t in s.inputs + s.outputs:
            root.setdefault(t, t)
        if s.alias:
            root[s.outputs[0]] = root[s.inputs[0]]
    return root


def _greedy(sizes, steps, deps, readers, graph_outputs) -> list:
    """Next: the ready step whose run adds the fewest live bytes (new outputs minus the inputs
    it frees); the lowest index on ties."""
    root = _roots(steps)
    pending = {}  # root buffer -> steps still to read one of its names
    for t, rs in readers.items():
        pending.setdefault(root[t], set()).update(rs)
    kept = {root.get(t, t) for t in graph_outputs}
    done, order = set(), []
    waiting = [set(d) for d in deps]
    while len(order) < len(steps):
        ready = [i for i in range(len(steps)) if i not in done and not waiting[i]]

        def growth(i):
            s = steps[i]
            born = 0 if s.alias else sum(int(sizes.get(t, 0)) for t in s.outputs)
            freed = sum(int(sizes.get(r, 0)) for r in {root[t] for t in s.inputs}
                        if r not in kept and pending.get(r, set()) <= {i}
                        and not (s.alias and r == root[s.outputs[0]]))
            return (born - freed, i)

        nxt = min(ready, key=growth)
        order.append(nxt)
        done.add(nxt)
        for r in {root[t] for t in steps[nxt].inputs}:
            pending.get(r, set()).discard(nxt)
        for j in range(len(steps)):
            waiting[j].discard(nxt)
    return order


def _depth_first(steps, deps) -> list:
    """Next: a ready step reading what the last step wrote (finish a branch first), else the
    ready step of lowest index."""
    done, order = set(), []
    waiting = [set(d) for d in deps]
    last = None
    while len(order) < len(steps):
        ready = [i for i in range(len(steps)) if i not in done and not waiting[i]]
        follow = [i for i in ready if last is not None
                  and set(steps[i].inputs) & set(steps[last].outputs)]
        nxt = min(follow or ready)
        order.append(nxt)
        done.add(nxt)
        last = nxt
        for j in range(len(steps)):
            waiting[j].discard(nxt)
    return order
