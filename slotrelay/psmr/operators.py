"""The catalog of PSMR operators: name, description, request JSON Schema, and the facts
`operator.describe` reports (side effects, determinism, cache behaviour, an example).

This is the one place the request shapes live: `api.call` validates against these schemas, and the
MCP server derives its tool input schemas from them. The read-only half comes first
(CONTRACTS.md#read-only-first); the modification and verification half is appended at the end.
"""

from __future__ import annotations

from typing import Any

BUDGET_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "Past any limit the result is truncated and carries a continuation token.",
    "properties": {
        "max_nodes": {"type": "integer", "minimum": 1},
        "max_edges": {"type": "integer", "minimum": 1},
        "max_evidence_items": {"type": "integer", "minimum": 1},
        "max_text_bytes": {"type": "integer", "minimum": 256},
    },
    "additionalProperties": False,
}
DEFAULT_BUDGET: dict[str, int] = {
    "max_nodes": 500,
    "max_edges": 1500,
    "max_evidence_items": 100,
    "max_text_bytes": 100_000,
}
# Every relation a slice can follow, each with the name that walks it backwards, and what it means.
# `overrides` is derived from `defines` and the class's MRO; the others are stored edges.
INVERSE_RELATIONS: dict[str, str] = {
    "defines": "defined_by",
    "imports": "imported_by",
    "calls": "called_by",
    "reads_state": "read_by",
    "writes_state": "written_by",
    "inherits": "inherited_by",
    "overrides": "overridden_by",
    "decorates": "decorated_by",
    "tests": "tested_by",
}
RELATION_MEANINGS: dict[str, str] = {
    "defines": "module or class -> what it defines",
    "imports": "module -> module it imports",
    "calls": "function -> function it calls",
    "reads_state": "function -> global or attribute it reads",
    "writes_state": "function -> global or attribute it writes",
    "inherits": "class -> its direct base",
    "overrides": "method -> the base-class method it overrides (nearest along the MRO)",
    "decorates": "decorator -> function or class it decorates",
    "tests": "test -> function it calls directly",
}
RELATIONS = tuple(name for pair in INVERSE_RELATIONS.items() for name in pair)
# What operator.describe says of each relation of query.subgraph; edges are always shown forward.
RELATION_TABLE: dict[str, dict[str, str]] = {
    **{
        name: {"walks": RELATION_MEANINGS[name], "inverse": inverse, "edge_relation": name}
        for name, inverse in INVERSE_RELATIONS.items()
    },
    **{
        inverse: {
            "walks": f"{name} backwards ({RELATION_MEANINGS[name].replace(' -> ', ' <- ')})",
            "inverse": name,
            "edge_relation": name,
        }
        for name, inverse in INVERSE_RELATIONS.items()
    },
}
DEFAULT_RELATIONS = ["calls", "called_by", "reads_state", "read_by", "writes_state", "written_by"]
SEARCH_KINDS = ("symbol", "file", "motif", "finding", "contract", "state", "effect", "boundary", "artifact")
MOTIF_KINDS = ("resource_scope", "read_modify_write", "boundary_adapter", "stateful_orchestrator")
FINDING_KINDS = ("confirmed_defect", "anomaly", "hotspot")

# What one request may carry (docs/mcp.md#request-size-limits): past a limit the request is
# POLICY_BLOCKED, naming the field and the limit, before anything parses it.
MAX_REQUEST_BYTES = 1_000_000
CODE_LIMIT = 100_000
SNIPPET_LIMIT = 2_000
TARGET_LIMIT = 500
NAME_LIMIT = 200
CONSTRAINT_PATTERN = (
    r"^\s*(unchanged|signature_unchanged)\s*:\s*\S.*$|^\s*(public_api_unchanged|no_new_unknowns)\s*$"
)

