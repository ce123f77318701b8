"""The import layers of qconvert, and the one home of the int8 fixed-point numerics.

Every module of the package (qconvert/, plus the top-level passes/ and schemas/ installed as
qconvert.passes and qconvert.schemas) belongs to a unit: a subpackage (qconvert.ir,
qconvert.executor, ...) or a top-level module (qconvert.cli, qconvert.errors, ...). Units sit in
layers, bottom to top (`LAYERS`); a unit may import units of its own layer or below, never
above, and there is no cycle between units, not even inside one layer. Imports inside functions
count like the others (a function-level import does not hide a dependency, it only delays it).

    foundation  qconvert (the package root), errors, dtypes, padding, schemas, allocator,
                blas_idle, json_text
    ir          the IR (graph, node, tensor)
    int8        fixed-point primitives, multipliers, TFLite Micro's Prepare parameters
    formats     readers, writers, model_io, output files, layer table
    executor    float and integer reference executors (kernels)
    passes      graph passes (fold-constants runs the executor's kernels)
    quant       calibration, the quantization plan, int8 writers; cli.input_shapes
    products    C export, cli.verify, the commands' work (cli.commands, cli.command_inputs,
                cli.route_steps, cli.routes: the route table holds the step functions), the
                commands' requests (cli.requests), the shared quantization step (cli.quantizing)
    api         the Python API (qconvert.api), filling the same requests as the command line
    cli         the command line (the rest of qconvert.cli: app, options)

A unit is a subpackage of qconvert or a loose module at its top; a module listed in LAYERS by
its full name (`qconvert.cli.routes`) is a unit of its own, apart from its package. At most
`MAX_LOOSE` modules sit loose at the top of qconvert/ (the foundation; everything else lives in
a folder named for its stage).

One import goes up by design (`FACADE`): the package root re-exports the API lazily
(`qconvert.load` imports qconvert.api on first use, PEP 562 `__getattr__`), so
`import qconvert` stays cheap; it is left out of the layer and cycle checks, and only the
root's `__getattr__` may do it (`test_facade_only_in_root_getattr`).

The tests scan the source with `ast` (nothing is imported), so they also see imports in code that
no test runs. `test_checks_catch_bad_trees` runs the same checks on small trees that break each
rule, so the checks are known to fail when they should.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

LAYERS = [
    ("foundation", {"qconvert", "qconvert.errors", "qconvert.dtypes", "qconvert.padding",
                    "qconvert.schemas", "qconvert.allocator",
                    "qconvert.blas_idle", "qconvert.json_text"}),
    ("ir", {"qconvert.ir"}),
    ("int8", {"qconvert.int8"}),
    ("formats", {"qconvert.formats"}),
    ("executor", {"qconvert.executor"}),
    ("passes", {"qconvert.passes"}),
    ("quant", {"qconvert.quant", "qconvert.cli.input_shapes"}),
    ("products", {"qconvert.c_export", "qconvert.cli.verify", "qconvert.cli.route_steps",
                  "qconvert.cli.routes", "qconvert.cli.commands", "qconvert.cli.command_inputs",
                  "qconvert.cli.requests", "qconvert.cli.quantizing"}),
    ("api", {"qconvert.api"}),
    ("cli", {"qconvert.cli"}),
]

# Known upward imports awaiting their fix, each (importing file, imported unit): the check fails
# as well when one of them no longer occurs, so the list only shrinks.
PENDING: set = set()

# Private names (a leading underscore) still imported from another module, awaiting a public
# name or a better home: (defining module, name). The check fails as well when one of them is
# no longer imported across modules, so the list only shrinks.
PENDING_PRIVATE = {
    ("qconvert.executor.float_kernels_base", "_axis"),
    ("qconvert.executor.float_kernels_base", "_fused"),
    ("qconvert.executor.float_kernels_base", "_ints"),
    ("qconvert.executor.float_kernels_base", "_layout"),
    ("qconvert.executor.streaming", "_assigned"),
    ("qconvert.passes.fusion.linear_layer", "_rule"),
    ("qconvert.quant.params", "_along"),
    ("qconvert.quant.tflite_int8", "_quant"),
}

# Modules (the package's __init__ included) allowed loose at the top of qconvert/.
MAX_LOOSE = 10

# The package root's lazy re-export of the API (see the module docstring).
FACADE = {("qconvert/__init__.py", "qconvert.api")}

# Directories of the source tree and the package each installs as.
SOURCES = {"qconvert": "qconvert", "passes": "qconvert.passes", "schemas": "qconvert.schemas"}

# The int8 primitives by the names other code would give them: defined only in qconvert/int8.
PRIMITIVE_NAME = re.compile(
    r"((s|sr)dhm|rdbpot|rdbp|mbqm)\w*|wrap(_int)?(8|16|32|64)|clz(32|64)?|sat_mul_pot"
    r"|quantize_multiplier.*|saturating_.*|rounding_(divide|half).*|multiply_by_quantized.*"
    r"|exp_on_.*|one_over_one_plus.*|one_minus_x.*|fixed_(logistic|tanh)|calculate_input_radius"
    r"|activation_range|effective_multipliers?|inv_sqrt.*|get_reciprocal|mean_multiplier"
    r"|downscale_int32.*|round_half_away")


class Module:
    """One source file: its dotted name, unit, and the qconvert modules it imports (with line)."""

    def __init__(self, root: Path, path: Path):
        self.path = path
        self.rel = path.relative_to(root).as_posix()
        top, *rest = path.relative_to(root).with_suffix("").parts
        parts = SOURCES[top].split(".") + list(rest)
        self.is_package = parts[-1] == "__init__"
        if self.is_package:
            parts = parts[:-1]
        self.name = ".".join(parts)
        self.tree = ast.parse(path.read_text(encoding="utf-8"), filename=self.rel)

    def imports(self):
        """(line, imported module name) of every import in the file, at any depth."""
        package = self.name.split(".") if self.is_package else self.name.split(".")[:-1]
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    yield node.lineno, alias.name
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package[:len(package) - (node.level - 1)]
                    module = ".".join(base + ([node.module] if node.module else []))
                else:
                    module = node.module
                yield node.lineno, module
                for alias in node.names:  # `from qconvert import schemas` imports a submodule
                    yield node.lineno, f"{module}.{alias.name}"


def scan(root: Path) -> dict:
    """{module name: Module} of every .py file under the source directories of `root`."""
    modules = {}
    for top in SOURCES:
        for path in sorted((root / top).rglob("*.py")):
            m = Module(root, path)
            modules[m.name] = m
    return modules


def unit_of(name: str, modules: dict, layers=LAYERS) -> str | None:
    """The unit of a qconvert module name (None for anything outside qconvert): the longest
    prefix listed in `layers` as a unit of its own, else its subpackage or top-level module."""
    parts = name.split(".")
    if parts[0] != "qconvert":
        return None
    if len(parts) == 1:
        return "qconvert"
    listed = {u for _, units in layers for u in units}
    for i in range(len(parts), 2, -1):
        if ".".join(parts[:i]) in listed:
            return ".".join(parts[:i])
    head = f"qconvert.{parts[1]}"
    return head if head in modules or any(n.startswith(head + ".") for n in modules) else None


def edges(modules: dict, pending=frozenset(), layers=LAYERS) -> dict:
    """{(unit, imported unit): [(file, line, imported module)]} over all imports between units,
    but those `pending` lists."""
    found: dict = {}
    for m in modules.values():
        me = unit_of(m.name, modules, layers)
        for line, name in m.imports():
            if name not in modules and ".".join(name.split(".")[:-1]) in modules:
                name = ".".join(name.split(".")[:-1])  # `from pkg import function`
            other = unit_of(name, modules, layers)
            if other is not None and other != me and (m.rel, other) not in pending:
                found.setdefault((me, other), set()).add((m.rel, line, name))
    return {key: sorted(sites) for key, sites in found.items()}


def layer_problems(modules: dict, layers=LAYERS, pending=PENDING | FACADE) -> list:
    """Units in no layer, and imports of a higher layer by a lower one (minus `pending`)."""
    level = {u: i for i, (_, units) in enumerate(layers) for u in units}
    names = [name for name, _ in layers]
    problems = []
    for m in modules.values():
        unit = unit_of(m.name, modules, layers)
        if unit not in level and m.name == unit:
            problems.append(f"{m.rel}: unit {unit} is in no layer; add it to LAYERS in "
                            "tests/test_architecture.py (below everything it imports)")
    found = edges(modules, layers=layers)
    for (a, b), sites in sorted(found.items()):
        if a not in level or b not in level or level[b] <= level[a]:
            continue
        for rel, line, name in sites:
            if (rel, b) not in pending:
                problems.append(f"{rel}:{line} imports {name}: layer {names[level[a]]} ({a}) "
                                f"must not import the higher layer {names[level[b]]} ({b})")
    used = {(rel, b) for (_, b), sites in found.items() for rel, _, _ in sites}
    for rel, b in sorted(set(pending) - used - FACADE):
        problems.append(f"{rel} no longer imports {b}: remove it from PENDING")
    return problems


def cycles(modules: dict, pending=PENDING | FACADE) -> list:
    """The strongly connected components of more than one unit, each with the imports closing
    it: [(units, [(file, line, module), ...])]; the `pending` imports left out."""
    graph: dict = {}
    found = edges(modules, pending)
    for a, b in found:
        graph.setdefault(a, set()).add(b)
        graph.setdefault(b, set())
    index: dict = {}
    low: dict = {}
    stack: list = []
    on_stack = set()
    components = []

    def visit(v):  # Tarjan; the unit graph has a few dozen nodes
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                components.append(component)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return [(sorted(c), [site for (a, b), sites in sorted(found.items())
                         if a in c and b in c for site in sites]) for c in components]


def module_cycles(modules: dict, facade=FACADE) -> list:
    """The import cycles between modules (not only units), imports inside functions counted:
    [(modules, [(file, line, module), ...])], each a strongly connected component of more than
    one module with the imports closing it. A package's `__init__` is a module like the others:
    a package whose submodules import its `__init__` while the `__init__` imports them (to fill
    a registry) is a cycle; the registry belongs in a module of its own. The `facade` imports
    (file, unit) are left out, as in `cycles`: the root's lazy re-export of the API."""
    graph: dict = {}
    sites: dict = {}
    for m in modules.values():
        graph.setdefault(m.name, set())
        for line, name in m.imports():
            if any(m.rel == rel and (name == unit or name.startswith(unit + "."))
                   for rel, unit in facade):
                continue
            if name in modules and name != m.name:
                graph[m.name].add(name)
                sites.setdefault((m.name, name), []).append((m.rel, line, name))
    index: dict = {}
    low: dict = {}
    stack: list = []
    on_stack = set()
    components = []

    def visit(v):  # Tarjan, recursive: the module graph is a few hundred nodes deep at most
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                components.append(component)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return [(sorted(c), sorted(s for (a, b), found in sites.items() if a in c and b in c
                               for s in found)) for c in components]


