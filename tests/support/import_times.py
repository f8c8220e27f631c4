"""Reading `python -X importtime`'s report: the modules a process imported."""

from __future__ import annotations

import re

# One line of the report: `import time: SELF | CUMULATIVE | MODULE`.
IMPORTED = re.compile(r"^import time:\s*\d+ \|\s*\d+ \|\s*(\S+)$", re.MULTILINE)
