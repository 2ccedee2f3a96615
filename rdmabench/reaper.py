"""Removes a launcher's private directories once the launcher is gone, however it went (SIGKILL of
its whole process group included): started without site (pystart.python_module(..., bare=True)) with
the directories as arguments, it reads its standard input, which only the launcher holds open, until
end of file, then removes each DIR, trying again for a while as the ranks, stopped by their parent's
death, let go of them. It runs in its own session, so a signal to the launcher's process group does
not reach it. Standard library only: it runs without site-packages.
"""

from __future__ import annotations

import os
import shutil
import sys
import time

PATIENCE = 30.0  # seconds to keep trying while the stopping ranks still write into the directories


def reap(paths: list[str]) -> None:
    while sys.stdin.buffer.read(4096):
        pass  # the launcher never writes: this returns at end of file, when the launcher is gone
    deadline = time.monotonic() + PATIENCE
    while True:
        for path in paths:
            shutil.rmtree(path, ignore_errors=True)
        if not any(os.path.lexists(path) for path in paths) or time.monotonic() > deadline:
            return
        time.sleep(0.2)


if __name__ == "__main__":
    reap(sys.argv[1:])
