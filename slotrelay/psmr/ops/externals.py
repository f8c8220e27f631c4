"""Imports of code outside the tree: the standard library, installed packages, and the rest.

Every import of a module outside the analysed tree is an unknown of reason `external_module` (its
code is not analysed). Most are the standard library or a package installed where PSMR runs; those
are not gaps in what the analysis knows of the tree, so the headline figures (workspace.describe's
`unknown_count`, query.unknowns' default list) leave them out and count them apart, and
delta.validate does not take a new one for a broken import. An import of anything else (a typo, a
package not installed) stays an unknown like any other.

Installed packages are those the environment PSMR runs in can import, found by name on its path
(`importlib.util.find_spec` of the top-level name, which imports nothing), once per name.
"""

from __future__ import annotations

import functools
import importlib.util
import re
import sys
from typing import Any

# How graph.py words an unknown of reason `external_module`.
_OUTSIDE = re.compile(r"^(?P<module>[\w.]+) is outside the analysed tree")


@functools.cache
def _installed(top: str) -> bool:
    try:
        return importlib.util.find_spec(top) is not None
    except (ImportError, ValueError):
        return False


def origin(module: str) -> str | None:
    """`stdlib` or `installed` for a module of the standard library or of an installed
    distribution, else None."""
    top = module.split(".", 1)[0]
    if top in sys.stdlib_module_names or top in sys.builtin_module_names:
        return "stdlib"
    if top.isidentifier() and _installed(top):
        return "installed"
    return None


def import_origin(unknown: dict[str, Any]) -> str | None:
    """`stdlib` or `installed` for an unknown that is the import of such a module, else None."""
    if unknown["reason"] != "external_module":
        return None
    match = _OUTSIDE.match(unknown["detail"])
    return origin(match["module"]) if match else None


def available_import(reason: str, detail: str) -> bool:
    """True for an unknown (by reason and detail) that imports the standard library or an installed
    package."""
    return import_origin({"reason": reason, "detail": detail}) is not None
