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

from .. import privatedirs
from ..errors import ConfigError, ResourceError, UnsafeInputError, UnsafePathError

# Set by the user, this keeps every rank's UCX log (with its protocol report) in that directory.
_LOG_DIR_ENV = "RDMABENCH_UCX_LOG_DIR"
SCRATCH_ENV = "RDMABENCH_UCX_SCRATCH"  # set by the local launcher: where the ranks' log directories go
LOG_PREFIX = "rdmabench-ucx-"  # of each rank's own log directory
_keep_logs = False


def prepare() -> str | None:
    """Route UCX's protocol report into a private log directory; return it (None if the user's own
    UCX_LOG_FILE or UCX_PROTO_INFO=n leaves rdmabench unable to see which transport UCX chose).
    UnsafePathError: $RDMABENCH_UCX_LOG_DIR is not the user's own directory."""
    if os.environ.get("UCX_PROTO_INFO", "y").lower() in ("n", "no", "0", "off"):
        return None
    if "UCX_LOG_FILE" in os.environ and _LOG_DIR_ENV not in os.environ:
        return None
    global _keep_logs
    log_dir = os.environ.get(_LOG_DIR_ENV)
    if log_dir:
        _keep_logs = True  # the user asked for the logs: leave them there
        _users_log_dir(log_dir)
    else:
        log_dir = _private_log_dir()
        os.environ[_LOG_DIR_ENV] = log_dir
    os.environ["UCX_PROTO_INFO"] = "y"
    os.environ["UCX_LOG_FILE"] = os.path.join(log_dir, "ucx.%h.%p.log")
    return log_dir


def _users_log_dir(log_dir: str) -> None:
    """$RDMABENCH_UCX_LOG_DIR, made if missing. UCX names each log by host and pid, which anyone can
    predict: the directory must be the user's own (another user's could hold links at those names)."""
    try:
        privatedirs.private_dir(log_dir)
    except UnsafePathError as exc:
        raise UnsafeInputError(f"{_LOG_DIR_ENV}: {exc}") from None
    except OSError as exc:
        raise ConfigError(f"{_LOG_DIR_ENV}: cannot make {log_dir}: {exc.strerror or exc}") from None


def _private_log_dir() -> str:
    """A new private log directory. Under `rdmabench run --np`, inside the directory the launching
    process removes at the end, whatever happened to the ranks (a rank killed outright cannot clean
    up after itself); under another launcher, in the temporary directory, named for this process so
    that a later start removes it if this process is killed."""
    scratch = os.environ.get(SCRATCH_ENV)
    if not scratch:
        privatedirs.sweep_stale(LOG_PREFIX)
    try:
        return str(privatedirs.scratch_dir(LOG_PREFIX, scratch or None))
    except OSError as exc:
        raise ResourceError(f"cannot make a private directory for UCX's logs: {exc.strerror or exc}") from None


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
