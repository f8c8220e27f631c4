"""pen_id allocation: `MPP-{persona}-{yyyymmdd}-{nnn}`, nnn counting per persona per (UTC) day.

Each id is claimed by creating a marker file with O_CREAT|O_EXCL in
`pen-ids/{persona}-{yyyymmdd}/` of the root's state folder (`slotrelay.fsio.tree_state`, never in the
root itself: CONTRACTS.md#files-the-product-writes): the file system decides which of two writers
gets a number, so ids stay unique across threads and processes without a lock. Markers are empty
and stay after an erase, so a number is never handed out twice.
"""

from __future__ import annotations

import os
import re
from datetime import UTC, datetime
from pathlib import Path

from slotrelay import fsio
from slotrelay.pen.errors import InvalidPenRequest
from slotrelay.pen.models import PERSONA_PATTERN

PEN_ID_PATTERN = r"^MPP-([A-Za-z0-9][A-Za-z0-9_.]{0,63})-(\d{8})-(\d{3,})$"


def allocate_pen_id(root: str | Path, persona_id: str, *, day: datetime | None = None) -> str:
    """Claim the next pen_id of a persona for the day.

    Parameters:
        root: the pen's root folder.
        persona_id: the persona holding the pen.
        day: the date to use (default: today, UTC).

    Returns:
        A pen_id no other writer has or will get.

    Raises:
        InvalidPenRequest: when the persona id is not a safe name.
    """
    if not re.match(PERSONA_PATTERN, persona_id):
        raise InvalidPenRequest(f"persona_id {persona_id!r} must match {PERSONA_PATTERN}")
    stamp = (day or datetime.now(UTC)).strftime("%Y%m%d")
    with fsio.open_dir(fsio.tree_state(root), f"pen-ids/{persona_id}-{stamp}", create=True) as folder:
        number = len(folder.names()) + 1
        while True:
            try:
                descriptor = os.open(
                    f"{number:03d}",
                    os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC,
                    0o644,
                    dir_fd=folder.fd,
                )
            except FileExistsError:
                number += 1
                continue
            os.close(descriptor)
            return f"MPP-{persona_id}-{stamp}-{number:03d}"


def parse_pen_id(pen_id: str) -> tuple[str, str, int]:
    """Split a pen_id into persona, date and number.

    Raises:
        InvalidPenRequest: when it does not have the seed's form.
    """
    match = re.match(PEN_ID_PATTERN, pen_id)
    if not match:
        raise InvalidPenRequest(f"pen_id {pen_id!r} is not of the form MPP-{{persona}}-{{yyyymmdd}}-{{nnn}}")
    return match.group(1), match.group(2), int(match.group(3))