def private_imports(modules: dict, pending=frozenset()) -> list:
    """A problem line for each `from module import _name` of a qconvert module's private name
    by another module (a name shared across modules is public, or lives where it belongs),
    but those `pending` lists; and one for each `pending` entry no longer imported so."""
    problems = []
    seen = set()
    for m in modules.values():
        package = m.name.split(".") if m.is_package else m.name.split(".")[:-1]
        for node in ast.walk(m.tree):
            if not isinstance(node, ast.ImportFrom):
                continue
            module = node.module
            if node.level:
                base = package[:len(package) - (node.level - 1)]
                module = ".".join(base + ([node.module] if node.module else []))
            if module not in modules or module == m.name:
                continue
            for alias in node.names:
                name = alias.name
                if not name.startswith("_") or name.startswith("__") or \
                        f"{module}.{name}" in modules:  # `from pkg import _submodule`
                    continue
                seen.add((module, name))
                if (module, name) not in pending:
                    problems.append(f"{m.rel}:{node.lineno} imports the private name {name} of "
                                    f"{module}: make it public (no underscore) or move it "
                                    "where it belongs")
    problems += [f"{module}.{name} is no longer imported across modules: remove it from "
                 "PENDING_PRIVATE" for module, name in sorted(set(pending) - seen)]
    return problems


