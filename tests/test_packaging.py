"""What the installed package is made of: every package directory listed in pyproject.toml (a
non-editable install, the README's first command, ships all of it); LICENSE and NOTICE in the
repository and the wheel; SPDX lines in the shipped kernels; Python 3.10+ (no 3.11-only names,
and the same bytes on the other installed interpreters); shell completion."""

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: the same parser as the tomli package
    import tomli as tomllib

from helpers.oracles import ROOT


def test_every_package_is_listed():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(config["packages"])
    dirs = {".".join(p.parent.relative_to(ROOT).parts)
            for p in (ROOT / "qconvert").rglob("__init__.py")}
    for package, folder in config["package-dir"].items():  # passes/, schemas/ and subpackages
        dirs |= {".".join((package, *p.parent.relative_to(ROOT / folder).parts))
                 for p in (ROOT / folder).rglob("__init__.py")}
    expected = dirs
    assert expected == listed


def test_license_and_notice_in_the_repository():
    assert "Apache License" in (ROOT / "LICENSE").read_text()
    assert "Version 2.0, January 2004" in (ROOT / "LICENSE").read_text()
    notice = (ROOT / "NOTICE").read_text()
    assert "TensorFlow Lite Micro" in notice and "CMSIS-NN" in notice


def test_wheel_ships_license_and_notice(tmp_path):
    """`pip wheel` of a copy of the project (the build leaves build/ behind, so not in place):
    the wheel's dist-info holds LICENSE and NOTICE, the C kernels, and the metadata names them."""
    import shutil
    import subprocess
    import sys
    import zipfile

    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE", "NOTICE"):
        shutil.copy(ROOT / name, src / name)
    for folder in ("qconvert", "passes", "schemas"):
        shutil.copytree(ROOT / folder, src / folder,
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w",
                           str(tmp_path / "dist"), str(src)], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    (wheel,) = (tmp_path / "dist").glob("qconvert-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    licenses = {n.rsplit("/", 1)[-1] for n in names if ".dist-info/" in n
                and n.rsplit("/", 1)[-1] in ("LICENSE", "NOTICE")}
    assert licenses == {"LICENSE", "NOTICE"}, names
    assert "qconvert/c_export/kernels/qconvert_nn.h" in names
    metadata = zipfile.ZipFile(wheel).read(next(n for n in names if n.endswith("METADATA")))
    assert b"Requires-Python: >=3.10" in metadata


def test_shipped_kernels_carry_an_spdx_line():
    kernels = sorted((ROOT / "qconvert" / "c_export" / "kernels").glob("*.[ch]"))
    assert kernels
    for path in kernels:
        first = path.read_text().splitlines()[0]
        assert first == "/* SPDX-License-Identifier: Apache-2.0 */", path


def test_requires_python_310_and_no_311_only_names():
    """pyproject says >=3.10, so no 3.11+ module, syntax or name in the package (the package
    was run on 3.10.13, 3.12 and 3.13 with byte-identical output; this keeps it so)."""
    import re

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["requires-python"] == ">=3.10"
    newer = re.compile(r"\bimport tomllib\b|\bfrom tomllib\b|typing\.Self\b|import .*\bSelf\b|"
                       r"except\*|\bStrEnum\b|datetime\.UTC\b|\bExceptionGroup\b|\bTaskGroup\b|"
                       r"asyncio\.timeout\b|hashlib\.file_digest|\.add_note\(|sys\.exception\(|"
                       r"itertools\.batched|contextlib\.chdir|typing\.(Never|LiteralString|"
                       r"assert_never|reveal_type|Required|NotRequired|TypeVarTuple|Unpack)\b|"
                       r"enum\.(verify|member|nonmember|global_enum)\b")
    found = []
    for folder in ("qconvert", "passes", "schemas"):
        for path in (ROOT / folder).rglob("*.py"):
            for i, line in enumerate(path.read_text().splitlines(), 1):
                if newer.search(line):
                    found.append(f"{path.relative_to(ROOT)}:{i}: {line.strip()}")
    assert not found, found


