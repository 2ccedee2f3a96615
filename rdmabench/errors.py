"""Exceptions raised by the library. The CLI turns each into one line and a non-zero exit."""

from __future__ import annotations

from .escape import visible

ERROR_PREFIX = "rdmabench: error: "


def error_line(message: str) -> str:
    """The one line every failure is reported as (job/spawner.py recognises it in the ranks' stderr): a
    name in the message (a path, a host) shows its control characters and newlines as escapes."""
    return ERROR_PREFIX + visible(message)


class RdmabenchError(Exception):
    """Base of every error a user can cause or fix; its message is a complete sentence."""

    exit_code = 1


class ConfigError(RdmabenchError):
    """A bad option value or combination, found before any rank starts."""

    exit_code = 2


class InconclusiveError(RdmabenchError):
    """A verdict or a comparison had nothing to judge (no link matched, no floor applied, too few
    distinct runs): no verdict, never a pass. Exit status 2, as bad input."""

    exit_code = 2


class ResourceError(RdmabenchError):
    """Memory, GPU or pinning not available for the requested run."""


class LaunchError(RdmabenchError):
    """The ranks could not be started, or the job they form is unusable."""


class TransportError(RdmabenchError):
    """UCX failed, or a transfer did not complete in time."""


class ValidationError(RdmabenchError):
    """A received payload differs from what the sender wrote."""


class ResultsFileError(RdmabenchError):
    """A results file cannot be written, or one that was read is not valid. Exit status 2, as bad
    input: `check`'s and `compare`'s 1 says a link failed or a regression was found, never that a
    file could not be read."""

    exit_code = 2


class ResultsWriteError(ResultsFileError):
    """Results could not be written (a full disk, say); the message says where what was measured is kept.
    Exit status 1: the run failed, its input was fine."""

    exit_code = 1


class OutputWriteError(ResultsFileError):
    """A file a command was asked to write beside its verdict (a drain list) could not be written:
    a full disk, a folder gone. Exit status 2, never a verdict's 1: nothing was judged by it."""

    exit_code = 2


class OtherDocumentError(ResultsFileError):
    """The file is another kind of rdmabench document (an anchor comparison, say), not results."""


class FileRefusedError(ConfigError, ResultsFileError):
    """A file named on the command line is not what it must be: an output that is a device, FIFO,
    directory or dangling link, or whose folder is missing, or that exists without --force; an input
    that is not a regular file or is larger than rdmabench reads. Refused before it is opened (a
    usage error: exit 2)."""


class UnsafePathError(RdmabenchError):
    """A file or directory under a shared directory (/tmp, /dev/shm, a cache) that is not this user's
    own (another user's, writable by others, or a link): refused rather than trusted."""


class UnsafeInputError(UnsafePathError, ConfigError):
    """A path the user named (an option, an RDMABENCH_* variable) that is no directory or file of
    theirs to use: bad input, exit status 2 as any other (a shared place rdmabench chose is 1)."""