def loose_modules(modules: dict, limit=MAX_LOOSE) -> list:
    """A problem line when more than `limit` modules sit loose at the top of qconvert/ (the
    package's __init__ counted): everything past the foundation belongs in a folder."""
    loose = sorted(m.rel for m in modules.values() if m.rel.count("/") == 1
                   and m.rel.startswith("qconvert/"))
    if len(loose) <= limit:
        return []
    return [f"{len(loose)} modules loose at the top of qconvert/ (at most {limit}): "
            f"{', '.join(loose)}; move the new ones into the folder of their stage"]


def primitive_duplicates(modules: dict) -> list:
    """Functions outside qconvert.int8 named like an int8 primitive or like a public function of
    qconvert.int8's numeric and Prepare modules (leading underscores ignored)."""
    own = set()
    for m in modules.values():
        if m.name.startswith("qconvert.int8.") and m.name != "qconvert.int8.prepare.common":
            own |= {n.name for n in m.tree.body
                    if isinstance(n, ast.FunctionDef) and not n.name.startswith("_")}
    problems = []
    for m in modules.values():
        if m.name == "qconvert.int8" or m.name.startswith("qconvert.int8."):
            continue
        for n in ast.walk(m.tree):
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
                bare = n.name.lstrip("_")
                if bare in own or PRIMITIVE_NAME.fullmatch(bare):
                    problems.append(f"{m.rel}:{n.lineno} defines {n.name}: the int8 numerics "
                                    "live in qconvert/int8 only; import them from there")
    return problems


