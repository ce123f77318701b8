"""`python -m qconvert.cli`: the `qconvert` program."""

from qconvert.cli.app import run

run()
