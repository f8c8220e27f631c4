"""The one table that maps PSMR operations to MCP tools, with everything a model reads about them.

Each `ToolSpec` names the tool, the core operation it calls (`slotrelay.psmr.api.call`), a
description written for a model (what comes back, when to use it instead of its siblings, how to
continue a truncated answer) and the overrides that turn the operation's request schema (owned by
`slotrelay.psmr.operators.OPERATIONS`) into a tool input schema: every parameter described, every
number bounded, defaults that fit a model's context. The server applies those defaults itself, so
what `tools/list` advertises is what a call gets.

Invariant: a tool's input schema is never looser than its operation's request schema; the core
validates the request again, so the MCP layer can only narrow what reaches it.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from slotrelay.psmr import envelope
from slotrelay.psmr.errors import ERROR_CODES
from slotrelay.psmr.operators import DEFAULT_RELATIONS, OPERATIONS, RELATIONS

BUILD_TOOL = "psmr_workspace_build"

# Budgets a model's context can hold (about 10k tokens of JSON by default); the core's own defaults
# are sized for programs, not prompts. The maxima stay far below the core's dump ceiling.
MCP_BUDGET_DEFAULTS: dict[str, int] = {
    "max_nodes": 200,
    "max_edges": 500,
    "max_evidence_items": 50,
    "max_text_bytes": 40_000,
}
MCP_BUDGET_MAXIMA: dict[str, int] = {
    "max_nodes": 2_000,
    "max_edges": 6_000,
    "max_evidence_items": 500,
    "max_text_bytes": 400_000,
}
_BUDGET_WORDS = {
    "max_nodes": "nodes (and other non-edge items: matches, unknowns, findings, ...) per answer",
    "max_edges": "edges per answer",
    "max_evidence_items": "evidence records per answer",
    "max_text_bytes": "bytes of the whole answer as sent (its JSON text)",
}

CONTINUE_HINT = (
    "If the answer has `continuation.truncated: true`, call again with the same arguments plus "
    "`continuation_token` from the answer to get the next page, or narrow the query instead."
)

WORKSPACE_ID = {
    "description": (
        "The workspace to read (`ws_` + hex). Optional when the server serves exactly one workspace "
        "(it is the default); otherwise required: psmr_workspace_describe without arguments lists them."
    ),
}
TARGET = (
    "A semantic identity as returned by psmr_query_search (`semantic:pkg.mod.Class.method`) or the "
    "dotted name (`pkg.mod.Class.method`)."
)
SCOPE = ("Only results inside this symbol or module (a semantic identity or dotted name); "
         "omit for the whole workspace.")


def _budget_schema(base: dict[str, Any]) -> dict[str, Any]:
    schema = copy.deepcopy(base)
    schema["description"] = (
        "Limits on this answer. Past any limit the answer is cut at a stable point and "
        "says `continuation.truncated: true`; nothing is dropped silently. Omitted limits take the "
        "defaults shown."
    )
    for name, prop in schema["properties"].items():
        prop.update(
            description=f"At most this many {_BUDGET_WORDS[name]}.",
            maximum=MCP_BUDGET_MAXIMA[name],
            default=MCP_BUDGET_DEFAULTS[name],
        )
    return schema


PAGING = {
    "continuation_token": {
        "description": (
            "Opaque token from a truncated answer (`continuation.continuation_token`). Resend the "
            "original arguments unchanged with only this added (the budget may differ) to get the "
            "next page; a token from another query or an older build is refused with INVALID_QUERY."
        ),
        "maxLength": 4096,
    },
}


@dataclass(frozen=True)
class ToolSpec:
    """One MCP tool: its name, the operation behind it and what a model is told about it.

    Parameters:
        name: the tool name (`psmr_*`).
        operation: the core operation in `OPERATIONS` it calls; None for the build tool.
        title: a short human-readable title.
        description: the model-facing description.
        overrides: per-parameter schema members merged over the operation's request schema.
        read_only: False for tools that write anything, a record in the store included (the build,
            propose, validate, preview, apply, run tests, rebuild, roundtrip, review).
        destructive: True for the tools that write source files or run code (apply, run tests).
        idempotent: False where calling twice does more than once (a fresh delta, a second run).
    """

    name: str
    operation: str | None
    title: str
    description: str
    overrides: dict[str, dict[str, Any]] = field(default_factory=dict)
    read_only: bool = True
    destructive: bool = False
    idempotent: bool = True


TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec(
        "psmr_workspace_describe",
        "workspace.describe",
        "Describe a PSMR workspace",
        "Start here. Returns what one workspace holds: artifact, graph and contract types, the "
        "operators available, how many unknowns and conflicts it has, plus `served_workspaces`: every "
        "workspace this server serves, with its root folder. Without `workspace_id` on a server that "
        "serves several workspaces it only lists them, so you can pick one. Cheap. "
        f"Next: psmr_query_search to find a symbol's semantic identity. {CONTINUE_HINT}",
    ),
    ToolSpec(
        "psmr_operator_list",
        "operator.list",
        "List PSMR operators",
        "Returns the analysis operators this runtime offers, each with a one-line description, "
        "optionally only those taking one input type (e.g. `graph:cisg`). Use it before assuming an "
        f"operation exists; the psmr_* tools are the usual way to run them. {CONTINUE_HINT}",
        overrides={
            "filter": {
                "description": "Only operators that take this input type.",
                "properties": {
                    "input_type": {
                        "description": "An input type such as `graph:cisg`, `workspace`, `evidence`.",
                        "maxLength": 100,
                    }
                },
            },
        },
    ),
    ToolSpec(
        "psmr_operator_describe",
        "operator.describe",
        "Describe one PSMR operator",
        "Returns one operator's contract: its request JSON Schema (every field, e.g. the delta operations "
        "and their fields), output, required capabilities, side effects, determinism, cache behaviour and "
        "an example request; for query.subgraph, the relations it walks. Use it before a call whose "
        f"fields you are unsure of; psmr_operator_list names the operators. {CONTINUE_HINT}",
        overrides={
            "operator": {
                "description": "An operator name from psmr_operator_list, e.g. `delta.propose`.",
                "maxLength": 100,
            },
        },
    ),
    ToolSpec(
        "psmr_query_search",
        "query.search",
        "Search the workspace for semantic identities",
        "Finds objects by case-insensitive substring and returns their semantic identities "
        "(`semantic:pkg.mod.func`), kind and file, in a stable order. Use it to turn a name you know "
        "into the identity the other tools take. For relations around a hit use psmr_query_subgraph; "
        f"for findings, motifs or contracts there are dedicated tools. {CONTINUE_HINT}",
        overrides={
            "text": {
                "description": "Case-insensitive substring of the name or path; empty lists everything "
                "of the kind (paged).",
                "maxLength": 200,
            },
            "kind": {
                "description": "What to search: symbols (functions, classes, methods, modules), files, "
                "motifs, findings, contracts, state (globals and attributes), effects, boundaries or "
                "artifacts.",
                "default": "symbol",
            },
        },
    ),
    ToolSpec(
        "psmr_query_subgraph",
        "query.subgraph",
        "Slice the semantic graph around an anchor",
        "Returns the semantic slice around one anchor: nodes, edges, contracts, the "
        "unknowns and conflicts inside it, and provenance, following only the relations you name up "
        "to `depth` hops. Use it to see what a function calls, what calls it, and which state it "
        "reads or writes; the unknowns in the slice are the places the graph is incomplete, so do not "
        "fill them in by guessing. For what a change would affect use psmr_impact instead; for the "
        f"source spans behind edges use psmr_query_evidence with the ids in `evidence_refs`. {CONTINUE_HINT}",
        overrides={
            "anchor": {
                "description": "Where the slice starts.",
                "properties": {
                    "kind": {"description": "What `value` names: a symbol, a file path, or a state region."},
                    "value": {
                        "description": "For `symbol`: a semantic identity or dotted name; for `file`: a "
                        "path relative to the workspace root; for `state`: the dotted name "
                        "of a global or attribute.",
                        "maxLength": 500,
                    },
                },
            },
            "relations": {
                "description": "Edge kinds to follow; each has an inverse that walks it backwards "
                "(`called_by`, `read_by`, `written_by`, `imported_by`, `inherited_by`, `overridden_by`, "
                "`decorated_by`, `tested_by`, `defined_by`). Edges are always shown forward.",
                "uniqueItems": True,
                "maxItems": len(RELATIONS),
                "default": DEFAULT_RELATIONS,
            },
            "depth": {"description": "How many hops from the anchor.", "maximum": 5, "default": 2},
            "include_evidence": {
                "description": "true adds the evidence records of the slice's edges (costs budget); "
                "false lists only their ids in `evidence_refs`.",
                "default": False,
            },
            "infer": {"default": False},
            "projection": {
                "description": "`graph`: the full slice; `callgraph`: the same slice with only its `calls` "
                               "edges.",
                "enum": ["graph", "callgraph"],
                "default": "graph",
            },
        },
    ),
    ToolSpec(
        "psmr_query_evidence",
        "query.evidence",
        "Read evidence records",
        "Returns the evidence behind ids (`ev_…`) found in other answers' `evidence_refs`: the "
        "artifact and revision, the source span (line and column), how the fact was resolved "
        "(lexical, import, self/MRO, constructor binding, inference, heuristic), its authority and "
        f"status. Use it to check a claim before you rely on it. {CONTINUE_HINT}",
        overrides={
            "evidence_ids": {
                "description": "Evidence ids from a previous answer.",
                "maxItems": 200,
                "items": {"description": "An evidence id (`ev_…`).", "maxLength": 200},
            },
        },
    ),
    ToolSpec(
        "psmr_query_unknowns",
        "query.unknowns",
        "List what the analysis could not resolve",
        "Returns the unknowns: call sites and references the analysis could not resolve, each with a "
        "reason code (untyped receiver, dynamic getattr/eval/exec, parameter call, external module, "
        "syntax error, ...) and its location. Imports of the standard library and installed packages "
        "are left out (counted in `external_imports_left_out`) unless include_external_imports is true. "
        "Ask for them before concluding that nothing else calls "
        f"or touches a symbol. {CONTINUE_HINT}",
        overrides={
            "scope": {"description": SCOPE, "maxLength": 500},
            "reason": {
                "description": "Only unknowns with this reason code (as shown in earlier answers).",
                "maxLength": 100,
            },
        },
    ),
    ToolSpec(
        "psmr_query_conflicts",
        "query.conflicts",
        "List unresolved conflicts",
        "Returns the workspace's unresolved conflicts: the same qualified name defined twice "
        "(conditional definitions), a re-export shadowing a definition, the two resolution passes "
        "disagreeing (listed once a psmr_query_subgraph with `infer: true` has met the disagreement). "
        "A tool that refuses with CONFLICT_REQUIRES_REVIEW names its conflict here; "
        f"read it, then repeat that call with `accept_conflicts: true`. {CONTINUE_HINT}",
        overrides={
            "subject": {"description": "Only conflicts about this symbol. " + TARGET, "maxLength": 500}
        },
    ),
    ToolSpec(
        "psmr_impact",
        "analysis.impact",
        "Analyse the impact of changing a symbol",
        "Returns what a change to the target may affect, keeping apart direct impact (edges from the "
        "target), derived impact (reached through further hops) and runtime certainty (never claimed "
        "statically); plus state coupling, boundaries crossed, motifs touched, files to review, likely "
        "tests, and `uncertainty`: the unknowns inside the radius. Use it before editing; use "
        f"psmr_query_subgraph to explore structure without a change in mind. {CONTINUE_HINT}",
        overrides={
            "target": {"description": TARGET, "maxLength": 500},
            "depth": {"description": "Radius in hops.", "maximum": 6, "default": 3},
            "accept_conflicts": {
                "description": "true to analyse a target with an open conflict (see psmr_query_conflicts).",
                "default": False,
            },
        },
    ),
    ToolSpec(
        "psmr_semantic_diff",
        "analysis.semantic_diff",
        "Diff two workspaces or two revisions semantically",
        "Returns ΔG between two workspaces (`workspace_a`, `workspace_b`) or two git revisions of one "
        "workspace's root (`rev_a`, `rev_b`, with `workspace_id` or the default workspace): symbols "
        "added, removed, with changed signature or body; edges and state accesses added and removed; "
        "public-API breakages; each with evidence. A revision not yet analysed is built first, which "
        f"takes a while once. {CONTINUE_HINT}",
        overrides={
            "workspace_a": {"description": "The old workspace (with `workspace_b`)."},
            "workspace_b": {"description": "The new workspace (with `workspace_a`)."},
            "rev_a": {
                "description": "The old git revision (commit, tag, branch, `HEAD~1`).",
                "maxLength": 200,
            },
            "rev_b": {"description": "The new git revision.", "maxLength": 200},
        },
    ),
    ToolSpec(
        "psmr_findings",
        "analysis.findings",
        "List findings: confirmed defects, anomalies, hotspots",
        "Returns findings grouped by kind and never merged: confirmed defects (from a maintained "
        "checker, pyflakes), anomalies (suspicious but not proven) and hotspots (fan-in/out, size, git "
        "churn). Treat only confirmed defects as bugs. Filter by `kind` and `scope` to stay small. "
        f"{CONTINUE_HINT}",
        overrides={
            "kind": {"description": "Only this kind of finding; omit for all three, kept apart."},
            "scope": {"description": SCOPE, "maxLength": 500},
        },
    ),
    ToolSpec(
        "psmr_find_motif",
        "analysis.motifs",
        "Find motif instances",
        "Returns instances of behavioural motifs: resource_scope (acquire/release), read_modify_write "
        "(state read then written), boundary_adapter (code that wraps an external boundary), "
        "stateful_orchestrator (a unit driving state across calls), each with the evidence that makes "
        "it one, of production code; those of test code (pytest.raises scopes) are counted in "
        "`in_tests` and listed apart with include_tests. Use it to find the places a change in behaviour "
        f"is risky. {CONTINUE_HINT}",
        overrides={
            "motif": {"description": "Only this motif; omit for all four."},
            "scope": {"description": SCOPE, "maxLength": 500},
        },
    ),
    ToolSpec(
        "psmr_get_contracts",
        "analysis.contracts",
        "Get the contracts of a function or class",
        "Returns what a function or class promises: type signature, docstring, asserts read as pre- "
        "and postconditions, the exceptions it raises, and the tests that reach it. Use it before "
        "changing the target's behaviour, together with psmr_impact. " + CONTINUE_HINT,
        overrides={
            "target": {"description": TARGET, "maxLength": 500},
            "accept_conflicts": {
                "description": "true to read a target with an open conflict (see psmr_query_conflicts).",
                "default": False,
            },
        },
    ),
)

DELTA_ID = {"description": "The delta_id psmr_delta_propose returned."}
CHANGE_TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec(
        "psmr_delta_propose",
        "delta.propose",
        "Propose a change as a semantic delta",
        "Turns an intent and typed operations into a SemanticDelta (authority ai_proposal) without "
        "writing any source file: change_signature (with a parameter_map telling every call site how to "
        "fill the new parameters), replace_body, rename_symbol (include_unresolved: true also renames the "
        "unresolved calls of the same name, each listed for review), add_symbol, move_call_site, and "
        "edit_reference (any call site or reference by file, line and column, resolved or not: a new "
        "name, an expression in its place, new call arguments). Edits keep the file's layout. Returns the "
        "`delta_id`, the concrete edits at every call site found in the evidence, sites that need review, "
        "unresolved sites that may be affected, the expected graph change, assumptions, affected contracts "
        "and the pytest ids of the tests that reach the scope. Read the target with psmr_get_contracts "
        f"and psmr_impact first. Next: psmr_delta_validate. {CONTINUE_HINT}",
        overrides={
            "intent": {"description": "What the change is for, in one sentence.", "maxLength": 2000},
            "scope_refs": {"description": "The symbols the change is about.", "maxItems": 50},
            "constraints": {"description": "Constraints the change must keep (free text).", "maxItems": 20},
            "operations": {
                "maxItems": 50,
                "items": {
                    "properties": {
                        name: {"maxLength": limit}
                        for name, limit in (
                            ("target", 500),
                            ("parameters", 2000),
                            ("body", 100_000),
                            ("new_name", 200),
                            ("module", 500),
                            ("source", 100_000),
                            ("after", 500),
                            ("parent", 500),
                            ("new_callee", 500),
                            ("expression", 500),
                        )
                    }
                },
            },
            "workspace_version": {"maxLength": 64},
        },
        read_only=False,
        idempotent=False,
    ),
    ToolSpec(
        "psmr_delta_list",
        "delta.list",
        "List the deltas proposed for a workspace",
        "Returns every delta recorded for the workspace, oldest first: delta_id, intent, operations, status, "
        "the workspace version it was proposed on and `stale` (proposed on another version: propose it "
        "again), the files it changes and its latest recorded validation. Writes nothing. Use it to "
        f"resume work on a proposal; psmr_delta_describe opens one. {CONTINUE_HINT}",
    ),
    ToolSpec(
        "psmr_delta_describe",
        "delta.describe",
        "Describe one proposed delta",
        "Returns one recorded delta as stored: intent, operations, the concrete edits, sites needing "
        "review, unresolved sites possibly affected, expected graph change, assumptions, affected "
        "contracts, suggested tests, `stale`, the validation checks psmr_delta_validate recorded (not "
        "re-run; null before validation) and the unified diff per file psmr_projection_preview renders. "
        f"Writes nothing. {CONTINUE_HINT}",
        overrides={"delta_id": DELTA_ID},
    ),
    ToolSpec(
        "psmr_delta_validate",
        "delta.validate",
        "Validate a proposed delta",
        "Applies the delta in memory, re-analyses the touched files and runs seven checks: projection "
        "feasibility, type compatibility (every call site binds to the new signature), graph invariants "
        "(nothing anywhere in the tree still names a removed or renamed symbol; no rename to a name its "
        "scope, builtins included, already binds), contracts, the impact boundary, known defects and the "
        "delta's constraints. A failing delta is a tool error VALIDATION_FAILED whose structured content "
        "lists every check and its problems (each site with file, line, column and text; edit one with "
        "edit_reference); fix the operations and propose again. A delta that passes but lists sites to "
        "review answers status needs_review and cannot be applied until they are edited, or accepted "
        "with accept_review: true. A file changed since the proposal gives CONFLICT_REQUIRES_REVIEW. "
        "Records the result in the delta (in the workspace store, never in the source tree). "
        f"Next: psmr_projection_preview. {CONTINUE_HINT}",
        overrides={"delta_id": DELTA_ID},
        read_only=False,
    ),
    ToolSpec(
        "psmr_projection_preview",
        "projection.preview",
        "Preview a delta as a unified diff",
        "Returns the delta as a unified diff per file (`patch` for source files, `test` for test "
        "modules) or the whole projected `source`. Writes no source file; records the file hashes it saw "
        "in the delta (in the workspace store). Show it to the user before "
        f"applying. Next: psmr_projection_apply. {CONTINUE_HINT}",
        overrides={
            "delta_id": DELTA_ID,
            "projections": {
                "items": {"enum": ["patch", "test", "source"]},
                "default": ["patch", "test"],
                "maxItems": 3,
            },
        },
        read_only=False,
    ),
    ToolSpec(
        "psmr_projection_apply",
        "projection.apply",
        "Apply a validated, previewed delta to the source files",
        "Writes the delta's files: only a delta that passed psmr_delta_validate and was previewed, only "
        "while every file still has the hash the preview saw (else CONFLICT_REQUIRES_REVIEW, nothing "
        "written), and only after validating it again itself on the files as they are now (else "
        "VALIDATION_FAILED, nothing written; so is a site to review psmr_delta_validate did not "
        "accept); each file atomically, all restored if one fails, recorded "
        "in a hash-chained audit log. Needs the source-write capability: the server must be started "
        "with --allow-write ROOT covering the files, else CAPABILITY_DENIED. Next: psmr_run_tests, "
        "psmr_verify_rebuild. " + CONTINUE_HINT,
        overrides={"delta_id": DELTA_ID},
        read_only=False,
        destructive=True,
        idempotent=False,
    ),
    ToolSpec(
        "psmr_run_tests",
        "execution.run_tests",
        "Run tests in the sandbox",
        "Runs pytest node ids (`tests`), or the suggested tests of a delta (`delta_id`), inside "
        "slotrelay's sandbox with the workspace read-only, no network and a time limit. Answers failures "
        "first: `failed` (the failed test ids), `counts` per outcome, then each test's outcome as "
        "runtime:pytest evidence (failed, skipped, passed; pages keep that order), whose ids "
        "psmr_query_evidence resolves and which psmr_impact reports as runtime certainty. With a "
        "delta_id the run is recorded for psmr_verify_review. Needs the process-execution capability "
        "(server started with --allow-exec), else "
        f"CAPABILITY_DENIED. {CONTINUE_HINT}",
        overrides={
            "delta_id": DELTA_ID,
            "tests": {"description": "pytest node ids relative to the workspace root.", "maxItems": 500},
            "timeout_s": {"description": "Wall-clock limit for the whole run.", "default": 120},
        },
        read_only=False,
        destructive=True,
        idempotent=False,
    ),
    ToolSpec(
        "psmr_verify_rebuild",
        "verification.rebuild",
        "Rebuild the workspace after an apply",
        "Re-imports the projected files into the workspace (incremental build): W becomes W'. Call "
        f"it after psmr_projection_apply and before psmr_verify_roundtrip. {CONTINUE_HINT}",
        overrides={"delta_id": {"description": "The applied delta (recorded with the rebuild)."}},
        read_only=False,
    ),
    ToolSpec(
        "psmr_verify_roundtrip",
        "verification.roundtrip",
        "Check the applied change against its intent",
        "Compares the delta's intended change with W' - W in three sections: matched, "
        "intended_but_missing, changed_but_not_intended. It checks the graph against the projection only: "
        "`all_matched` says the code now says what the delta meant, not that the change is correct (it "
        "runs nothing; psmr_run_tests and psmr_verify_review say that). Needs the delta applied and the "
        f"workspace rebuilt. Records the verdict in the delta. {CONTINUE_HINT}",
        overrides={"delta_id": DELTA_ID},
        read_only=False,
    ),
    ToolSpec(
        "psmr_verify_review",
        "verification.review",
        "Review what an applied delta did",
        "Reports new and resolved confirmed defects, semantic events (API breakages, new import or call "
        "cycles, new state writes), unexpected changes, new unknowns and new conflicts of an applied, "
        "rebuilt delta, and the latest psmr_run_tests recorded for it: `passed` is false, and "
        "`failed_tests` lists the ids, when a test failed on the applied files or a confirmed defect is "
        "new; a warning says when no run on the applied files is recorded. Records the counts and the "
        f"verdict in the delta. {CONTINUE_HINT}",
        overrides={"delta_id": DELTA_ID},
        read_only=False,
    ),
)

BUILD_SPEC = ToolSpec(
    BUILD_TOOL,
    None,
    "Build or update a workspace",
    "Analyses a Python source folder (or one git revision of it) into a workspace and returns its "
    "`workspace_id`. Writes only to the workspace store (in slotrelay's state folder, or the server's "
    "--store), never to the analysed folder. An existing "
    "workspace is updated incrementally by file hash, so calling it again after an edit is cheap. "
    "`path` must lie inside a root the server was started with (`--workspace`); anything else is "
    "refused with CAPABILITY_DENIED. The new workspace joins psmr_workspace_describe's list.",
    read_only=False,
)

BUILD_INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "path": {
            "type": "string",
            "minLength": 1,
            "maxLength": 4096,
            "description": "The folder to analyse: absolute, or relative to the server's working directory.",
        },
        "rev": {
            "type": "string",
            "minLength": 1,
            "maxLength": 200,
            "description": "A git revision of that folder's repository to analyse instead of the checkout "
            "(read from the repository; the checkout is not touched).",
        },
    },
    "required": ["path"],
    "additionalProperties": False,
}

# What every tool answers with (CONTRACTS.md#result-envelope); `error` is present only when `status` is
# "error".
ENVELOPE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "schema": {"const": envelope.SCHEMA},
        "request_id": {"type": "string"},
        "status": {"enum": ["ok", "error"]},
        "data": {"anyOf": [{"type": "object"}, {"type": "null"}]},
        "error": {
            "type": "object",
            "properties": {"code": {"enum": list(ERROR_CODES)}, "message": {"type": "string"}},
            "required": ["code", "message"],
        },
        "evidence_refs": {"type": "array", "items": {"type": "string"}},
        "unknown_refs": {"type": "array", "items": {"type": "string"}},
        "conflict_refs": {"type": "array", "items": {"type": "string"}},
        "warnings": {"type": "array", "items": {"type": "string"}},
        "continuation": {
            "anyOf": [
                {
                    "type": "object",
                    "properties": {
                        "truncated": {"type": "boolean"},
                        "continuation_token": {"type": "string"},
                        "exhausted": {"type": "string"},
                    },
                },
                {"type": "null"},
            ]
        },
    },
    "required": list(envelope.FIELDS),
}


def _merge(schema: dict[str, Any], override: dict[str, Any]) -> None:
    """Merge `override` into a property schema, recursing into nested `properties` and `items`."""
    for key, value in override.items():
        if key in ("properties", "items") and isinstance(value, dict):
            target = schema.setdefault(key, {})
            if key == "properties":
                for name, sub in value.items():
                    _merge(target.setdefault(name, {}), sub)
            else:
                _merge(target, value)
        else:
            schema[key] = copy.deepcopy(value)


def input_schema(spec: ToolSpec) -> dict[str, Any]:
    """The tool's input schema: the operation's request schema, described and bounded for a model.

    `workspace_id` is never required here: the server fills in its default workspace, or answers
    INVALID_QUERY naming the workspaces it serves.

    Parameters:
        spec: the tool.

    Returns:
        A JSON Schema (draft 2020-12) object.
    """
    if spec.operation is None:
        return copy.deepcopy(BUILD_INPUT_SCHEMA)
    schema = copy.deepcopy(OPERATIONS[spec.operation]["input_schema"])
    properties = schema["properties"]
    for name, override in {**spec.overrides, **PAGING}.items():
        if name in properties:
            _merge(properties[name], override)
    if "workspace_id" in properties:
        properties["workspace_id"].update(WORKSPACE_ID)
    if "budget" in properties:
        properties["budget"] = _budget_schema(properties["budget"])
    schema["required"] = [name for name in schema.get("required", []) if name != "workspace_id"]
    return schema


def defaults(schema: dict[str, Any]) -> dict[str, Any]:
    """The top-level defaults a schema advertises, which the server applies to omitted arguments.

    Parameters:
        schema: a tool input schema.

    Returns:
        Parameter name to default value (budget defaults are applied member by member elsewhere).
    """
    return {
        name: copy.deepcopy(prop["default"])
        for name, prop in schema["properties"].items()
        if "default" in prop
    }


ALL_TOOLS: tuple[ToolSpec, ...] = (*TOOLS, *CHANGE_TOOLS, BUILD_SPEC)
TOOLS_BY_NAME: dict[str, ToolSpec] = {spec.name: spec for spec in ALL_TOOLS}