@pytest.fixture(scope="module")
def modules():
    return scan(ROOT)


def test_every_unit_in_a_layer_and_no_upward_import(modules):
    problems = layer_problems(modules)
    assert not problems, "\n".join(problems)


def test_no_import_cycle_between_units(modules):
    found = cycles(modules)
    assert not found, "\n".join(
        f"cycle between {', '.join(units)}: " + "; ".join(f"{rel}:{line} imports {name}"
                                                          for rel, line, name in sites)
        for units, sites in found)


def test_no_import_cycle_between_modules(modules):
    """No two modules import each other, directly or around a loop, counting imports inside
    functions (a function-level import delays a dependency, it does not remove it)."""
    found = module_cycles(modules)
    assert not found, "\n".join(
        f"cycle between modules {', '.join(names)}: "
        + "; ".join(f"{rel}:{line} imports {name}" for rel, line, name in sites)
        for names, sites in found)
    assert len(modules) > 100  # the scan saw the tree


def test_no_module_imports_another_modules_private_name(modules):
    problems = private_imports(modules, PENDING_PRIVATE)
    assert not problems, "\n".join(problems)


def test_at_most_ten_modules_loose_at_the_top(modules):
    problems = loose_modules(modules)
    assert not problems, "\n".join(problems)
    assert "qconvert/errors.py" in {m.rel for m in modules.values()}  # the scan sees the top


def test_facade_only_in_root_getattr(modules):
    """The upward import `FACADE` allows happens in the root's `__getattr__` only (never at
    import time), and the root imports nothing else above the foundation."""
    root = modules["qconvert"]
    getattr_fn = next(n for n in root.tree.body
                      if isinstance(n, ast.FunctionDef) and n.name == "__getattr__")
    inside = {node.lineno for node in ast.walk(getattr_fn) if hasattr(node, "lineno")}
    api_lines = [line for line, name in root.imports() if name and name.startswith("qconvert.api")]
    assert api_lines and all(line in inside for line in api_lines)
    others = {name for _, name in root.imports()} - {"qconvert.api", "qconvert.api.api"}
    assert not any(n and n.startswith("qconvert.") for n in others), others


