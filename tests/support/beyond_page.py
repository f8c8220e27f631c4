"""The "Beyond one machine" page (docs/beyond.md) and the commands it shows, as the tests that run them
use them; tests/scale/test_readme_beyond.py checks that the page shows these very commands."""

from __future__ import annotations

from pathlib import Path

PAGE = Path(__file__).resolve().parents[2] / "docs" / "beyond.md"
# A server on PostgreSQL, and a run against it (test_postgres_server, with its cluster, port and chain).
README_UP = "slotrelay up --database {database} CHAIN.json"
README_RUN = "PREFECT_API_URL={api} slotrelay run CHAIN.json --json"
# The sandbox on a remote Docker daemon (test_remote_sandbox, against the test's second daemon).
REMOTE_BUILD = "slotrelay sandbox build --lang python"
REMOTE_RUN = "slotrelay sandbox run hello.py --json"
# The blocks registered with a Prefect server (test_blocks).
REGISTER = "prefect block register -m blocks"
