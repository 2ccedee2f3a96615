"""The command line: a thin click layer over the library, a module per command. Library errors
become one line and an exit code (group.py); options a concept shares are one group (options.py)."""

from . import anchor, check, compare, copy, doctor, report, run, storage  # noqa: F401  (each adds its command)
from .group import main

__all__ = ["main"]
