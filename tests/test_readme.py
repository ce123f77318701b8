"""The README's Quickstart is exactly two commands and CI runs the second one verbatim."""

import re

from helpers.oracles import ROOT


def _quickstart_commands():
    text = (ROOT / "README.md").read_text()
    section = text.split("## Quickstart", 1)[1].split("\n## ", 1)[0]
    return [line.strip() for line in section.splitlines() if re.match(r"^ {4}\S", line)]


def test_quickstart_has_two_commands_and_ci_runs_the_second():
    commands = _quickstart_commands()
    assert len(commands) == 2
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert commands[1] in ci


def test_first_command_uses_a_bundled_sample_model():
    first = _quickstart_commands()[0]
    for path in re.findall(r"sample_models/\S+", first):
        assert (ROOT / path).exists(), path