def test_int8_numerics_defined_once(modules):
    problems = primitive_duplicates(modules)
    assert not problems, "\n".join(problems)
    assert "qconvert.int8.fixed_point" in modules and "qconvert.int8.prepare" in modules


def _tree(tmp_path, files: dict) -> dict:
    for rel, text in files.items():
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    for top in SOURCES:
        (tmp_path / top).mkdir(exist_ok=True)
    return scan(tmp_path)


def test_checks_catch_bad_trees(tmp_path):
    """Each rule, broken on purpose in a small tree, is reported naming the importing file."""
    modules = _tree(tmp_path, {
        "qconvert/__init__.py": "",
        "qconvert/errors.py": "",
        "qconvert/int8/__init__.py": "",
        "qconvert/int8/fixed_point.py": "def srdhm(a, b):\n    return a\n",
        # a function-level import of a higher layer
        "qconvert/int8/bad.py": "def f():\n    from qconvert.quant import plan\n",
        "qconvert/quant/__init__.py": "",
        "qconvert/quant/plan.py": "from ..executor import run\n",
        # executor <-> passes cycle, the upward half relative
        "qconvert/executor/__init__.py": "",
        "qconvert/executor/run.py": "from qconvert.passes import fold\n",
        "passes/__init__.py": "",
        "passes/fold.py": "from qconvert.executor import run\n"
                          "def _rdbpot(x, e):\n    return x\n",
        "qconvert/newthing.py": "import qconvert.errors\n",
    })
    problems = layer_problems(modules, pending=set())
    assert any(p.startswith("qconvert/int8/bad.py:2 imports qconvert.quant.plan") for p in problems)
    assert any(p.startswith("qconvert/executor/run.py:1 imports qconvert.passes") for p in problems)
    assert any("qconvert/newthing.py: unit qconvert.newthing is in no layer" in p for p in problems)
    assert not any(p.startswith("qconvert/quant/plan.py") for p in problems)  # downward: fine
    stale = layer_problems(modules, pending={("qconvert/quant/plan.py", "qconvert.cli")})
    assert "qconvert/quant/plan.py no longer imports qconvert.cli: remove it from PENDING" in stale
    found = cycles(modules, pending=set())
    assert [units for units, _ in found] == [["qconvert.executor", "qconvert.passes"]]
    assert [names for names, _ in module_cycles(modules)] == [
        ["qconvert.executor.run", "qconvert.passes.fold"]]
    assert ("passes/fold.py", 1, "qconvert.executor.run") in found[0][1]
    assert primitive_duplicates(modules) == [
        "passes/fold.py:2 defines _rdbpot: the int8 numerics live in qconvert/int8 only; "
        "import them from there"]
    # four loose modules (__init__, errors, newthing, and the one below) against a limit of 3
    crowded = _tree(tmp_path, {"qconvert/loose_reader.py": ""})
    assert loose_modules(crowded, limit=4) == []
    assert loose_modules(crowded, limit=3) == [
        "4 modules loose at the top of qconvert/ (at most 3): qconvert/__init__.py, "
        "qconvert/errors.py, qconvert/loose_reader.py, qconvert/newthing.py; move the new ones "
        "into the folder of their stage"]


def test_a_module_listed_apart_is_a_unit_of_its_own(tmp_path):
    """A module LAYERS lists by its full name (the route table, `qconvert.cli.routes`) is its
    own unit: a lower layer may import it, but not the rest of its package."""
    modules = _tree(tmp_path, {
        "qconvert/__init__.py": "",
        "qconvert/cli/__init__.py": "",
        "qconvert/cli/routes.py": "",
        "qconvert/cli/app.py": "from qconvert.quant import plan\nfrom . import routes\n",
        "qconvert/quant/__init__.py": "",
        "qconvert/quant/plan.py": "from qconvert.cli.routes import STAGES\n",
        "qconvert/quant/bad.py": "from qconvert.cli import app\n",
    })
    layers = [("foundation", {"qconvert", "qconvert.cli.routes"}), ("quant", {"qconvert.quant"}),
              ("cli", {"qconvert.cli"})]
    assert unit_of("qconvert.cli.routes", modules, layers) == "qconvert.cli.routes"
    assert unit_of("qconvert.cli.app", modules, layers) == "qconvert.cli"
    problems = layer_problems(modules, layers, pending=set())
    assert problems and {p.split(":")[0] for p in problems} == {"qconvert/quant/bad.py"}
    assert all("layer quant (qconvert.quant) must not import the higher layer cli" in p
               for p in problems)


