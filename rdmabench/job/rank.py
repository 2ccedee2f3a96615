"""What each rank runs when `rdmabench run --np N` starts the job itself: python -m rdmabench.job.rank CONFIG_JSON (as pystart starts it)."""

from __future__ import annotations

import sys

from ..errors import RdmabenchError, error_line
from .stopping import Stopped, arm


def main(argv: list[str]) -> int:
    try:
        arm()  # before the engine loads: a stop then is quiet (the launcher says it), not a traceback
        from .config import RunConfig
        from .run import run_job
        from .spawner import die_with_parent, report_in

        die_with_parent()  # the launcher's mpiexec gone (killed outright): stop, keeping what was measured
        report_in()
        try:
            config = RunConfig.from_json(argv[1])
        except (IndexError, ValueError, TypeError, RdmabenchError) as exc:
            print(error_line(f"bad rank configuration: {exc}"), file=sys.stderr)
            return 2
        return run_job(config)
    except Stopped as stop:  # before the job's own handling of a stop began (job.run.run_started)
        return stop.status


if __name__ == "__main__":
    sys.exit(main(sys.argv))