_WS = {"type": "string", "pattern": "^ws_[0-9a-f]+$", "description": "A workspace id from `psmr build`."}
_TARGET = {
    "type": "string",
    "minLength": 1,
    "maxLength": TARGET_LIMIT,
    "description": "A semantic identity (`semantic:pkg.mod.func`) or a dotted name (`pkg.mod.func`).",
}
_PAGE = {
    "budget": BUDGET_SCHEMA,
    "continuation_token": {"type": "string", "description": "From a truncated result, to resume it."},
}


def _request(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {**properties, **_PAGE},
        "required": required,
        "additionalProperties": False,
    }


def _op(description: str, schema: dict[str, Any], example: dict[str, Any], **facts: Any) -> dict[str, Any]:
    return {
        "description": description,
        "input_schema": schema,
        "example": example,
        "side_effects": facts.get("side_effects", "none (read-only)"),
        "determinism": facts.get("determinism", "deterministic for a given workspace version"),
        "cache": facts.get("cache", "reads the stored workspace; results are not cached"),
        "required_capabilities": facts.get("required_capabilities", ["workspace:read"]),
        "input_types": facts.get("input_types", ["graph:cisg"]),
        "output": facts["output"],
        **({"relations": facts["relations"]} if "relations" in facts else {}),
    }


