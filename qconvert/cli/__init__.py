"""The command line: click commands (`app`), their options (`options`), the requests the command
line and the Python API fill (`requests`), the routes from a model to an output (`routes`,
`route_steps`), the commands' work (`commands`, `command_inputs`, `input_shapes`, the shared
quantization step `quantizing`) and `--verify` (`verify`).

`qconvert.cli:run` is the console entry point. The package loads `app` (click and every command)
only when one of its names is asked for, so that lower layers may import the route table
(`qconvert.cli.routes`) without importing the command line.
"""

from __future__ import annotations

from importlib import import_module
from pathlib import Path


def run() -> None:
    """The `qconvert` program (see `app.run`)."""
    from .app import run as run_app

    run_app()


def __getattr__(name: str):
    """`qconvert.cli.main`, `qconvert.cli.as_program`, ...: the names of `app`, loaded on use.
    A submodule's own name is left to the import system (`from qconvert.cli import routes`
    must not load the command line)."""
    if name.startswith("__") or Path(__file__).with_name(f"{name}.py").exists():
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    app = import_module(f"{__name__}.app")
    return getattr(app, name)