def test_checks_pass_a_clean_tree(tmp_path):
    """The same checks accept a tree that keeps the rules (they are not always failing)."""
    modules = _tree(tmp_path, {
        "qconvert/__init__.py": "",
        "qconvert/int8/__init__.py": "from qconvert.errors import QConvertError\n",
        "qconvert/int8/fixed_point.py": "def srdhm(a, b):\n    return a\n",
        "qconvert/errors.py": "",
        "qconvert/executor/__init__.py": "from qconvert.int8.fixed_point import srdhm\n",
        "passes/__init__.py": "def f():\n    from qconvert.executor import x\n",
    })
    assert layer_problems(modules, pending=set()) == []
    assert cycles(modules, pending=set()) == []
    assert module_cycles(modules) == []
    assert primitive_duplicates(modules) == []


def test_module_cycle_check_sees_cycles_inside_a_unit(tmp_path):
    """Cycles the unit check cannot see, all inside qconvert.quant: a package `__init__` filling
    a registry its submodule imports back, and a loop of three modules closed by an import
    inside a function. Each is reported with the imports that close it; the modules outside
    them are not."""
    modules = _tree(tmp_path, {
        "qconvert/__init__.py": "",
        "qconvert/quant/__init__.py": "REGISTRY = {}\nfrom . import entries\n",
        "qconvert/quant/entries.py": "from . import REGISTRY\n",
        "qconvert/quant/a.py": "from .b import f\n",
        "qconvert/quant/b.py": "from .c import g\n",
        "qconvert/quant/c.py": "def g():\n    from .a import h\n",
        "qconvert/quant/d.py": "from .a import h\n",  # imports into the loop: not part of it
    })
    assert cycles(modules, pending=set()) == []  # one unit: the unit check is blind to these
    found = dict((tuple(names), sites) for names, sites in module_cycles(modules))
    assert set(found) == {("qconvert.quant", "qconvert.quant.entries"),
                          ("qconvert.quant.a", "qconvert.quant.b", "qconvert.quant.c")}
    assert ("qconvert/quant/c.py", 2, "qconvert.quant.a") in \
        found[("qconvert.quant.a", "qconvert.quant.b", "qconvert.quant.c")]
    assert ("qconvert/quant/entries.py", 1, "qconvert.quant") in \
        found[("qconvert.quant", "qconvert.quant.entries")]


def test_private_import_check_catches_a_private_name(tmp_path):
    """`from x import _y` across modules is reported (relative or absolute, in a function too);
    the same module's own use, a public name, a private submodule and a dunder are not; a
    stale pending entry is reported."""
    modules = _tree(tmp_path, {
        "qconvert/__init__.py": "",
        "qconvert/quant/__init__.py": "from . import _impl\n",
        "qconvert/quant/_impl.py": "",
        "qconvert/quant/plan.py": "def _helper():\n    pass\ndef shared():\n    pass\n"
                                  "__all__ = []\n",
        "qconvert/quant/report.py": "from .plan import shared, __all__\n"
                                    "def f():\n    from qconvert.quant.plan import _helper\n",
    })
    assert private_imports(modules) == [
        "qconvert/quant/report.py:3 imports the private name _helper of qconvert.quant.plan: "
        "make it public (no underscore) or move it where it belongs"]
    assert private_imports(modules, {("qconvert.quant.plan", "_helper")}) == []
    assert private_imports(modules, {("qconvert.quant.plan", "_helper"),
                                     ("qconvert.quant.plan", "_gone")}) == [
        "qconvert.quant.plan._gone is no longer imported across modules: remove it from "
        "PENDING_PRIVATE"]