def test_shell_completion_script():
    """The README's `eval "$(_QCONVERT_COMPLETE=bash_source qconvert)"` gives a bash function,
    and completing `qconvert export` offers both export commands."""
    from click.testing import CliRunner

    from qconvert.cli.app import main

    assert '_QCONVERT_COMPLETE=bash_source qconvert' in (ROOT / "README.md").read_text()
    script = CliRunner().invoke(main, [], prog_name="qconvert",
                                env={"_QCONVERT_COMPLETE": "bash_source"})
    assert script.exit_code == 0
    assert "_qconvert_completion()" in script.output
    assert "complete -o nosort -F _qconvert_completion qconvert" in script.output
    words = CliRunner().invoke(main, [], prog_name="qconvert",
                               env={"_QCONVERT_COMPLETE": "bash_complete",
                                    "COMP_WORDS": "qconvert export", "COMP_CWORD": "1"})
    assert words.output.split() == ["plain,export-c", "plain,export-c-header"]


def _other_pythons() -> list:
    """Interpreters other than this one to check the package on: $QCONVERT_OTHER_PYTHONS
    (paths, separated by os.pathsep) and python3.10 / 3.12 / 3.13 on PATH, those that have the
    runtime dependencies installed."""
    import os
    import shutil
    import subprocess
    import sys

    found = [p for p in os.environ.get("QCONVERT_OTHER_PYTHONS", "").split(os.pathsep) if p]
    found += [shutil.which(f"python3.{minor}") for minor in (10, 12, 13)]
    usable = []
    for exe in dict.fromkeys(p for p in found if p):
        probe = subprocess.run([exe, "-c", "import sys, numpy, click, onnx, flatbuffers, tflite;"
                                "print(sys.version_info[:2] != (%d, %d))" % sys.version_info[:2]],
                               capture_output=True, text=True)
        if probe.returncode == 0 and probe.stdout.strip() == "True":
            usable.append(exe)
    return usable


def test_other_pythons_give_the_same_bytes(tmp_path):
    """On every other installed interpreter with the dependencies (3.10 is the oldest
    requires-python allows), the package installs and `quantize` + `export-c` give the bytes
    this interpreter gives."""
    import subprocess
    import sys

    import pytest

    pythons = _other_pythons()
    if not pythons:
        pytest.skip("no other Python (3.10, 3.12, 3.13) with numpy, click, onnx, flatbuffers and "
                    "tflite installed; set QCONVERT_OTHER_PYTHONS to check one")

    def outputs(exe, where):
        where.mkdir()
        site = where / "site"
        if exe != sys.executable:
            subprocess.run([exe, "-m", "pip", "install", "-q", "--no-deps", "--target",
                            str(site), str(ROOT)], check=True, capture_output=True)
        env_path = str(site) if exe != sys.executable else str(ROOT)  # this checkout's package
        script = ("import sys; sys.path.insert(0, sys.argv[1]) if sys.argv[1] else None\n"
                  "from click.testing import CliRunner\nfrom qconvert.cli import main\n"
                  "for a in (['quantize', sys.argv[2], '--calibration', sys.argv[3], '-o',"
                  " sys.argv[4] + '/q.tflite'], ['export-c', sys.argv[4] + '/q.tflite', '-o',"
                  " sys.argv[4] + '/c', '--name', 'm']):\n"
                  "    r = CliRunner().invoke(main, a)\n    assert r.exit_code == 0, r.output\n")
        subprocess.run([exe, "-c", script, env_path, str(ROOT / "sample_models/digits_cnn.onnx"),
                        str(ROOT / "sample_models/digits_calib_nchw.npy"), str(where)],
                       check=True, cwd=tmp_path)
        return [(where / name).read_bytes() for name in ("q.tflite", "c/m.c", "c/m.h")]

    mine = outputs(sys.executable, tmp_path / "this")
    for i, exe in enumerate(pythons):
        assert outputs(exe, tmp_path / f"other{i}") == mine, exe
