"""Precision and recall of the call graph on the feature corpus, against hand-written expectations."""

from __future__ import annotations

from pathlib import Path

from psmr_corpus_score import features, score, totals

FEATURES = {
    "argument_flow",
    "arguments",
    "assignments",
    "builtins",
    "callbacks",
    "classes",
    "classmethod_cache",
    "context_managers",
    "decorator_factories",
    "decorators",
    "dicts",
    "direct_calls",
    "dispatch",
    "dynamic",
    "dynamic_attrs",
    "exceptions",
    "external",
    "external_classes",
    "fluent",
    "functions",
    "generators",
    "imports",
    "indexing",
    "instances",
    "iterables",
    "iteration",
    "kwargs",
    "lambdas",
    "lists",
    "min_max",
    "mro",
    "nested_decorators",
    "package_root",
    "partials",
    "properties",
    "raising",
    "reassignment",
    "relative_imports",
    "returned_arguments",
    "returns",
    "super_calls",
    "unpacking",
    "variadic",
}
# The figures reached by the resolver of issue 14 (micro-averaged over all edges): 356/357 and 356/359;
# before it, on the same corpus, 0.935 (300/321) and 0.836 (300/359). The misses are the dynamic calls
# (`globals()[name]()`,
# `eval("beta()")`, `getattr(obj, "on_" + event)()`), left as unknowns; the false edge is a closure's
# read of a name its enclosing function rebinds before calling it (closures see every binding).
PRECISION_FLOOR = 0.997
RECALL_FLOOR = 0.991


def test_corpus_precision_and_recall(tmp_path: Path) -> None:
    assert {p.name for p in features()} == FEATURES
    scores = score(tmp_path)
    for feature, (tp, produced, expected) in scores.items():
        print(f"{feature:14} precision {tp}/{produced}  recall {tp}/{expected}")
    precision, recall = totals(scores)
    print(f"overall precision {precision:.3f} recall {recall:.3f}")
    assert precision >= PRECISION_FLOOR
    assert recall >= RECALL_FLOOR
    # Every feature but these is resolved exactly and must stay so.
    for feature in FEATURES - {"dynamic", "dynamic_attrs", "reassignment"}:
        tp, produced, expected = scores[feature]
        assert tp == produced == expected, feature
