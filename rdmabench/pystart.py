"""The one way rdmabench starts Python: every process of this interpreter that it starts (the ranks,
the anchors' inner runs, the NIXL ends, the reaper, the benchmarks' runs) is built here.

`python -m MODULE` and `python SCRIPT` put the current folder (or the script's folder) first on the
import path, before the installation: a `rdmabench/` package or a `numpy.py` that another user left
in a shared working folder (/tmp, a project scratch) would run as the user in every rank. `-P`
avoids that only from Python 3.11, and `-I` also drops PYTHONPATH, which the GPU machines' carried
wheels and the test suite rely on. So the child runs a line of code (`-c`) that first removes that
entry and then runs the module as `-m` would: the import path is the installation's, plus
PYTHONPATH's folders as the user set them (less its empty entries, which mean the current folder).
"""

from __future__ import annotations

import os
import sys

# Before anything is imported (sys and posix are built in): sys.path[0], the current folder for
# `-c`, goes (unless -P / PYTHONSAFEPATH, 3.11+, left it out), and so does the current folder where
# only an empty PYTHONPATH entry put it (`PYTHONPATH=$PYTHONPATH:/x` with nothing set before), not
# where PYTHONPATH names it. One line of statements: the launchers pass it through untouched.
_PATH = "; ".join(
    [
        "import sys, posix",
        "p = sys.path",
        "c = posix.getcwd() if posix.access('.', 0) else ''",
        "e = posix.environ.get(b'PYTHONPATH', b'').decode(sys.getfilesystemencoding(), 'surrogateescape')",
        "k = any(x.rstrip('/') == c or x == '.' for x in e.split(':') if x)",
        "p[:] = [x for x in (p if getattr(sys.flags, 'safe_path', 0) else p[1:]) if x and (k or x != c)]",
        "",
    ]
)
# Then as `-m` would: argv is [MODULE, ARGS...] (`--root DIR` first: DIR, the folder that holds this
# rdmabench, goes first on the path, for a child without site-packages).
_BOOT = _PATH + (
    "a = sys.argv; del a[0]; root = a[0] == '--root'; p[:0] = a[1:2] if root else []; a[:] = a[2:] if root else a; "
    "__import__('runpy')._run_module_as_main(a[0])"
)


def installation_root() -> str:
    """The folder that holds the rdmabench package this process runs."""
    return os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def python_module(module: str, *args: str, bare: bool = False) -> list[str]:
    """The argv of `python -m MODULE ARGS` with this interpreter, importing only from the
    installation (and PYTHONPATH). `bare`: without site (-S), standard library and rdmabench only."""
    if bare:
        return [sys.executable, "-S", "-c", _BOOT, "--root", installation_root(), module, *args]
    return [sys.executable, "-c", _BOOT, module, *args]


def python_code(code: str) -> list[str]:
    """The argv of `python -c CODE`, the current folder left off the import path first."""
    return [sys.executable, "-c", _PATH + code]
