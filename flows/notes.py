"""A chain flow run's notes: each line said once, written to both the run log and the engine log.

The run log is what the Prefect UI shows; the engine log (`logs/engine.log`, slotrelay.enginelog)
is what stays on disk beside the slots. `RunNotes` is the `Notes` the schedule takes
(slotrelay.chain.schedule), and what the flow's own code (arbitration, the node task) says through.
"""

from __future__ import annotations

import logging
from typing import Any

from prefect import get_run_logger

from slotrelay.chain import Chain
from slotrelay.enginelog import engine_logger


class RunNotes:
    """Say a line to the current run's logger and to the chain's engine log.

    Parameters:
        chain: the chain (its `logs_dir` holds the engine log).

    Must be made inside a flow or task run (Prefect's run logger needs its context).
    """

    def __init__(self, chain: Chain) -> None:
        self.run = get_run_logger()
        self.engine = engine_logger(chain.logs_dir)

    def debug(self, msg: str, *args: Any) -> None:
        """What happens on every node of a healthy run (a node completed, a route fired): the engine log
        keeps it at INFO, the run log does not, which saves an API log line per node."""
        self.engine.info(msg, *args)

    def _say(self, level: int, msg: str, *args: Any) -> None:
        self.run.log(level, msg, *args)
        self.engine.log(level, msg, *args)

    def info(self, msg: str, *args: Any) -> None:
        self._say(logging.INFO, msg, *args)

    def warning(self, msg: str, *args: Any) -> None:
        self._say(logging.WARNING, msg, *args)

    def error(self, msg: str, *args: Any) -> None:
        self._say(logging.ERROR, msg, *args)
