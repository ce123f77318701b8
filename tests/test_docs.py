"""The documentation agrees with the code: every option of every command is on its page with its
default and its help text, no page lists an option its command lacks, the generated op matrix
(docs/ops.md) is current, every relative link in README.md and docs/ resolves, and the README
stays a README (at most 300 lines, a row and a page for every command).

Each check is a function returning its problems (empty when consistent); the tests run it on
the real files and again on a broken copy, so none can pass vacuously.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import click
import pytest

from helpers.oracles import ROOT
from helpers.repo_refs import bare_file_found, path_found
from qconvert.cli import main

_spec = importlib.util.spec_from_file_location("gen_docs", ROOT / "tools" / "gen_docs.py")
gen_docs = importlib.util.module_from_spec(_spec)
sys.modules["gen_docs"] = gen_docs
_spec.loader.exec_module(gen_docs)

DOC_FILES = [ROOT / "README.md", ROOT / "CHANGELOG.md", *sorted((ROOT / "docs").rglob("*.md"))]


# -- checks: text -> problems ---------------------------------------------------------------------
def option_rows(page: str) -> dict:
    """{option name: (default cell, help cell)} of a command page's option table: every
    `--name` / `-x` spelled in the first cell of a row between the options markers."""
    if gen_docs.OPTIONS_BEGIN not in page:
        return {}
    block = page.split(gen_docs.OPTIONS_BEGIN, 1)[1].split(gen_docs.OPTIONS_END, 1)[0]
    rows = {}
    for line in block.splitlines():
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]]
        if len(cells) != 3 or not cells[0].startswith("`-"):
            continue
        spelled = cells[0].strip("`")
        for name in re.findall(r"(?:^|[ ,/])(--?[a-z0-9][a-z0-9-]*)", spelled):
            rows[name] = (cells[1].strip("`"), cells[2])
    return rows


def expected_default(param: click.Option) -> str:
    """The default as the page must show it, from click's own parameter (not the generator)."""
    if param.is_flag and param.secondary_opts:
        return param.opts[0] if param.default else param.secondary_opts[0]
    if param.is_flag:
        return "off"
    shown = param.get_default(click.Context(click.Command("x")), call=False)
    return "-" if shown is None or param.multiple or "Sentinel" in repr(shown) else str(shown)


def option_problems(command_name: str, command: click.Command, page: str) -> list:
    """Options missing from the page, listed with another default or help, or listed but not
    taken by the command."""
    rows = option_rows(page)
    problems, known = [], set()
    for param in command.params:
        if not isinstance(param, click.Option) or "--help" in param.opts:
            continue
        names = param.opts + param.secondary_opts
        known.update(names)
        for name in names:
            if name not in rows:
                problems.append(f"{command_name}: {name} is not on its page")
                continue
            default, help_text = rows[name]
            if default != expected_default(param):
                problems.append(f"{command_name}: {name} default {default!r} on the page, "
                                f"{expected_default(param)!r} in the command")
            if " ".join((param.help or "").split()) != help_text.replace("\\|", "|"):
                problems.append(f"{command_name}: {name}: the page's text is not its --help")
    problems += [f"{command_name}: the page lists {name}, which the command does not take"
                 for name in rows if name not in known]
    return problems


LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def link_problems(files: list, root: Path) -> list:
    """Relative links (not http(s), mailto or a bare #anchor) that name no existing file."""
    problems = []
    for path in files:
        text = re.sub(r"```.*?```", "", path.read_text(), flags=re.S)
        for target in LINK.findall(text):
            if re.match(r"^[a-z]+:", target) or target.startswith("#"):
                continue
            file_part = target.split("#", 1)[0]
            if not (path.parent / file_part).resolve().exists():
                problems.append(f"{path.relative_to(root)}: link {target} resolves to nothing")
            elif not (path.parent / file_part).resolve().is_relative_to(root):
                problems.append(f"{path.relative_to(root)}: link {target} leaves the repository")
    return problems


PATH = re.compile(r"`((?:qconvert|passes|schemas|tests|bench|tools|sample_models)/[^`\s]*)`")


BARE_FILE = re.compile(r"`([a-z][\w*]*\.py)`")  # (C file names are often generated: kws.c)


def path_problems(files: list, root: Path) -> list:
    """Repository paths named in backquotes (`qconvert/int8/rounding.py`, `passes/fusion/`,
    `qconvert/executor/int_kernels_*.py`) that match no file or folder, and bare module names
    (`memory_plan.py`) that no file of the repository has: the docs name
    only modules that exist (the resolver is tests/helpers/repo_refs.py, shared with
    tests/test_source_references.py)."""
    problems = []
    names = {p.name for p in root.rglob("*.py")}
    for path in files:
        text = path.read_text()
        for bare in BARE_FILE.findall(text):
            if not bare_file_found(names, bare):
                problems.append(f"{path.relative_to(root)}: `{bare}` does not exist")
        for named in PATH.findall(text):
            if not path_found(root, named):
                problems.append(f"{path.relative_to(root)}: `{named}` does not exist")
    return problems


