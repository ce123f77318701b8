"""Every package directory is listed in pyproject.toml, so a non-editable install (the README's
first command) ships all of it."""

import tomllib

from conftest import ROOT


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
