"""Whether a file, folder or module that a text names exists in the repository: the one resolver
of tests/test_docs.py (the docs) and tests/test_source_references.py (docstrings and comments).

Only files are read (nothing of the project is imported), so a reference is checked the same way
whether or not the code it names would import here.
"""

from __future__ import annotations

import ast
import re
from functools import lru_cache
from pathlib import Path

# Top-level folders a repository path starts with, and the packages the installed names map to.
TOP_FOLDERS = ("qconvert", "passes", "schemas", "tests", "bench", "tools", "docs",
               "sample_models")
INSTALLED_AS = {"qconvert.passes": "passes", "qconvert.schemas": "schemas"}


def expand_braces(pattern: str) -> list:
    """`passes/fusion/{conv_mul,conv_add}.py` -> both paths (shell-style braces, not nested)."""
    match = re.search(r"\{([^{}]*)\}", pattern)
    if not match:
        return [pattern]
    head, tail = pattern[:match.start()], pattern[match.end():]
    return [path for part in match.group(1).split(",")
            for path in expand_braces(head + part + tail)]


def path_found(root: Path, named: str) -> bool:
    """A repository path (`qconvert/int8/rounding.py`, `passes/fusion/`,
    `qconvert/executor/int_kernels_*.py`, `docs/verify.md#anchor`, `docs/commands/NAME.md`: an
    upper-case name is a placeholder) that matches a file or folder under root; every
    alternative of a brace pattern must."""
    clean = named.split("#", 1)[0].rstrip(".,;:")
    clean = re.sub(r"(?<![\w*])[A-Z][A-Z0-9_]*(?![\w*])", "*", clean)  # NAME.md: a placeholder
    for path in expand_braces(clean):
        if "*" in path:
            if not any(root.glob(path)):
                return False
        elif not (root / path).exists():
            return False
    return True


def bare_file_found(file_names: set, bare: str) -> bool:
    """A bare file name (`memory_plan.py`, `int_kernels_*.py`) that some file of the repository
    has (file_names: the names of every file there)."""
    return any(Path(name).match(bare) for name in file_names)


@lru_cache(maxsize=None)
def _top_level_names(path: Path) -> frozenset:
    """The names a module defines or imports at its top level, the names its classes define
    (as `Class.name`), and, in a lazy facade (a PEP 562 `__getattr__`), the names it spells
    and, in a package's facade, the names of the package's modules (`qconvert.cli.main` is
    `qconvert.cli.app.main`, loaded on use)."""
    tree = ast.parse(path.read_text())
    names = set()

    def bind(target):
        for node in ast.walk(target):
            if isinstance(node, ast.Name):
                names.add(node.id)

    body = list(tree.body)
    while body:
        node = body.pop(0)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names.add(node.name)
        elif isinstance(node, ast.ClassDef):
            names.add(node.name)
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    names.add(f"{node.name}.{item.name}")
                elif isinstance(item, (ast.Assign, ast.AnnAssign)):
                    for target in getattr(item, "targets", [getattr(item, "target", None)]):
                        if isinstance(target, ast.Name):
                            names.add(f"{node.name}.{target.id}")
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            for target in getattr(node, "targets", [getattr(node, "target", None)]):
                bind(target)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
        elif isinstance(node, (ast.If, ast.Try, ast.With, ast.For)):
            body += node.body + getattr(node, "orelse", []) + getattr(node, "finalbody", [])
            body += [n for handler in getattr(node, "handlers", []) for n in handler.body]
    if "__getattr__" in names:  # a lazy facade: the names it spells, and its package's names
        names.update(node.value for node in ast.walk(tree) if isinstance(node, ast.Constant)
                     and isinstance(node.value, str) and node.value.isidentifier())
        if path.name == "__init__.py":
            for sibling in [*path.parent.glob("*.py"), *path.parent.glob("*/__init__.py")]:
                if sibling != path:
                    names.update(_top_level_names(sibling))
    return frozenset(names)


def _module_file(root: Path, parts: list):
    """The file of a module given as path parts under root (x/y.py or x/y/__init__.py)."""
    base = root.joinpath(*parts)
    for candidate in (base.with_name(base.name + ".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def module_found(root: Path, dotted: str) -> bool:
    """A dotted name (`qconvert.cli.routes`, `passes.fusion`, `qconvert.passes.matcher`,
    `qconvert.c_export.model.lowering.LOWERINGS`, `qconvert.ir.Graph.verify`) that is a module
    under root, or a module followed by a name it defines (one level into a class). The names
    installed elsewhere (qconvert.passes -> passes/) are read from their folders."""
    parts = dotted.rstrip(".").split(".")
    for prefix, folder in INSTALLED_AS.items():
        if dotted == prefix or dotted.startswith(prefix + "."):
            parts = [folder] + parts[2:]
    for cut in range(len(parts), 0, -1):
        module = _module_file(root, parts[:cut])
        if module is None:
            continue
        rest = parts[cut:]
        if not rest:
            return True
        names = _top_level_names(module)
        return rest[0] in names and (len(rest) == 1 or ".".join(rest[:2]) in names
                                     or len(rest) > 2 or _attribute_of_import(names, rest))
    return False


def _attribute_of_import(names: frozenset, rest: list) -> bool:
    """`module.Imported.attr` where the module only imports `Imported`: accepted (the
    attribute lives in another module, which a second reference would name)."""
    return not any(name.startswith(rest[0] + ".") for name in names)
