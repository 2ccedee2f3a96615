"""The command line: a thin click layer over the library, a module per command. Library errors
become one line and an exit code (group.py); options a concept shares are one group (options.py)."""

try:
    from .group import main  # each command's module is imported when the command is asked for (group.COMMANDS)
except KeyboardInterrupt:
    # Ctrl-C while click and the group load (the command's first ~0.2 s): one line and 130, as once
    # the command runs (group.OneLineErrors.main), not Python's traceback of the import.
    import sys

    from ..errors import error_line

    sys.stderr.write(error_line("aborted") + "\n")
    raise SystemExit(130) from None

__all__ = ["main"]
