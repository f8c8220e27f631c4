"""The order the suite's files run in: the files with the longest tests first.

xdist hands a worker its next file as it finishes one (`--dist loadfile --no-loadscope-reorder`, the
Makefile's `suite`): with the long files first, the short ones fill in at the end and both workers finish
together, instead of one running a file of minutes alone after the other has run out of files (xdist's
own order, by the number of tests, left the one-test files, the longest among them, for last).

Files of one weight keep the order pytest collected them in. `make test-slow`'s three files hold one
`slow` test each, and xdist hands each worker a second file at once while its first has two tests or
fewer left (xdist 3.8's `LoadScopeScheduling._reschedule`): the first and third files go to one worker,
the second to the other. In collection order that is the rename across rich and the burst on one, the
networkx edits (the longest) alone on the other; heaviest first would pair the networkx edits with the
rename.
"""

from __future__ import annotations

from pathlib import Path

import pytest

# The markers of the tests that hold a worker longest (minutes of PSMR on networkx, a server on
# PostgreSQL and process workers, a browser driving the UI, a Prefect server's runs), heaviest first.
HEAVIEST_FIRST = ("slow", "postgres", "browser", "prefect_server", "docker")


def _weight(item: pytest.Item) -> int:
    """The rank in HEAVIEST_FIRST of the item's heaviest marker (past the end without one)."""
    return min(
        (HEAVIEST_FIRST.index(m.name) for m in item.iter_markers() if m.name in HEAVIEST_FIRST),
        default=len(HEAVIEST_FIRST),
    )


def heaviest_files_first(items: list[pytest.Item]) -> None:
    """Order the files by their heaviest test, each file's tests kept together and in their order."""
    by_file: dict[Path, list[pytest.Item]] = {}
    for item in items:
        by_file.setdefault(item.path, []).append(item)
    # sorted() is stable: files of one weight keep the order pytest collected them in.
    ordered = sorted(by_file.values(), key=lambda tests: min(map(_weight, tests)))
    items[:] = [item for tests in ordered for item in tests]