OPERATIONS: dict[str, dict[str, Any]] = {
    "workspace.describe": _op(
        "What the workspace holds: artifact, graph and contract types, operators, counts of unknowns "
        "and conflicts.",
        _request({"workspace_id": _WS}, ["workspace_id"]),
        {"workspace_id": "ws_0123456789ab"},
        output="workspace summary",
        input_types=["workspace"],
    ),
    "operator.list": _op(
        "The operators this runtime offers, optionally only those taking one input type.",
        _request(
            {
                "workspace_id": _WS,
                "filter": {
                    "type": "object",
                    "properties": {"input_type": {"type": "string"}},
                    "additionalProperties": False,
                },
            },
            [],
        ),
        {"filter": {"input_type": "graph:cisg"}},
        output="operator names with descriptions",
        input_types=["runtime"],
        required_capabilities=[],
    ),
    "operator.describe": _op(
        "One operator's input contract, output, capabilities, side effects, determinism, cache and example.",
        _request({"operator": {"type": "string", "minLength": 1}}, ["operator"]),
        {"operator": "query.subgraph"},
        output="operator description",
        input_types=["runtime"],
        required_capabilities=[],
    ),
    "query.search": _op(
        "Find semantic identities by text: symbols, files, motifs, findings, contracts, state, effects, "
        "boundaries or artifacts.",
        _request(
            {
                "workspace_id": _WS,
                "text": {
                    "type": "string",
                    "maxLength": NAME_LIMIT,
                    "description": "Case-insensitive substring; empty lists all.",
                },
                "kind": {"type": "string", "enum": list(SEARCH_KINDS)},
            },
            ["workspace_id", "text"],
        ),
        {"workspace_id": "ws_0123456789ab", "text": "login", "kind": "symbol"},
        output="matches, each with its semantic identity",
    ),
    "query.subgraph": _op(
        "The slice around an anchor: nodes, edges, contracts, unknowns, conflicts and provenance "
        "(a semantic slice), following the chosen relations to a depth.",
        _request(
            {
                "workspace_id": _WS,
                "anchor": {
                    "type": "object",
                    "properties": {
                        "kind": {"type": "string", "enum": ["symbol", "file", "state"]},
                        "value": {"type": "string", "minLength": 1, "maxLength": TARGET_LIMIT},
                    },
                    "required": ["kind", "value"],
                    "additionalProperties": False,
                },
                "relations": {
                    "type": "array",
                    "items": {"type": "string", "enum": list(RELATIONS)},
                    "description": "Relations to follow (default: calls, reads_state and writes_state both "
                    "ways); each has an inverse walking it backwards, e.g. called_by, read_by, tested_by.",
                },
                "depth": {"type": "integer", "minimum": 0},
                "include_evidence": {"type": "boolean"},
                "infer": {
                    "type": "boolean",
                    "description": "Resolve the slice's unresolved call sites with jedi (slower; cached).",
                },
                "projection": {"type": "string", "description": "`graph` (default) or `callgraph`."},
            },
            ["workspace_id", "anchor"],
        ),
        {
            "workspace_id": "ws_0123456789ab",
            "anchor": {"kind": "symbol", "value": "pkg.auth.login"},
            "relations": DEFAULT_RELATIONS,
            "depth": 2,
            "include_evidence": True,
        },
        output="semantic slice S = (N, E, K, U, C, P)",
        relations=RELATION_TABLE,
    ),
    "query.evidence": _op(
        "The evidence records behind ids: artifact, source span, revision, resolution, authority, status.",
        _request(
            {
                "workspace_id": _WS,
                "evidence_ids": {
                    "type": "array",
                    "items": {"type": "string", "maxLength": NAME_LIMIT},
                    "minItems": 1,
                    "maxItems": 200,
                },
            },
            ["workspace_id", "evidence_ids"],
        ),
        {"workspace_id": "ws_0123456789ab", "evidence_ids": ["ev_1", "ev_2"]},
        output="evidence records",
        input_types=["evidence"],
    ),
    "query.unknowns": _op(
        "What the analysis could not resolve, each with a reason code, optionally around one symbol "
        "or of one reason.",
        _request(
            {
                "workspace_id": _WS,
                "scope": _TARGET,
                "reason": {"type": "string", "maxLength": NAME_LIMIT},
                "include_external_imports": {
                    "type": "boolean",
                    "description": "Also list the imports of the standard library and installed packages "
                    "(unknowns of reason external_module), left out by default and counted apart.",
                },
            },
            ["workspace_id"],
        ),
        {"workspace_id": "ws_0123456789ab", "reason": "untyped_receiver"},
        output="unknowns",
    ),
    "query.conflicts": _op(
        "Unresolved conflicts: duplicate definitions, re-exports shadowing a definition, passes "
        "disagreeing (recorded once a query.subgraph with infer: true has met them).",
        _request({"workspace_id": _WS, "subject": _TARGET}, ["workspace_id"]),
        {"workspace_id": "ws_0123456789ab"},
        output="conflicts",
    ),
    "analysis.impact": _op(
        "What a change to the target may affect, with direct, derived and runtime certainty kept apart, "
        "state coupling, boundaries, motifs, files to review, likely tests and the unknowns inside "
        "the radius.",
        _request(
            {
                "workspace_id": _WS,
                "target": _TARGET,
                "depth": {"type": "integer", "minimum": 1},
                "accept_conflicts": {"type": "boolean"},
            },
            ["workspace_id", "target"],
        ),
        {"workspace_id": "ws_0123456789ab", "target": "semantic:pkg.auth.login", "depth": 3},
        output="impact report",
    ),
    "analysis.semantic_diff": _op(
        "ΔG between two workspaces, or two git revisions of one workspace's root: symbols added, removed, "
        "changed; edges and state accesses added and removed; public-API breakages (griffe).",
        _request(
            {
                "workspace_id": _WS,
                "workspace_a": _WS,
                "workspace_b": _WS,
                "rev_a": {"type": "string", "minLength": 1},
                "rev_b": {"type": "string", "minLength": 1},
            },
            [],
        ),
        {"workspace_a": "ws_0123456789ab", "workspace_b": "ws_ba9876543210"},
        output="semantic delta with evidence",
        input_types=["workspace", "git_revision"],
        cache="revisions are built once into the store and reused",
    ),
    "analysis.findings": _op(
        "Confirmed defects (pyflakes), anomalies and hotspots (fan-in/out, size, git churn), never merged. "
        "An undefined name guarded by try/except NameError is an anomaly labelled guarded_name; anomalies "
        "in `if __name__ == '__main__':` demo blocks are labelled main_block and listed last.",
        _request(
            {
                "workspace_id": _WS,
                "kind": {"type": "string", "enum": list(FINDING_KINDS)},
                "scope": _TARGET,
            },
            ["workspace_id"],
        ),
        {"workspace_id": "ws_0123456789ab", "kind": "confirmed_defect"},
        output="findings grouped by kind",
    ),
    "analysis.motifs": _op(
        "Motif instances (resource_scope, read_modify_write, boundary_adapter, stateful_orchestrator), "
        "each with the evidence that makes it one.",
        _request(
            {
                "workspace_id": _WS,
                "motif": {"type": "string", "enum": list(MOTIF_KINDS)},
                "scope": _TARGET,
                "include_tests": {
                    "type": "boolean",
                    "description": "Also list the motifs of test code, apart (`test_motifs`); by default "
                    "only those of production code are listed and `in_tests` counts the others.",
                },
            },
            ["workspace_id"],
        ),
        {"workspace_id": "ws_0123456789ab", "motif": "read_modify_write"},
        output="motif instances",
    ),
    "analysis.contracts": _op(
        "The contracts of a function or class: signature, docstring, asserts as pre/postconditions, "
        "raises, and the tests that reach it.",
        _request(
            {"workspace_id": _WS, "target": _TARGET, "accept_conflicts": {"type": "boolean"}},
            ["workspace_id", "target"],
        ),
        {"workspace_id": "ws_0123456789ab", "target": "semantic:pkg.auth.login"},
        output="contracts",
    ),
}

