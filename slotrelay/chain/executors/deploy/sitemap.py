"""The sitemap a deploy keeps (sitemaps.org protocol 0.9), read and written with xml.etree.

A page gets one `<url>` whose `<loc>` is its absolute URL and whose `<lastmod>` is the deploy's time;
a page already listed is updated in place, never listed twice. Everything else in the file (other
entries, `changefreq`, `priority`, extension elements) is kept as it was. A file that does not parse,
is not a `<urlset>` of that namespace, has a `<url>` without `<loc>`, lists a `<loc>` twice or would
exceed the protocol's 50,000 URLs is refused with `SitemapInvalid`, and nothing is written.
"""

from __future__ import annotations

import io
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from datetime import datetime

NAMESPACE = "http://www.sitemaps.org/schemas/sitemap/0.9"
MAX_URLS = 50_000
_URLSET = f"{{{NAMESPACE}}}urlset"
_URL = f"{{{NAMESPACE}}}url"
_LOC = f"{{{NAMESPACE}}}loc"
_LASTMOD = f"{{{NAMESPACE}}}lastmod"


class SitemapInvalid(ValueError):
    """A sitemap that cannot be read or kept as the protocol says; the message says why."""


@dataclass
class SitemapUpdate:
    """The new sitemap and what changed in it.

    Attributes:
        content: the whole new file (UTF-8 XML with its declaration).
        added: `<loc>`s of pages the sitemap did not list before.
        updated: `<loc>`s of pages it listed, whose `lastmod` was set.
    """

    content: bytes
    added: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)


def _parse(existing: bytes | None) -> ET.Element:
    if existing is None or not existing.strip():
        return ET.Element(_URLSET)
    try:
        root = ET.fromstring(existing)
    except ET.ParseError as bad:
        raise SitemapInvalid(f"not well-formed XML: {bad}") from None
    if root.tag != _URLSET:
        raise SitemapInvalid(f"the root element is {root.tag}, not <urlset> in the namespace {NAMESPACE}")
    return root


def _entries(root: ET.Element) -> dict[str, ET.Element]:
    entries: dict[str, ET.Element] = {}
    for number, entry in enumerate(root.iter(_URL), start=1):
        loc = entry.find(_LOC)
        text = (loc.text or "").strip() if loc is not None else ""
        if not text:
            raise SitemapInvalid(f"<url> number {number} has no <loc>")
        if text in entries:
            raise SitemapInvalid(f"<loc>{text}</loc> is listed twice")
        entries[text] = entry
    return entries


def update_sitemap(existing: bytes | None, locs: list[str], *, lastmod: datetime) -> SitemapUpdate:
    """Add or update one `<url>` per page.

    Parameters:
        existing: the current sitemap file's bytes (None or empty: a new sitemap).
        locs: the absolute URLs of the deployed pages, in deploy order.
        lastmod: when they were deployed (timezone-aware; written in W3C Datetime form).

    Returns:
        The new file and the `<loc>`s added and updated.

    Raises:
        SitemapInvalid: the existing file cannot be kept (see the module docstring).
    """
    root = _parse(existing)
    entries = _entries(root)
    stamp = lastmod.isoformat(timespec="seconds")
    update = SitemapUpdate(content=b"")
    for loc in dict.fromkeys(locs):
        entry = entries.get(loc)
        if entry is None:
            entry = ET.SubElement(root, _URL)
            ET.SubElement(entry, _LOC).text = loc
            entries[loc] = entry
            update.added.append(loc)
        else:
            update.updated.append(loc)
        modified = entry.find(_LASTMOD)
        if modified is None:
            # The protocol orders loc, lastmod, changefreq, priority: lastmod goes right after loc.
            children = list(entry)
            modified = ET.Element(_LASTMOD)
            loc_element = entry.find(_LOC)
            assert loc_element is not None  # every entry is indexed by its <loc>
            entry.insert(children.index(loc_element) + 1, modified)
        modified.text = stamp
    if len(entries) > MAX_URLS:
        raise SitemapInvalid(f"{len(entries)} URLs: the protocol allows at most {MAX_URLS} in one sitemap")
    ET.register_namespace("", NAMESPACE)
    ET.indent(root)
    buffer = io.BytesIO()
    ET.ElementTree(root).write(buffer, encoding="UTF-8", xml_declaration=True)
    update.content = buffer.getvalue() + b"\n"
    return update


def listed_locs(content: bytes) -> list[str]:
    """The `<loc>`s a sitemap lists, in file order.

    Raises:
        SitemapInvalid: as `update_sitemap`.
    """
    return list(_entries(_parse(content)))
