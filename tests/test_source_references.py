"""Docstrings and comments name only files and modules that exist: the layout move renamed many
modules (qconvert/cli.py -> qconvert/cli/app.py, model_steps_extra -> the *_steps families,
passes/layout/ -> passes/onnx_to_tflite/), and prose that still names the old homes sends a
reader nowhere.

Scanned: the docstrings and comments of every .py under qconvert/, passes/, schemas/, tools/,
bench/ and tests/, and the comments of the C kernels (qconvert/c_export/kernels/*.c, *.h). Found in
them and checked, by reading files only (nothing of the project is imported):

- repository paths, `qconvert/x/y.py`, `passes/fusion/`, `tests/helpers/oracles.py`,
  `bench/x.py`, `docs/x.md#anchor`, `qconvert/executor/int_kernels_*.py`: a file or folder
  under the repository root matches (the resolver of tests/test_docs.py,
  tests/helpers/repo_refs.py; `docs/commands/NAME.md`: an upper-case placeholder; folders
  .gitignore names, `bench/out/`, hold what runs write and are not checked);
- paths inside a folder (`c_export/model/steps.py`, `kernels/qconvert_nn.h`): the end of the
  path of a file or folder of the repository;
- dotted module names, `qconvert.cli.routes`, `passes.fusion`, `qconvert.passes.matcher`,
  possibly ending in a name the module defines (`qconvert.c_export.model.lowering.LOWERINGS`)
  or in `.py`;
  in backquotes also from a module or package of ours (`c_export.model.memory_plan`,
  `routes.ROUTES`), unless it starts with a parameter of the function documented or an IR
  object's name (`node.inputs`);
- bare file names (`memory_plan.py`): some file of the repository has the name;
- the names of modules that no longer exist anywhere (`RETIRED`, the old names of the layout
  move), as words.

tests/ is scanned too, but for the two files whose docstrings show made-up references on
purpose (`EXAMPLES`); a path into tests/ named from anywhere is checked like any other.
`test_checks_fail_on_planted_references` runs the scan on a small tree with one bad reference
of each kind, so the checks are known to fail when they should.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from fnmatch import fnmatch
from pathlib import Path

from helpers.oracles import ROOT
from helpers.repo_refs import (TOP_FOLDERS, bare_file_found, expand_braces, module_found,
                               path_found)

SCANNED = ("qconvert", "passes", "schemas", "tools", "bench", "tests")
C_KERNELS = "qconvert/c_export/kernels"

# Modules the layout move (issue 25) renamed or split: the names exist nowhere now.
RETIRED = ("cli_options", "model_steps", "model_steps_extra", "model_steps_fast",
           "model_steps_s16", "model_source", "steps_extra", "onnx_to_tflite_ops",
           "onnx_to_tflite_math", "onnx_to_tflite_spatial", "onnx_to_tflite_lstm")

# Files whose docstrings show made-up references on purpose (the examples of what is checked).
EXAMPLES = {"tests/test_source_references.py", "tests/helpers/repo_refs.py"}

_TOP = "|".join(TOP_FOLDERS)
# A path that starts at a top-level folder: `qconvert/x/y.py`, `passes/fusion/`, `docs/x.md#a`.
TOP_PATH = re.compile(rf"(?<![\w./-])((?:{_TOP})/[\w./*{{}},#-]*[\w*}}/])")
# A path of a file inside some folder, `c_export/model/steps.py` (a file name needed: prose says
# "int8/int16").
INNER_PATH = re.compile(r"(?<![\w./-])((?:[A-Za-z_][\w{},*]*/)+[\w*{},]+\.(?:py|md|c|h))\b")
DOTTED = re.compile(r"(?<![\w./-])((?:qconvert|passes|schemas)(?:\.[A-Za-z_]\w*)+)")
# A backquoted dotted name that starts at a module or package of ours (`c_export.source`,
# `fusion.rsqrt`, `routes.ROUTES`), relative to any folder holding one of that name.
# (The IR's modules share their names with the objects prose talks about: `node.inputs`.)
OBJECTS = ("graph", "node", "tensor", "model")
INNER_DOTTED = re.compile(r"`([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+)`")
BARE = re.compile(r"(?<![\w./-])([A-Za-z_][\w*]*\.py)\b")
RETIRED_WORD = re.compile(rf"(?<![\w./-])({'|'.join(RETIRED)})(?![\w-]|\.(?:py|c|h|md)\b)")


# -- the prose of a file: (line, text, parameter names) -------------------------------------------
def python_prose(text: str) -> list:
    """Comments and docstrings (module, class, function) of Python source: (first line, text,
    the parameter names of the function a docstring documents: `fusion.name` there is no
    module)."""
    prose = [(token.start[0], token.string, ()) for token in
             tokenize.generate_tokens(io.StringIO(text).readline)
             if token.type == tokenize.COMMENT]
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) \
                and node.body and isinstance(node.body[0], ast.Expr) \
                and isinstance(node.body[0].value, ast.Constant) \
                and isinstance(node.body[0].value.value, str):
            args = getattr(node, "args", None)
            params = tuple(a.arg for a in ast.walk(args) if isinstance(a, ast.arg)) if args else ()
            prose.append((node.body[0].lineno, node.body[0].value.value, params))
    return prose


C_COMMENT = re.compile(r"/\*.*?\*/|//[^\n]*", re.S)


def c_prose(text: str) -> list:
    """The comments of C source (block and line), with their first line."""
    return [(text.count("\n", 0, match.start()) + 1, match.group(), ())
            for match in C_COMMENT.finditer(text)]


def scanned_files(root: Path) -> list:
    """The .py files of the scanned folders and the C kernels, in a stable order."""
    files = [p for folder in SCANNED for p in sorted((root / folder).rglob("*.py"))]
    kernels = root / C_KERNELS
    files += sorted(p for p in kernels.glob("*") if p.suffix in (".c", ".h"))
    return [p for p in files if p.relative_to(root).as_posix() not in EXAMPLES]


def output_folders(root: Path) -> tuple:
    """The folders .gitignore names by path (`bench/out/`): what is written there is made by a
    run, not a file of the repository."""
    ignore = root / ".gitignore"
    lines = ignore.read_text().splitlines() if ignore.exists() else []
    return tuple(line.strip("/") + "/" for line in lines
                 if "/" in line.strip("/") and line.endswith("/"))


# -- the check: files -> problems -----------------------------------------------------------------
def inner_path_found(named: str, paths: list, folders: set) -> bool:
    """A path inside some folder (`c_export/model/steps.py`, `kernels/qconvert_nn.h`) that ends
    the path of a file or folder of the repository (paths: every one, relative to its root). A
    C path whose first folder is no folder of ours (`Source/ConvolutionFunctions/*.c` of
    CMSIS-NN) names no file of ours."""
    if named.endswith((".c", ".h")) and named.split("/", 1)[0] not in folders:
        return True
    return all(any(fnmatch(path, alternative) or fnmatch(path, "*/" + alternative)
                   for path in paths) for alternative in expand_braces(named.rstrip(".,;:")))


def reference_problems(files: list, root: Path) -> list:
    """"file:line: `reference` ..." for every reference in the prose of files that names no
    existing file, folder, module or module attribute."""
    everything = [p for p in root.rglob("*")
                  if not any(part.startswith(".") for part in p.relative_to(root).parts)]
    file_names = {p.name for p in everything if p.is_file()}
    folders = {p.name for p in everything if p.is_dir()}
    paths = [p.relative_to(root).as_posix() for p in everything]
    outputs = output_folders(root)
    homes = {}  # module or package name -> the folders holding it, in the scanned folders
    for module in everything:
        if module.suffix == ".py" and module.relative_to(root).parts[0] in SCANNED[:3]:
            name = module.parent.name if module.name == "__init__.py" else module.stem
            folder = module.parent.parent if module.name == "__init__.py" else module.parent
            if name not in ("qconvert", "passes", "schemas"):
                homes.setdefault(name, set()).add(folder)
    problems = []
    for path in files:
        text = path.read_text()
        prose = python_prose(text) if path.suffix == ".py" else c_prose(text)
        where = path.relative_to(root)
        for line, chunk, params in prose:
            def report(match, what):
                at = line + chunk.count("\n", 0, match.start())
                problems.append(f"{where}:{at}: `{match.group(1)}` {what}")

            top_spans = []
            for match in TOP_PATH.finditer(chunk):
                top_spans.append(match.span(1))
                if not match.group(1).startswith(outputs) and not path_found(root, match.group(1)):
                    report(match, "does not exist")
            for match in INNER_PATH.finditer(chunk):
                inside = any(a <= match.start(1) < b for a, b in top_spans)
                if not inside and not inner_path_found(match.group(1), paths, folders):
                    report(match, "does not exist")
            for match in DOTTED.finditer(chunk):
                if not module_found(root, match.group(1).removesuffix(".py")):
                    report(match, "is no module or module attribute")
            for match in INNER_DOTTED.finditer(chunk):
                first = match.group(1).split(".", 1)[0]
                if first in homes and first not in params + OBJECTS \
                        and not match.group(1).endswith(".py") \
                        and not any(module_found(folder, match.group(1))
                                    for folder in homes[first]):
                    report(match, "is no module or module attribute")
            for match in BARE.finditer(chunk):
                if not bare_file_found(file_names, match.group(1)):
                    report(match, "is no file of the repository")
            for match in RETIRED_WORD.finditer(chunk):
                report(match, "is an old module name (moved or split by the layout move)")
    return problems


# -- the real files -------------------------------------------------------------------------------
def test_sources_name_only_existing_files_and_modules():
    files = scanned_files(ROOT)
    assert len(files) > 250 and any(p.suffix == ".c" for p in files)
    problems = reference_problems(files, ROOT)
    assert problems == [], "\n".join(problems)


# -- the checks fail on a planted tree ------------------------------------------------------------
def test_checks_fail_on_planted_references(tmp_path):
    (tmp_path / "qconvert" / "cli").mkdir(parents=True)
    (tmp_path / "qconvert" / "__init__.py").write_text("")
    (tmp_path / "qconvert" / "cli" / "__init__.py").write_text("")
    (tmp_path / "qconvert" / "cli" / "routes.py").write_text("ROUTES = {}\n\nclass Route:\n"
                                                             "    def run(self): pass\n")
    (tmp_path / "passes" / "fusion").mkdir(parents=True)
    for name in ("__init__.py", "fusion/__init__.py", "fusion/conv_mul.py"):
        (tmp_path / "passes" / name).write_text("")
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "verify.md").write_text("")
    (tmp_path / "qconvert" / "c_export" / "kernels").mkdir(parents=True)
    good = ("`qconvert/cli/routes.py`, passes/fusion/, passes/fusion/conv_*.py, "
            "docs/verify.md#x, qconvert.cli.routes.ROUTES, qconvert.cli.routes.Route.run, "
            "qconvert.passes.fusion.conv_mul, passes.fusion, cli/routes.py, routes.py, "
            "passes/fusion/{conv_mul,conv_*}.py, model_steps_extras_like, `routes.ROUTES`, "
            "`fusion.conv_mul`, `cli.routes.Route`, `node.inputs`, qconvert.cli.routes.py, "
            "kernels/k.c")
    bad = ("qconvert/cli.py, passes/layout/, docs/gone.md#x, qconvert.cli_options, "
           "qconvert.cli.routes.STEPS, qconvert.cli.routes.Route.walk, c_export/header.py, "
           "model_source.py, see model_steps_extra, passes/fusion/{conv_mul,rsqrt}.py, "
           "`routes.STEPS`, `fusion.rsqrt`, model_steps_fast.conv_bands")
    module = tmp_path / "qconvert" / "cli" / "app.py"
    module.write_text(f'"""{good}"""\n\n# {bad}\nX = "qconvert/strings_are_not_prose.py"\n\n\n'
                      'def f(routes):\n    """`routes.STEPS`: a parameter\'s field."""\n')
    kernel = tmp_path / "qconvert" / "c_export" / "kernels" / "k.c"
    kernel.write_text("/* see qconvert/c_export/model_steps.py\n   and docs/verify.md */\n"
                      "int x; // passes/gone.py\nconst char *s = \"qconvert/code_is_not.py\";\n")
    files = scanned_files(tmp_path)
    assert module in files and kernel in files
    assert reference_problems(files, tmp_path) == [
        "qconvert/cli/app.py:3: `qconvert/cli.py` does not exist",
        "qconvert/cli/app.py:3: `passes/layout/` does not exist",
        "qconvert/cli/app.py:3: `docs/gone.md#x` does not exist",
        "qconvert/cli/app.py:3: `passes/fusion/{conv_mul,rsqrt}.py` does not exist",
        "qconvert/cli/app.py:3: `c_export/header.py` does not exist",
        "qconvert/cli/app.py:3: `qconvert.cli_options` is no module or module attribute",
        "qconvert/cli/app.py:3: `qconvert.cli.routes.STEPS` is no module or module attribute",
        "qconvert/cli/app.py:3: `qconvert.cli.routes.Route.walk` is no module or module "
        "attribute",
        "qconvert/cli/app.py:3: `routes.STEPS` is no module or module attribute",
        "qconvert/cli/app.py:3: `fusion.rsqrt` is no module or module attribute",
        "qconvert/cli/app.py:3: `model_source.py` is no file of the repository",
        "qconvert/cli/app.py:3: `model_steps_extra` is an old module name (moved or split by "
        "the layout move)",
        "qconvert/cli/app.py:3: `model_steps_fast` is an old module name (moved or split by "
        "the layout move)",
        "qconvert/c_export/kernels/k.c:1: `qconvert/c_export/model_steps.py` does not exist",
        "qconvert/c_export/kernels/k.c:3: `passes/gone.py` does not exist",
    ]