# The modification and verification half (CONTRACTS.md#changes-go-through-a-delta): propose -> validate ->
# preview -> apply -> run tests -> rebuild -> roundtrip -> review. Only apply writes source files and only
# run_tests runs code; each needs a capability the runtime is started with (`slotrelay.psmr.grants`).
_DELTA = {"type": "string", "pattern": "^dl_[0-9a-f]+$", "description": "A delta id from delta.propose."}
_DELTA_REQUEST = _request({"workspace_id": _WS, "delta_id": _DELTA}, ["workspace_id", "delta_id"])
_OP_FIELDS: dict[str, list[str]] = {
    "change_signature": ["target", "parameters"],
    "replace_body": ["target", "body"],
    "rename_symbol": ["target", "new_name"],
    "add_symbol": ["module", "source"],
    "move_call_site": ["evidence_id", "new_callee"],
    "edit_reference": ["file", "line", "column", "name"],
}
OPERATION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "One typed change; `op` says which, and which fields it takes.",
    "properties": {
        "op": {"type": "string", "enum": list(_OP_FIELDS), "description": "Which operation."},
        "target": {**_TARGET, "description": "The function, method or class to change (not add_symbol)."},
        "parameters": {
            "type": "string",
            "minLength": 1,
            "maxLength": SNIPPET_LIMIT,
            "description": "change_signature: the new parameter list, e.g. `text, width=80, *, sep=' '`, "
            "optionally followed by `-> T`.",
        },
        "parameter_map": {
            "type": "object",
            "description": 'change_signature: how call sites fill each new parameter: `{"from": old_name}` '
            'moves the argument given for an old parameter, `{"value": "expr"}` inserts an expression. '
            "A new parameter not named here takes the argument of the old one of the same name, if any. "
            'Under an old parameter the new signature drops, `{"drop": true}` lets call sites lose its '
            "argument; otherwise a call giving it is left as written, for review.",
            "additionalProperties": {
                "type": "object",
                "properties": {
                    "from": {
                        "type": "string",
                        "minLength": 1,
                        "maxLength": NAME_LIMIT,
                        "description": "An old parameter's name.",
                    },
                    "value": {
                        "type": "string",
                        "minLength": 1,
                        "maxLength": SNIPPET_LIMIT,
                        "description": "A Python expression.",
                    },
                    "drop": {"const": True, "description": "Under a dropped old parameter's name."},
                },
                "minProperties": 1,
                "maxProperties": 1,
                "additionalProperties": False,
            },
        },
        "body": {
            "type": "string",
            "minLength": 1,
            "maxLength": CODE_LIMIT,
            "description": "replace_body: the new statements.",
        },
        "new_name": {
            "type": "string",
            "minLength": 1,
            "maxLength": NAME_LIMIT,
            "description": "rename_symbol, edit_reference: the new identifier.",
        },
        "module": {
            "type": "string",
            "minLength": 1,
            "maxLength": TARGET_LIMIT,
            "description": "add_symbol: a module (dotted) or file.",
        },
        "source": {
            "type": "string",
            "minLength": 1,
            "maxLength": CODE_LIMIT,
            "description": "add_symbol: the definitions to add.",
        },
        "after": {**_TARGET, "description": "add_symbol: place them after this symbol of the module."},
        "parent": {**_TARGET, "description": "add_symbol: place them at the end of this class."},
        "evidence_id": {
            "type": "string",
            "pattern": "^ev_[0-9a-f]+$",
            "description": "move_call_site: the call site, an evidence id of a calls edge.",
        },
        "new_callee": {
            **_TARGET,
            "description": "move_call_site: the symbol the site should call, or one the delta adds.",
        },
        "expression": {
            "type": "string",
            "minLength": 1,
            "maxLength": TARGET_LIMIT,
            "description": "move_call_site: what to write as the callee (default: its bare name); "
            "edit_reference: what to write in place of the reference.",
        },
        "include_unresolved": {
            "type": "boolean",
            "description": "rename_symbol: also rename the unresolved calls of the same name (the "
            "possibly affected sites), each listed as an edit to review.",
        },
        "file": {
            "type": "string",
            "minLength": 1,
            "maxLength": TARGET_LIMIT,
            "description": "edit_reference: the file, relative to the workspace root.",
        },
        "line": {
            "type": "integer",
            "minimum": 1,
            "maximum": 10_000_000,
            "description": "edit_reference: the line, from 1.",
        },
        "column": {
            "type": "integer",
            "minimum": 0,
            "maximum": 10_000_000,
            "description": "edit_reference: where the reference starts on its line, from 0, in bytes (the "
            "`col` of a span of query.unknowns, query.evidence or delta.validate's sites).",
        },
        "name": {
            "type": "string",
            "minLength": 1,
            "maxLength": NAME_LIMIT,
            "description": "edit_reference: the identifier the reference ends with (`get_or_retrieve` for "
            "`self._registry.get_or_retrieve`).",
        },
        "arguments": {
            "type": "string",
            "maxLength": SNIPPET_LIMIT,
            "description": "edit_reference: the new argument list of the call made there, e.g. `x, key=1`.",
        },
    },
    "required": ["op"],
    "additionalProperties": False,
    "allOf": [
        {"if": {"properties": {"op": {"const": op}}}, "then": {"required": fields}}
        for op, fields in _OP_FIELDS.items()
    ],
}
_CHANGE = {
    "input_types": ["graph:cisg", "delta"],
    "cache": "the delta is a sealed record of the workspace's folder of the store",
}

