"""Drawing documents from a JSON Schema with hypothesis-jsonschema, each sub-schema's strategy built once.

hypothesis-jsonschema builds the strategy of an object's member each time it draws one: it resolves and
canonicalises the member's schema, merges it with the patterns that match, and wraps objects in an
`@st.composite` (which parses the library's own source). For schemas of nested objects that is most of
a fuzz test's CPU. What it builds depends only on the schema, the alphabet and the custom formats, so
building each once and drawing from it again draws the same documents.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from hypothesis_jsonschema import _from_schema

# The library's builder, which it calls for every sub-schema (a module global: patching it reaches them).
BUILDER = "__from_schema"


@contextmanager
def strategies_built_once() -> Iterator[None]:
    """While open, hypothesis-jsonschema builds the strategy of a given (sub-)schema once."""
    build = getattr(_from_schema, BUILDER)
    built: dict[tuple[str, int, int], tuple[Any, Any, Any]] = {}

    def once(schema: Any, *, alphabet: Any, custom_formats: Any) -> Any:
        key = (json.dumps(schema, sort_keys=True), id(alphabet), id(custom_formats))
        if key not in built:
            # The alphabet and formats are kept with the strategy so that their ids stay theirs.
            built[key] = (
                build(schema, alphabet=alphabet, custom_formats=custom_formats),
                alphabet,
                custom_formats,
            )
        return built[key][0]

    setattr(_from_schema, BUILDER, once)
    try:
        yield
    finally:
        setattr(_from_schema, BUILDER, build)
