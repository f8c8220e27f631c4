"""A chain flow run's notes: each line said once, written to both the run log and the engine log.

The run log is what the Prefect UI shows; the engine log (`logs/engine.log`, slotrelay.chain.enginelog)
is what stays on disk beside the slots. `RunNotes` is the `Notes` the schedule takes
(slotrelay.chain.schedule), and what the flow's own code (arbitration, the node task) says through.
It lives with the tasks, the layer below the flows, since the node task says through it too.
"""

from __future__ import annotations

import functools
import logging
import threading
from pathlib import Path
from typing import Any

from prefect import get_run_logger

from slotrelay.chain import Chain
from slotrelay.chain.enginelog import engine_logger


class RunNotes:
    """Say a line to the current run's logger and to the chain's engine log.

    Parameters:
        chain: the chain (its `logs_dir` holds the engine log).

    Must be used inside a flow or task run (Prefect's run logger needs its context).
    """

    def __init__(self, chain: Chain) -> None:
        self.engine = _engine_logger(chain.logs_dir)

    @functools.cached_property
    def run(self) -> logging.Logger | logging.LoggerAdapter[logging.Logger]:
        """The run's logger, made when a line is first said to the run (a healthy node says none)."""
        return get_run_logger()

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


_engine_loggers: dict[Path, logging.Logger] = {}
_engine_loggers_lock = threading.Lock()


def _engine_logger(logs_dir: Path) -> logging.Logger:
    """`engine_logger` once per logs folder in this process: every node task makes its notes, and the
    engine logger resolves the log's path on the file system each time."""
    with _engine_loggers_lock:
        if logs_dir not in _engine_loggers:
            _engine_loggers[logs_dir] = engine_logger(logs_dir)
        return _engine_loggers[logs_dir]
