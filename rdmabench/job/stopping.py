"""How SIGINT and SIGTERM (Ctrl-C, a batch system's stop, the launcher ending a job) stop a process of
ours: once, and never while it is already ending.

One handler, installed once per process, knows the process's state, so that no switch of handlers
leaves a moment where the old one still acts:
- running: the first signal raises `Stopped`, and the handler itself marks the process ending before
  it raises: at most one `Stopped` per process, whatever the code was doing when it came;
- ending (`end()`: a failure being saved, a stop being saved, the end of a run): a signal changes
  nothing (it is only counted), so a failure's saving is never cut short by the launcher's SIGTERM
  that the failure itself brings;
- forwarding (`forward_to`: the launcher while its ranks run): each signal goes on to the ranks.

Switching the handler to SIG_IGN instead, as the job once did, raced: a signal that came just before
the switch ran the old handler inside the failure path (a traceback where one line was promised), and
one that came during it made Python print "Signal 15 ignored due to race condition"."""

from __future__ import annotations

import signal
import sys
from collections.abc import Callable
from types import FrameType

from ..errors import error_line

SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Stopped(BaseException):
    """A signal asked this process to stop (BaseException: no `except Exception` may swallow it)."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum

    @property
    def status(self) -> int:
        """The exit status a process ended by this signal shows its shell: 128 + the signal's number."""
        return 128 + self.signum


class _State:
    def __init__(self) -> None:
        self.ending = False
        self.forward: Callable[[int], None] | None = None
        self.received: list[int] = []


_STATE = _State()


def _handler(signum: int, _frame: FrameType | None) -> None:
    _STATE.received.append(signum)
    if _STATE.forward is not None:
        _STATE.forward(signum)
    elif not _STATE.ending:
        _STATE.ending = True  # before the raise: no second Stopped, wherever this one lands
        raise Stopped(signum)


def arm(signals: tuple[int, ...] = SIGNALS) -> None:
    """Install the handler: from now on the first of `signals` raises Stopped. SIGINT and SIGTERM
    are taken even where the parent ignored them (a script's background job ignores SIGINT, and a
    user's Ctrl-C forwarded to it must still stop it); SIGHUP that `nohup` ignored stays ignored."""
    for signum in signals:
        if signum == signal.SIGHUP and signal.getsignal(signum) is signal.SIG_IGN:
            continue
        signal.signal(signum, _handler)


def end(block: bool = True) -> None:
    """From here no signal interrupts this process's Python code: what it saves is saved whole.
    `block`: the signals are also blocked, so that none cuts a system call of the saving short
    (EINTR), as before an exit that follows at once and starts no other process with that mask."""
    _STATE.ending = True
    _STATE.forward = None
    if block:
        signal.pthread_sigmask(signal.SIG_BLOCK, SIGNALS)


def ending() -> bool:
    return _STATE.ending


def forward_to(send: Callable[[int], None] | None) -> None:
    """While `send` is set, every signal goes to it (the launcher's ranks) rather than stopping this
    process; None: back to stopping it, or to nothing once it is ending."""
    _STATE.forward = send


def said(stop: BaseException, command: str) -> int:
    """A command stopped by `stop` (Stopped, or KeyboardInterrupt where the handler was never armed):
    its one line on stderr, no empty line before it; returns its exit status (143 for SIGTERM, 130
    for SIGINT, as a shell shows a process the signal ended)."""
    end(block=False)
    signum = stop.signum if isinstance(stop, Stopped) else signal.SIGINT
    sys.stderr.write(error_line(f"{command} stopped by {signal.Signals(signum).name}") + "\n")
    sys.stderr.flush()
    return 128 + signum


def command_named(argv: list[str]) -> str:
    """What a stop's line names: the command (`report`), or `rdmabench` when the line has none."""
    command = next((arg for arg in argv[1:] if not arg.startswith("-")), None)
    return command if command and command.isidentifier() else "rdmabench"


def received() -> list[int]:
    """The signals received so far, in order (stopping, forwarded or ignored while ending)."""
    return list(_STATE.received)
