"""`qconvert --help` and every subcommand's `--help` show usage with an example."""

import pytest
from click.testing import CliRunner

from qconvert.cli.app import main


@pytest.mark.parametrize("args", [[]] + [[name] for name in main.commands])
def test_help_has_usage_and_example(args):
    result = CliRunner().invoke(main, args + ["--help"])
    assert result.exit_code == 0
    assert "Usage:" in result.output
    assert "Example" in result.output
    assert "qconvert " in result.output.split("Example", 1)[1]
