"""紧追-L3 feature points: what a served page shows, read the same way from the served side and from Dev.

A point is the page's title, the text or an attribute of the first element a CSS selector matches
(BeautifulSoup over the stdlib `html.parser`, selectors by soupsieve), or a response header. Texts are
compared with their whitespace collapsed, because a server or a minifier may reflow them without
changing what a reader sees; a point that is absent reads as None, so "missing on one side" is a
difference like any other.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from dataclasses import dataclass

from bs4 import BeautifulSoup, MarkupResemblesLocatorWarning

from slotrelay.chain.models import CssPoint, HeaderPoint, TitlePoint

Point = TitlePoint | CssPoint | HeaderPoint


@dataclass(frozen=True)
class PageView:
    """A page as one side serves it: its bytes and, when it was fetched over HTTP, its headers."""

    body: bytes
    headers: Mapping[str, str] | None


def describe(point: Point) -> str:
    """A short name of a point for messages and the output slot: `title`, `css h1`, `header ETag`."""
    if isinstance(point, TitlePoint):
        return "title"
    if isinstance(point, CssPoint):
        return f"css {point.selector}" + (f" @{point.attribute}" if point.attribute else "")
    return f"header {point.name}"


def _collapse(text: str | None) -> str | None:
    return None if text is None else " ".join(text.split())


def _soup(body: bytes) -> BeautifulSoup:
    # A page whose whole text looks like a file name or URL is still a page, not a path to open.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MarkupResemblesLocatorWarning)
        return BeautifulSoup(body, "html.parser")


def read_points(page: PageView, points: list[Point]) -> list[str | None]:
    """The value of every point on one side's page, in order (None where the page has none).

    Raises:
        ValueError: a header point on a page read without headers (a Dev copy from disk).
    """
    soup = _soup(page.body) if any(not isinstance(p, HeaderPoint) for p in points) else None
    values: list[str | None] = []
    for point in points:
        if isinstance(point, HeaderPoint):
            if page.headers is None:
                raise ValueError(f"{describe(point)}: this side was read from disk and has no headers")
            values.append(_collapse(page.headers.get(point.name)))
        elif isinstance(point, TitlePoint):
            assert soup is not None  # parsed above: the points are not all headers
            values.append(_collapse(soup.title.get_text()) if soup.title is not None else None)
        else:
            assert soup is not None
            element = soup.select_one(point.selector)
            if element is None:
                values.append(None)
            elif point.attribute is None:
                values.append(_collapse(element.get_text(" ")))
            else:
                value = element.get(point.attribute)
                values.append(_collapse(" ".join(value) if isinstance(value, list) else value))
    return values
