"""The engine log: one format and no stat per line, rotation by size as RotatingFileHandler's (5 MB x 5)."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from slotrelay.chain import enginelog
from slotrelay.chain.enginelog import CheckedRotatingFileHandler, engine_logger


class CountingFormatter(logging.Formatter):
    calls = 0

    def format(self, record: logging.LogRecord) -> str:
        CountingFormatter.calls += 1
        return super().format(record)


def test_a_line_is_formatted_once_and_the_file_is_not_statted(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    logger = engine_logger(tmp_path / "logs")
    handler = next(h for h in logger.handlers if isinstance(h, CheckedRotatingFileHandler))
    handler.setFormatter(CountingFormatter("%(message)s"))
    stats: list[object] = []
    real_stat = os.stat
    monkeypatch.setattr(os, "stat", lambda *a, **k: stats.append(a) or real_stat(*a, **k))
    CountingFormatter.calls = 0
    for n in range(10):
        logger.info("line %d", n)
    assert CountingFormatter.calls == 10, "each line formatted once"
    assert stats == [], "no stat of the log file per line"
    monkeypatch.undo()
    handler.close()
    logger.removeHandler(handler)
    assert (tmp_path / "logs" / "engine.log").read_text().splitlines() == [f"line {n}" for n in range(10)]


def test_the_log_rotates_by_size_keeping_its_backups(tmp_path: Path) -> None:
    assert (enginelog.MAX_BYTES, enginelog.BACKUP_COUNT) == (5 * 1024 * 1024, 5)
    path = tmp_path / "engine.log"
    path.write_text("x" * 50 + "\n")  # what an earlier process wrote counts toward the size
    handler = CheckedRotatingFileHandler(path, maxBytes=100, backupCount=2, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(message)s"))
    logger = logging.getLogger(f"test.enginelog.{tmp_path}")
    logger.propagate = False
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    lines = [f"line {n:02d} é" + "-" * 20 for n in range(12)]  # 32 bytes with its newline: three a file
    try:
        for line in lines:
            logger.info(line)
    finally:
        handler.close()
        logger.removeHandler(handler)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["engine.log", "engine.log.1", "engine.log.2"]
    assert all(p.stat().st_size < 100 for p in tmp_path.iterdir()), "no file reaches maxBytes"
    kept = [line for name in ("engine.log.2", "engine.log.1", "engine.log")
            for line in (tmp_path / name).read_text(encoding="utf-8").splitlines()]
    assert kept == lines[4:], "the newest lines, in order; the oldest dropped with the backups past two"
