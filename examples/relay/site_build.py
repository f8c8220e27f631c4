"""The example's render step: the draft's title and body become build/index.html beside this file."""

from __future__ import annotations

import html
from pathlib import Path

HERE = Path(__file__).resolve().parent


def render(data: dict) -> dict:
    """Write build/index.html from `{"title", "body"}`; returns the page path (relative to the chain)."""
    page = HERE / "build" / "index.html"
    page.parent.mkdir(parents=True, exist_ok=True)
    page.write_text(
        f"<!doctype html>\n<title>{html.escape(data['title'])}</title>\n"
        f"<h1>{html.escape(data['title'])}</h1>\n<p>{html.escape(data.get('body', ''))}</p>\n",
        encoding="utf-8",
    )
    return {"page": str(page), "title": data["title"]}
