"""The command line: a thin click layer over the library, a module per command. Library errors
become one line and an exit code (group.py); options a concept shares are one group (options.py)."""

import os as _os
import sys as _sys

from ..job import stopping as _stopping

if _sys.argv and _os.path.basename(_sys.argv[0]) in ("rdmabench", "__main__.py"):
    # The command itself (not a program importing the library): from its first line, SIGTERM and
    # Ctrl-C stop it with one line and 143 or 130 (group.stopped), also while click loads (~0.2 s).
    _stopping.arm()

try:
    from .group import main  # each command's module is imported when the command is asked for (group.COMMANDS)
except (KeyboardInterrupt, _stopping.Stopped) as _stop:
    # Stopped while click and the group load: one line, as once the command runs, not Python's
    # traceback of the import.
    raise SystemExit(_stopping.said(_stop, _stopping.command_named(_sys.argv))) from None

__all__ = ["main"]
