"""How much memory this process may lock (pin): the memlock limit and the capability that lifts it."""

from __future__ import annotations

from ..units import format_size


def memlock_limit_text() -> str:
    import resource

    soft, _hard = resource.getrlimit(resource.RLIMIT_MEMLOCK)
    return "unlimited" if soft == resource.RLIM_INFINITY else format_size(soft)


_CAP_IPC_LOCK = 14  # the capability that lets a process lock memory beyond RLIMIT_MEMLOCK


def can_lock_beyond_limit() -> bool:
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("CapEff:"):
                    return bool(int(line.split()[1], 16) >> _CAP_IPC_LOCK & 1)
    except (OSError, ValueError):
        pass
    return False


def mlock_problem(nbytes: int) -> str | None:
    """Why mlock of `nbytes` would fail under this process's memlock limit, or None."""
    import resource

    soft, _hard = resource.getrlimit(resource.RLIMIT_MEMLOCK)
    if soft == resource.RLIM_INFINITY or nbytes <= soft or can_lock_beyond_limit():
        return None
    return (
        f"pinned memory without a GPU is locked with mlock: {format_size(nbytes)} per rank is more than "
        f"the memlock limit of {memlock_limit_text()} (ulimit -l); raise the limit or use smaller --sizes or --window"
    )
