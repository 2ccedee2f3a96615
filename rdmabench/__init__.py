"""rdmabench: how fast data really moves between GPUs, host memory and the nodes of a cluster.

The first lines of the user's own `rdmabench` process: the installed command imports this package
before anything else of ours (`from rdmabench.cli import main`), so the folder an empty entry of
PYTHONPATH puts on the import path (`PYTHONPATH=:/x`: the current folder) is left out here, before
numpy or any other import, and said once on stderr. rdmabench's children leave it out themselves
(pystart). What Python imports before this line (the standard library a `re.py` could shadow, this
package itself) no code of ours can guard: an empty PYTHONPATH entry in a shared folder is unsafe.
"""

from __future__ import annotations

import os as _os
import sys as _sys

__version__ = "0.1.0"


def _as_command() -> bool:
    """Whether this process is the installed `rdmabench` command: not someone's program importing the
    library (its import path is its own), not a child (pystart), not `python -m rdmabench` (which puts
    the current folder first on the path itself: docs/security.md says to start the command)."""
    return bool(_sys.argv) and _os.path.basename(_sys.argv[0]) == "rdmabench"


def _leave_out_the_working_folder() -> str | None:
    """Drop the current folder from the import path where only an empty PYTHONPATH entry put it (a
    folder PYTHONPATH names, even the current one, is kept); returns the folder dropped, if any."""
    entries = _os.environ.get("PYTHONPATH", "")
    if not entries or "" not in entries.split(_os.pathsep) or not _as_command():
        return None
    try:
        here = _os.getcwd()
    except OSError:
        return None
    named = any(entry and (entry == "." or _os.path.abspath(entry) == here) for entry in entries.split(_os.pathsep))
    if named or not any(path in ("", here) for path in _sys.path):
        return None
    _sys.path[:] = [path for path in _sys.path if path not in ("", here)]
    return here


_dropped = _leave_out_the_working_folder()
if _dropped is not None:
    from .escape import visible as _visible

    _sys.stderr.write(
        f"rdmabench: warning: PYTHONPATH has an empty entry, which puts the current folder {_visible(_dropped)} on "
        "the import path: left out (name it in PYTHONPATH to keep it)\n"
    )
