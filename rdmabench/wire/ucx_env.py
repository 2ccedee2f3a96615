"""UCX settings that rdmabench applies before UCX loads, and the ones it records.

UCX reads its logging options when its library is loaded, so this module must run before anything
imports ucxx (or ucp): the protocol-selection report (UCX_PROTO_INFO) goes to a per-process log file
that rdmabench parses to learn which transport carried each message.
"""

from __future__ import annotations

import ctypes
import glob
import os
import shutil
import tempfile

# Set by the user, this keeps every rank's UCX log (with its protocol report) in that directory.
_LOG_DIR_ENV = "RDMABENCH_UCX_LOG_DIR"
SCRATCH_ENV = "RDMABENCH_UCX_SCRATCH"  # set by the local launcher: where the ranks' log directories go
_keep_logs = False


def prepare() -> str | None:
    """Route UCX's protocol report into a private log directory; return it (None if the user's own
    UCX_LOG_FILE or UCX_PROTO_INFO=n leaves rdmabench unable to see which transport UCX chose)."""
    if os.environ.get("UCX_PROTO_INFO", "y").lower() in ("n", "no", "0", "off"):
        return None
    if "UCX_LOG_FILE" in os.environ and _LOG_DIR_ENV not in os.environ:
        return None
    global _keep_logs
    log_dir = os.environ.get(_LOG_DIR_ENV)
    if log_dir:
        _keep_logs = True  # the user asked for the logs: leave them there
        os.makedirs(log_dir, exist_ok=True)
    else:
        # Under `rdmabench run --np`, inside the directory the launching process removes at the end,
        # whatever happened to the ranks (a rank killed outright cannot clean up after itself).
        log_dir = tempfile.mkdtemp(prefix="rdmabench-ucx-", dir=os.environ.get(SCRATCH_ENV) or None)
        os.environ[_LOG_DIR_ENV] = log_dir
    os.environ["UCX_PROTO_INFO"] = "y"
    os.environ["UCX_LOG_FILE"] = os.path.join(log_dir, "ucx.%h.%p.log")
    return log_dir


def own_log_file(log_dir: str) -> str | None:
    matches = glob.glob(os.path.join(log_dir, f"ucx.*.{os.getpid()}.log"))
    return matches[0] if matches else None


def flush_c_streams() -> None:
    """UCX writes its log through a buffered C stream; flush every C stream so the file is current."""
    try:
        ctypes.CDLL(None).fflush(None)
    except (OSError, AttributeError):
        pass


def cleanup(log_dir: str | None) -> None:
    """Remove the log directory this process made (and the logs of the tools it ran, ucx_info among
    them, which inherit UCX_LOG_FILE); a directory the user named is left alone."""
    if log_dir and not _keep_logs:
        shutil.rmtree(log_dir, ignore_errors=True)


def forward_warnings(log_text: str) -> list[str]:
    """UCX warnings and errors from the log, which would otherwise have gone to the terminal."""
    return [line.strip() for line in log_text.splitlines() if " UCX  WARN " in line or " UCX  ERROR " in line]


_set_by_ucxx: dict[str, str] = {}


def note_import_defaults(before: dict[str, str]) -> None:
    """Remember the UCX_* defaults that importing UCXX put in the environment (they change figures,
    so results record them), and drop UCX_MEMTYPE_CACHE, which the UCX versions UCXX supports no
    longer know and would only warn about."""
    added = {k: v for k, v in os.environ.items() if k.startswith("UCX_") and k not in before}
    if "UCX_MEMTYPE_CACHE" in added:
        del os.environ["UCX_MEMTYPE_CACHE"]
        del added["UCX_MEMTYPE_CACHE"]
    _set_by_ucxx.clear()
    _set_by_ucxx.update(added)


def set_by_ucxx() -> dict[str, str]:
    return dict(_set_by_ucxx)


def recorded_settings() -> dict[str, str]:
    """Every UCX_* variable in force, minus the ones rdmabench sets for its own bookkeeping."""
    own = {"UCX_PROTO_INFO", "UCX_LOG_FILE"} if _LOG_DIR_ENV in os.environ else set()
    return {key: value for key, value in sorted(os.environ.items()) if key.startswith("UCX_") and key not in own}
