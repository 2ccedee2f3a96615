"""The command line: a thin click layer over the library, a module per command. Library errors
become one line and an exit code (group.py); options a concept shares are one group (options.py)."""

from .group import main  # each command's module is imported when the command is asked for (group.COMMANDS)

__all__ = ["main"]
