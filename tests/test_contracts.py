"""The code and the docs cite their rules in CONTRACTS.md, in the repository, never documents the repository
does not ship.

A comment that points at `CONTRACTS.md#anchor` must find that heading there; a pointer at a section of
the seeds ("seed 4.2", "section 十七"), an issue number or an absent DESIGN.md fails here. The docs pages,
README and the contracts themselves are held to the same: no such pointer, and every link into a contracts
file (from `docs/`, to the site page `docs/gen_reference.py` makes of it) names a heading it has.
"""

from __future__ import annotations

import re
from pathlib import Path

from docs.gen_reference import CONTRACT_PAGES

REPO = Path(__file__).resolve().parents[1]
# The shipped code: everything but the tests, the benchmarks, the docs and the virtualenv.
SKIPPED = {"tests", "bench", "docs", ".venv", "build", "site"}
OUTSIDE = re.compile(
    r"seed [0-9]|sections? [0-9一二三四五六七八九十]|issue [0-9]+|DESIGN\.md|seeds/", re.IGNORECASE
)
# In any case: prose starts sentences with a capital ("Seed 4.4 names ...").
CITED = re.compile(r"CONTRACTS\.md#([a-z0-9-]+)((?:(?:, | and )#[a-z0-9-]+)*)")
# A Markdown link: its target and, after `#`, its anchor.
LINK = re.compile(r"\]\(([^)#\s]*)(?:#([^)\s]+))?\)")
SITE_PAGES = {page: REPO / source for source, page in CONTRACT_PAGES.items()}


def code_files() -> list[Path]:
    files = []
    for path in sorted(REPO.rglob("*.py")):
        parts = path.relative_to(REPO).parts
        if not SKIPPED & set(parts) and not parts[0].startswith("."):
            files.append(path)
    return files


def doc_files() -> list[Path]:
    """The pages of the site written by hand, README, and the contracts files."""
    return [*sorted((REPO / "docs").glob("*.md")), REPO / "README.md", *SITE_PAGES.values()]


def anchors(markdown: str) -> set[str]:
    """The heading anchors GitHub and MkDocs give: lower case, punctuation dropped, spaces as hyphens."""
    headings = re.findall(r"^#+ (.+)$", markdown, flags=re.MULTILINE)
    return {re.sub(r"[^\w\- ]", "", heading.lower()).strip().replace(" ", "-") for heading in headings}


def linked_contracts(page: Path, target: str) -> Path | None:
    """The contracts file a link of `page` leads to: `page` itself for a bare `#anchor`, from `docs/` the
    file of the site page, elsewhere the path."""
    if not target:
        return page if page in SITE_PAGES.values() else None
    if page.parent == REPO / "docs":
        return SITE_PAGES.get(target)
    path = (page.parent / target).resolve()
    return path if path in SITE_PAGES.values() else None


def lines_matching(pattern: re.Pattern[str], files: list[Path]) -> list[str]:
    """`file:line: text` of every line of `files` that `pattern` finds something in."""
    return [
        f"{path.relative_to(REPO)}:{number}: {line.strip()}"
        for path in files
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if pattern.search(line)
    ]


def test_no_code_points_at_documents_outside_the_repository() -> None:
    found = lines_matching(OUTSIDE, code_files())
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


def test_no_page_points_at_documents_outside_the_repository() -> None:
    found = lines_matching(OUTSIDE, doc_files())
    assert not found, "link the rule (contracts.md#<rule> from docs/) instead:\n" + "\n".join(found)


def test_every_link_into_the_contracts_names_one_of_their_headings() -> None:
    missing = []
    for page in doc_files():
        for target, anchor in LINK.findall(page.read_text()):
            contracts = linked_contracts(page, target)
            if contracts is not None and anchor and anchor not in anchors(contracts.read_text()):
                missing.append(f"{page.relative_to(REPO)}: {target}#{anchor}")
    assert not missing, "no such heading:\n" + "\n".join(missing)


def test_every_link_of_readme_and_the_contracts_leads_to_a_file_of_the_repository() -> None:
    """The site build checks the links of `docs/`; these files are read on GitHub too."""
    broken = [
        f"{page.relative_to(REPO)}: {target}"
        for page in [REPO / "README.md", *SITE_PAGES.values()]
        for target, _ in LINK.findall(page.read_text())
        if target and "://" not in target and not (page.parent / target).exists()
    ]
    assert not broken, "\n".join(broken)