def readme_problems(readme: str, command_names: list) -> list:
    """The README is at most 300 lines and its command table links every command's page."""
    problems = []
    if len(readme.splitlines()) > 300:
        problems.append(f"README.md has {len(readme.splitlines())} lines (at most 300)")
    for name in command_names:
        if f"(docs/commands/{name}.md)" not in readme or f"`qconvert {name} " not in readme:
            problems.append(f"README.md's command table has no row linking {name}'s page")
    return problems


# -- the real files -------------------------------------------------------------------------------
@pytest.mark.parametrize("name", sorted(main.commands))
def test_every_option_is_on_its_command_page(name):
    page = ROOT / "docs" / "commands" / f"{name}.md"
    assert page.exists(), f"{name} has no page docs/commands/{name}.md"
    assert option_problems(name, main.commands[name], page.read_text()) == []


def test_generated_docs_are_current():
    """docs/ops.md and the option tables equal what tools/gen_docs.py makes from the code."""
    stale = [str(p.relative_to(ROOT)) for p in gen_docs.stale_files()]
    assert stale == [], f"stale: {stale}; run python tools/gen_docs.py"


def test_ops_page_has_a_row_per_schema_op():
    from qconvert import schemas

    text = (ROOT / "docs" / "ops.md").read_text()
    for schema in schemas.all_schemas():
        assert re.search(rf"^\| {schema.name} \|", text, re.M), schema.name


def test_cmsis_nn_column_reads_the_lowering():
    """The ops the matrix says go to CMSIS-NN are the ones `lower_cmsis` dispatches on, among
    them the layers CMSIS-NN is known for."""
    from qconvert.c_export.model import cmsis_lowering

    ops = gen_docs.ops_compared_in(cmsis_lowering.lower_cmsis)
    assert {"Conv2D", "DepthwiseConv2D", "FullyConnected", "AveragePool", "MaxPool", "Add",
            "Mul", "Softmax"} <= ops


def test_relative_links_resolve():
    assert link_problems(DOC_FILES, ROOT) == []


def test_module_paths_in_the_docs_exist():
    assert path_problems(DOC_FILES, ROOT) == []


def test_readme_is_short_and_links_every_command():
    assert readme_problems((ROOT / "README.md").read_text(), sorted(main.commands)) == []


# -- the checks fail on broken copies -------------------------------------------------------------
def test_option_check_fails_on_a_missing_an_extra_and_a_wrong_option():
    page = (ROOT / "docs" / "commands" / "quantize.md").read_text()
    command = main.commands["quantize"]
    missing = re.sub(r"^\| `--batch-size N` .*\n", "", page, flags=re.M)
    assert any("--batch-size is not on its page" in p
               for p in option_problems("quantize", command, missing))
    extra = page.replace(gen_docs.OPTIONS_END,
                         "| `--turbo` | `off` | Go faster. |\n" + gen_docs.OPTIONS_END)
    assert any("--turbo, which the command does not take" in p
               for p in option_problems("quantize", command, extra))
    wrong_default = page.replace("| `--batch-size N` | `16` |", "| `--batch-size N` | `32` |")
    assert any("--batch-size default '32'" in p
               for p in option_problems("quantize", command, wrong_default))
    wrong_help = page.replace("Calibration samples run through", "Samples run through")
    assert any("--batch-size: the page's text is not its --help" in p
               for p in option_problems("quantize", command, wrong_help))


def test_generated_pages_go_stale_when_the_code_changes(monkeypatch):
    monkeypatch.setattr(main.commands["inspect"].params[-1], "help", "Print something else.")
    assert ROOT / "docs" / "commands" / "inspect.md" in gen_docs.stale_files()


def test_link_check_fails_on_a_broken_link(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "ok.md").write_text("x")
    page = tmp_path / "docs" / "page.md"
    page.write_text("[fine](ok.md#part) [web](https://example.com) [top](#x) "
                    "[gone](missing.md) [outside](../../elsewhere.md)")
    problems = link_problems([page], tmp_path)
    assert len(problems) == 2 and "missing.md" in problems[0] and "elsewhere" in problems[1]


def test_path_check_fails_on_a_module_that_does_not_exist(tmp_path):
    (tmp_path / "passes" / "fusion").mkdir(parents=True)
    (tmp_path / "passes" / "fusion" / "conv_mul.py").write_text("")
    page = tmp_path / "page.md"
    page.write_text("`passes/fusion/conv_mul.py`, `passes/fusion/conv_*.py`, `passes/fusion/`, "
                    "`passes/fusion/fuse_linear.py`, `qconvert/gone_*.py`, `conv_mul.py`, "
                    "`model_steps_extra.py`")
    assert path_problems([page], tmp_path) == [
        "page.md: `model_steps_extra.py` does not exist",
        "page.md: `passes/fusion/fuse_linear.py` does not exist",
        "page.md: `qconvert/gone_*.py` does not exist"]


def test_readme_check_fails_when_long_or_missing_a_command():
    readme = (ROOT / "README.md").read_text()
    assert readme_problems(readme + "\n" * 300, ["inspect"])[0].startswith("README.md has")
    assert readme_problems(readme, ["frobnicate"]) == [
        "README.md's command table has no row linking frobnicate's page"]