OPERATIONS.update(
    {
        "delta.propose": _op(
            "Turn an intent and typed operations into a SemanticDelta (authority ai_proposal): concrete "
            "edits at every call site from the evidence, unresolved sites that may be affected, the "
            "expected graph change, assumptions, affected contracts and the tests that reach the scope. "
            "Writes no source file.",
            _request(
                {
                    "workspace_id": _WS,
                    "workspace_version": {
                        "type": "string",
                        "description": "The version the proposal was reasoned on (workspace.describe); a "
                        "stale one is refused.",
                    },
                    "intent": {
                        "type": "string",
                        "minLength": 1,
                        "maxLength": SNIPPET_LIMIT,
                        "description": "What the change is for.",
                    },
                    "scope_refs": {
                        "type": "array",
                        "items": _TARGET,
                        "maxItems": 50,
                        "description": "The symbols the change is about; with the operations' targets "
                        "and their impact radius they bound what the change may touch.",
                    },
                    "constraints": {
                        "type": "array",
                        "items": {"type": "string", "maxLength": TARGET_LIMIT, "pattern": CONSTRAINT_PATTERN},
                        "maxItems": 20,
                        "description": "What the change must keep, each checked by delta.validate: "
                        "`unchanged: <symbol, module or file>`, `signature_unchanged: <symbol>`, "
                        "`public_api_unchanged`, `no_new_unknowns`.",
                    },
                    "operations": {
                        "type": "array",
                        "items": OPERATION_SCHEMA,
                        "minItems": 1,
                        "maxItems": 50,
                        "description": "The typed changes, applied in order.",
                    },
                },
                ["workspace_id", "intent", "operations"],
            ),
            {
                "workspace_id": "ws_0123456789ab",
                "intent": "Let callers choose the token lifetime without changing login behaviour",
                "scope_refs": ["semantic:pkg.auth.login"],
                "constraints": [],
                "operations": [
                    {
                        "op": "change_signature",
                        "target": "pkg.auth.issue_token",
                        "parameters": "user, *, ttl=3600",
                        "parameter_map": {"ttl": {"value": "3600"}},
                    }
                ],
            },
            output="SemanticDelta, required assumptions, unknowns, affected contracts, suggested validation",
            side_effects="stores the delta record in the workspace store; no source file is written",
            determinism="deterministic edits for a given workspace version; the delta_id is fresh",
            required_capabilities=["workspace:read"],
            **_CHANGE,
        ),
        "delta.list": _op(
            "The deltas recorded for the workspace, oldest first: intent, operations, status, the workspace "
            "version each was proposed on and whether it is stale (proposed on another version), the files "
            "it changes and its latest recorded validation. Writes nothing.",
            _request({"workspace_id": _WS}, ["workspace_id"]),
            {"workspace_id": "ws_0123456789ab"},
            output="deltas with their status and recorded validation",
            **_CHANGE,
        ),
        "delta.describe": _op(
            "One recorded delta as stored: intent, operations, the concrete edits, sites needing review, "
            "unresolved sites possibly affected, expected graph change, assumptions, affected contracts, "
            "suggested tests, whether it is stale, the recorded validation checks (never re-run) and the "
            "unified diff per file that projection.preview renders. Writes nothing.",
            _DELTA_REQUEST,
            {"workspace_id": "ws_0123456789ab", "delta_id": "dl_0123456789ab"},
            output="the delta, its recorded results and its diffs",
            **_CHANGE,
        ),
        "delta.validate": _op(
            "Apply a delta in memory, re-extract the touched files and check projection feasibility, type "
            "compatibility, graph invariants (nothing left naming a removed or renamed symbol, no rename "
            "to a name its scope binds), contracts, the impact boundary, known defects and the delta's "
            "constraints; a failing delta answers VALIDATION_FAILED with every check, one with sites to "
            "review is needs_review (not validated) until they are edited or accepted.",
            _request(
                {
                    "workspace_id": _WS,
                    "delta_id": _DELTA,
                    "accept_review": {
                        "type": "boolean",
                        "description": "Validate a delta whose checks pass but that lists sites to review, "
                        "once each was checked (never one whose checks fail).",
                    },
                },
                ["workspace_id", "delta_id"],
            ),
            {"workspace_id": "ws_0123456789ab", "delta_id": "dl_0123456789ab"},
            output="validation checks",
            side_effects="records the result in the delta",
            required_capabilities=["workspace:read"],
            **_CHANGE,
        ),
        "projection.preview": _op(
            "The delta as a unified diff per file (`patch` for sources, `test` for test modules) or the "
            "projected `source`; writes no source file.",
            _request(
                {
                    "workspace_id": _WS,
                    "delta_id": _DELTA,
                    "projections": {
                        "type": "array",
                        "items": {"type": "string"},
                        "minItems": 1,
                        "description": "Any of `patch`, `test`, `source` (default: patch and test).",
                    },
                },
                ["workspace_id", "delta_id"],
            ),
            {"workspace_id": "ws_0123456789ab", "delta_id": "dl_0123456789ab"},
            output="diffs per file",
            side_effects="records the file hashes it saw in the delta; no source file is written",
            required_capabilities=["workspace:read"],
            **_CHANGE,
        ),
        "projection.apply": _op(
            "Write a validated, previewed delta: validated again on the files as they are now (a recorded "
            "validation is not trusted; a site to review it did not accept is refused), atomically per "
            "file through checked folders of the granted root, "
            "only while every file has the hash the preview saw, all files restored if one fails, "
            "recorded in a hash-chained audit log.",
            _DELTA_REQUEST,
            {"workspace_id": "ws_0123456789ab", "delta_id": "dl_0123456789ab"},
            output="the files written with their hashes and the audit record",
            side_effects=(
                "writes source files under the granted roots; appends to the tree's psmr-apply.jsonl in "
                "slotrelay's state folder"),
            determinism="effectful",
            required_capabilities=["source-write"],
            **_CHANGE,
        ),
        "execution.run_tests": _op(
            "Run pytest node ids (or the delta's suggested tests) inside the sandbox, the workspace "
            "read-only, under a time limit; outcomes become runtime:pytest evidence that analysis.impact "
            "reports as runtime certainty.",
            _request(
                {
                    "workspace_id": _WS,
                    "delta_id": _DELTA,
                    "tests": {
                        "type": "array",
                        "items": {"type": "string", "minLength": 1, "maxLength": TARGET_LIMIT},
                        "minItems": 1,
                        "maxItems": 500,
                    },
                    "timeout_s": {"type": "integer", "minimum": 1, "maximum": 3600},
                },
                ["workspace_id"],
            ),
            {"workspace_id": "ws_0123456789ab", "delta_id": "dl_0123456789ab", "timeout_s": 120},
            output="test outcomes with runtime evidence",
            side_effects="runs processes inside the sandbox; stores runtime evidence in the workspace store",
            determinism="effectful (the tests decide)",
            required_capabilities=["process-execution"],
            **_CHANGE,
        ),
        "verification.rebuild": _op(
            "Re-import the projected files into the workspace (the incremental build): W -> W'.",
            _request({"workspace_id": _WS, "delta_id": _DELTA}, ["workspace_id"]),
            {"workspace_id": "ws_0123456789ab", "delta_id": "dl_0123456789ab"},
            output="build summary",
            side_effects="updates the workspace in its store",
            determinism="deterministic for the files on disk",
            required_capabilities=["workspace:read"],
            **_CHANGE,
        ),
        "verification.roundtrip": _op(
            "Compare the delta's intended change with W' - W: matched, intended but missing, changed but "
            "not intended.",
            _DELTA_REQUEST,
            {"workspace_id": "ws_0123456789ab", "delta_id": "dl_0123456789ab"},
            output="three sections",
            side_effects="records the verdict in the delta",
            required_capabilities=["workspace:read"],
            **_CHANGE,
        ),
        "verification.review": _op(
            "What the applied delta did: new and resolved defects, semantic events (API breakages, new "
            "cycles, new state writes), unexpected changes, new unknowns, new conflicts, and the latest "
            "execution.run_tests recorded on the applied files.",
            _DELTA_REQUEST,
            {"workspace_id": "ws_0123456789ab", "delta_id": "dl_0123456789ab"},
            output="review report",
            side_effects="records the counts and the verdict (reviewed or review_failed) in the delta",
            required_capabilities=["workspace:read"],
            **_CHANGE,
        ),
    }
)
