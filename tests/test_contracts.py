"""The code cites its rules in CONTRACTS.md, in the repository, never documents the repository does not ship.

A comment that points at `CONTRACTS.md#anchor` must find that heading there; a pointer at a section of
the seeds ("seed 4.2", "section 十七"), an issue number or an absent DESIGN.md fails here.
"""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# The shipped code: everything but the tests, the benchmarks, the docs and the virtualenv.
SKIPPED = {"tests", "bench", "docs", ".venv", "build", "site"}
OUTSIDE = re.compile(r"seed [0-9]|sections? [0-9一二三四五六七八九十]|issue [0-9]+|DESIGN\.md|seeds/")
CITED = re.compile(r"CONTRACTS\.md#([a-z0-9-]+)((?:(?:, | and )#[a-z0-9-]+)*)")


def code_files() -> list[Path]:
    files = []
    for path in sorted(REPO.rglob("*.py")):
        parts = path.relative_to(REPO).parts
        if not SKIPPED & set(parts) and not parts[0].startswith("."):
            files.append(path)
    return files


def anchors(markdown: str) -> set[str]:
    """The heading anchors GitHub and MkDocs give: lower case, punctuation dropped, spaces as hyphens."""
    headings = re.findall(r"^#+ (.+)$", markdown, flags=re.MULTILINE)
    return {re.sub(r"[^\w\- ]", "", heading.lower()).strip().replace(" ", "-") for heading in headings}


def test_no_code_points_at_documents_outside_the_repository() -> None:
    found = [
        f"{path.relative_to(REPO)}:{number}: {line.strip()}"
        for path in code_files()
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if OUTSIDE.search(line)
    ]
    assert not found, "cite CONTRACTS.md#<rule> instead:\n" + "\n".join(found)


def test_every_cited_contract_is_a_heading_of_contracts_md() -> None:
    known = anchors((REPO / "CONTRACTS.md").read_text())
    missing = [
        f"{path.relative_to(REPO)}: #{anchor}"
        for path in code_files()
        for first, more in CITED.findall(path.read_text())
        for anchor in [first, *re.findall(r"#([a-z0-9-]+)", more)]
        if anchor not in known
    ]
    assert not missing, "CONTRACTS.md has no such heading:\n" + "\n".join(missing)
