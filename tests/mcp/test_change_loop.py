"""The modification half through MCP: propose -> validate -> preview -> apply -> run tests -> rebuild ->
roundtrip -> review, on a copy of a real package with its own tests: sqlparse 0.6.1 (`vendored.py`).

The whole loop runs through the SDK's client over stdio against `slotrelay mcp serve` subprocesses:
one started without grants (apply is refused), one with `--allow-write ROOT --allow-exec` (apply
writes, sqlparse's own suite runs in the docker sandbox). The renames across modules, the conflict
between preview and apply and the bad inputs use the real server over the in-memory transport.
(`test_node_clients.py` drives propose and preview of the same change with the Inspector CLI.)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, StdioServerParameters

from harness.commands import SLOTRELAY
from psmr_mcp import WorkspaceRegistry, build_server
from slotrelay.audit_log import AuditLog
from slotrelay.psmr.grants import Grants
from slotrelay.sandbox import SandboxUnavailable, get_backend
from tests.support.mcp_tools import ok, refused
from tests.support.services import require_service
from tests.support.vendored_sqlparse import (
    BODY,
    IMT,
    IMT_FILES,
    IMT_SITES,
    INTENT,
    MAPPED,
    OWN_SUITE,
    SIGNATURE,
    VENDORED,
    copy_sqlparse,
    snapshot,
)

pytestmark = pytest.mark.anyio


def _propose(operations: list[dict[str, Any]]) -> dict[str, Any]:
    return {"intent": INTENT, "scope_refs": [IMT], "operations": operations}


def _pytest_site() -> str:
    import pytest as installed

    return str(Path(installed.__file__).resolve().parent.parent)


def _docker() -> None:
    try:
        get_backend("docker", lang="python")
    except SandboxUnavailable as missing:
        require_service(False, f"the docker sandbox cannot run python here: {missing.message}")


def _stdio(root: Path, *flags: str) -> StdioServerParameters:
    env = {**os.environ, "SLOTRELAY_SANDBOX_ROOTS": os.pathsep.join([str(root), _pytest_site()])}
    return StdioServerParameters(
        command=SLOTRELAY, args=["mcp", "serve", "--workspace", str(root), *flags], cwd=root, env=env
    )


def _call_sites(proposed: dict[str, Any]) -> list[dict[str, Any]]:
    return [e for e in proposed["data"]["edits"] if e["kind"] == "call_site"]


@pytest.mark.docker
async def test_a_signature_change_at_many_call_sites_through_the_whole_loop(tmp_path: Path) -> None:
    _docker()
    vendored = snapshot(VENDORED)
    root = copy_sqlparse(tmp_path)
    original = snapshot(root)
    async with Client(_stdio(root)) as client:
        # A delta that changes the signature but leaves the call sites to fend for themselves: every
        # call gives i, m or t, which no new parameter takes, so each is left as written.
        partial = await ok(client, "psmr_delta_propose", _propose([SIGNATURE, BODY]))
        assert partial["data"]["authority"] == "ai_proposal"
        assert partial["data"]["files"] == ["sqlparse/utils.py"]
        sites = _call_sites(partial)
        assert len(sites) == IMT_SITES and {e["status"] for e in sites} == {"needs_review"}
        assert {e["file"] for e in sites} == {"sqlparse/engine/grouping.py", "sqlparse/sql.py"}
        message = await refused(
            client, "psmr_delta_validate", {"delta_id": partial["data"]["delta_id"]}, "VALIDATION_FAILED"
        )
        assert "type_compatibility" in message
        result = await client.call_tool("psmr_delta_validate", {"delta_id": partial["data"]["delta_id"]})
        checks = {c["check"]: c for c in result.structured_content["data"]["checks"]}
        compatibility = checks["type_compatibility"]
        assert compatibility["call_sites_checked"] == IMT_SITES
        assert compatibility["problem_count"] == IMT_SITES
        reasons = json.dumps(compatibility["problems"])
        assert "got an unexpected keyword argument 'i'" in reasons
        assert "takes 1 positional arguments but 4 given" in reasons  # token_next_by's imt(tk, i, m, t)
        assert checks["known_defects"]["ok"] and checks["contracts"]["ok"]

        # The complete one: every call site passes what it gave i, m, t to instance, match, types.
        proposed = await ok(client, "psmr_delta_propose", _propose([MAPPED, BODY]))
        delta_id = proposed["data"]["delta_id"]
        assert proposed["data"]["files"] == IMT_FILES
        sites = _call_sites(proposed)
        assert len(sites) == IMT_SITES and {e["status"] for e in sites} == {"rewritten"}
        suggested = proposed["data"]["suggested_validation"]
        assert suggested and all(t.startswith("tests/test_") for t in suggested)
        validated = await ok(client, "psmr_delta_validate", {"delta_id": delta_id})
        checks = {c["check"]: c for c in validated["data"]["checks"]}
        assert all(c["ok"] for c in checks.values()), checks
        assert checks["type_compatibility"]["call_sites_checked"] == IMT_SITES

        preview = await ok(client, "psmr_projection_preview", {"delta_id": delta_id})
        patch = "".join(item["diff"] for item in preview["data"]["patch"])
        assert "-def imt(token, i=None, m=None, t=None):\n" in patch
        assert "+def imt(token, *, instance=None, match=None, types=None):\n" in patch
        assert "+        return imt(token, instance=sqlcls, match=m_role, types=ttypes)\n" in patch
        assert "lambda tk: imt(tk, instance=i, match=m, types=t), idx, end)\n" in patch
        # Keywords keep the order the call wrote them in; a call over two lines keeps its line break.
        assert "+        return bool(imt(token, types=ttypes, instance=sqlcls) or (token" in patch
        assert (
            "+            elif imt(token, instance=(Function, Identifier, TypedLiteral),\n"
            "+                     types=T.Literal):\n"
        ) in patch
        assert snapshot(root) == original

        denied = await refused(client, "psmr_projection_apply", {"delta_id": delta_id}, "CAPABILITY_DENIED")
        assert "--allow-write" in denied
        assert snapshot(root) == original

    async with Client(_stdio(root, "--allow-write", str(root), "--allow-exec")) as client:
        applied = await ok(client, "psmr_projection_apply", {"delta_id": delta_id})
        assert sorted(f["file"] for f in applied["data"]["files"]) == IMT_FILES
        assert (
            "def imt(token, *, instance=None, match=None, types=None):"
            in (root / "sqlparse/utils.py").read_text()
        )
        assert AuditLog(root, name="psmr-apply").verify().ok

        # sqlparse's own suite (not one written for this test), in the docker sandbox.
        ran = await ok(client, "psmr_run_tests", {"delta_id": delta_id, "tests": OWN_SUITE, "timeout_s": 900})
        assert ran["data"]["passed"], ran["data"]
        assert ran["data"]["counts"] == {"passed": 535, "failed": 0, "skipped": 2}, ran["data"]
        assert ran["data"]["backend"] == "docker"
        assert {r["authority"] for r in ran["data"]["results"]} == {"runtime:pytest"}

        rebuilt = await ok(client, "psmr_verify_rebuild", {"delta_id": delta_id})
        assert rebuilt["data"]["version"] != rebuilt["data"]["previous_version"]
        assert rebuilt["data"]["analysed"] == len(IMT_FILES)
        roundtrip = await ok(client, "psmr_verify_roundtrip", {"delta_id": delta_id})
        assert roundtrip["data"]["all_matched"], roundtrip["data"]
        matched = {(m["kind"], m.get("id"), m.get("change")) for m in roundtrip["data"]["matched"]}
        assert ("symbol_changed", f"semantic:{IMT}", "signature_changed") in matched
        assert ("symbol_changed", "semantic:sqlparse.engine.grouping.group_order", "body_changed") in matched

        review = await ok(client, "psmr_verify_review", {"delta_id": delta_id})
        assert review["data"]["new_defects"] == [] and review["data"]["unexpected_changes"] == []
        assert review["data"]["new_conflicts"] == [] and review["data"]["new_unknowns"] == []
        removed = {
            e["old"].split(":")[0].rsplit(" ", 1)[-1]
            for e in review["data"]["semantic_events"]
            if e["event"] == "api_breakage" and e["kind"] == "parameter_removed"
        }
        assert removed == {"i", "m", "t"}  # the public imt lost them: reported, as it should be

        # The suite's run is now runtime certainty of imt's impact, on the files as they are.
        impact = await ok(client, "psmr_impact", {"target": IMT})
        observed = {o["test"] for o in impact["data"]["runtime_certainty"]["observed"]}
        assert "tests/test_grouping.py::test_grouping_identifiers" in observed
    assert snapshot(VENDORED) == vendored


@pytest.fixture
def sqlparse_copy(tmp_path: Path) -> tuple[Path, WorkspaceRegistry]:
    root = copy_sqlparse(tmp_path)
    registry = WorkspaceRegistry([root])
    registry.build(root, at_startup=True)
    return root, registry


def _own_tests(root: Path, *files: str) -> subprocess.CompletedProcess[str]:
    """Run some of sqlparse's own test files on the copy, in a fresh interpreter (no PYTHONPATH, so
    `sqlparse` and `tests` are the copy's; no PYTEST_ADDOPTS, which names plugins of this suite's run)."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTEST_ADDOPTS")}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "addopts=", *files],
        cwd=root, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip


async def test_renames_across_modules(sqlparse_copy: tuple[Path, WorkspaceRegistry]) -> None:
    """Three renames in one delta: `remove_quotes` (imported by name into sql.py, called as
    `utils.remove_quotes` by the tests), `validate_options` (called as `formatter.validate_options` and
    as `sqlparse.formatter.validate_options`) and the class `Comparison` (never called: named as
    `sql.Comparison` in the grouping engine's tuples of classes and the tests' isinstance checks)."""
    root, registry = sqlparse_copy
    async with Client(build_server(registry, grants=Grants.of(write_roots=[root]))) as client:
        operations = [
            {"op": "rename_symbol", "target": "sqlparse.utils.remove_quotes", "new_name": "unquote"},
            {"op": "rename_symbol", "target": "sqlparse.formatter.validate_options", "new_name": "checked"},
            {"op": "rename_symbol", "target": "sqlparse.sql.Comparison", "new_name": "Compare"},
        ]
        proposed = await ok(
            client, "psmr_delta_propose", {"intent": "clearer names", "operations": operations}
        )
        delta_id = proposed["data"]["delta_id"]
        assert proposed["data"]["files"] == [
            "sqlparse/__init__.py",
            "sqlparse/cli.py",
            "sqlparse/engine/grouping.py",
            "sqlparse/formatter.py",
            "sqlparse/sql.py",
            "sqlparse/utils.py",
            "tests/test_grouping.py",
            "tests/test_utils.py",
        ]
        await ok(client, "psmr_delta_validate", {"delta_id": delta_id})
        await ok(client, "psmr_projection_preview", {"delta_id": delta_id})
        await ok(client, "psmr_projection_apply", {"delta_id": delta_id})
        await ok(client, "psmr_verify_rebuild", {"delta_id": delta_id})
        roundtrip = await ok(client, "psmr_verify_roundtrip", {"delta_id": delta_id})
        assert roundtrip["data"]["all_matched"], roundtrip["data"]
        renamed = {
            (m["old"], m["new"]) for m in roundtrip["data"]["matched"] if m["kind"] == "symbol_renamed"
        }
        assert renamed == {
            ("semantic:sqlparse.utils.remove_quotes", "semantic:sqlparse.utils.unquote"),
            ("semantic:sqlparse.formatter.validate_options", "semantic:sqlparse.formatter.checked"),
            ("semantic:sqlparse.sql.Comparison", "semantic:sqlparse.sql.Compare"),
            ("semantic:sqlparse.sql.Comparison.left", "semantic:sqlparse.sql.Compare.left"),
            ("semantic:sqlparse.sql.Comparison.right", "semantic:sqlparse.sql.Compare.right"),
        }
        review = await ok(client, "psmr_verify_review", {"delta_id": delta_id})
        assert review["data"]["new_unknowns"] == [] and review["data"]["new_defects"] == []
        search = await ok(client, "psmr_query_search", {"text": "remove_quotes", "kind": "symbol"})
        # Only the package's test of it still carries the old name (a test's name is not a reference).
        assert [m["id"] for m in search["data"]["matches"]] == [
            "semantic:tests.test_utils.test_remove_quotes"
        ]
        callers = await ok(
            client,
            "psmr_query_subgraph",
            {"anchor": {"kind": "symbol", "value": "sqlparse.utils.unquote"}, "relations": ["called_by"]},
        )
        assert {n["id"] for n in callers["data"]["nodes"]} >= {
            "semantic:sqlparse.sql.TokenList.get_parent_name",
            "semantic:tests.test_utils.test_remove_quotes",
        }
    assert "from sqlparse.utils import imt, unquote" in (root / "sqlparse/sql.py").read_text()
    assert "utils.unquote(value)" in (root / "tests/test_utils.py").read_text()
    assert "sqlparse.formatter.checked(formatter_opts)" in (root / "sqlparse/cli.py").read_text()
    # The package's own tests of what was renamed pass on the renamed copy.
    grouping = (root / "sqlparse/engine/grouping.py").read_text()
    assert "_group(tlist, sql.Compare, match," in grouping and "sql.Comparison" not in grouping
    assert "T.Operator.Comparison" in (root / "tests/test_grouping.py").read_text()  # a token type, kept
    done = _own_tests(
        root, "tests/test_utils.py", "tests/test_cli.py", "tests/test_format.py", "tests/test_grouping.py"
    )
    assert done.returncode == 0, done.stdout + done.stderr


async def test_a_file_edited_between_preview_and_apply_is_a_conflict(
    sqlparse_copy: tuple[Path, WorkspaceRegistry],
) -> None:
    root, registry = sqlparse_copy
    async with Client(build_server(registry, grants=Grants.of(write_roots=[root]))) as client:
        delta_id = (await ok(client, "psmr_delta_propose", _propose([MAPPED, BODY])))["data"]["delta_id"]
        await ok(client, "psmr_delta_validate", {"delta_id": delta_id})
        await ok(client, "psmr_projection_preview", {"delta_id": delta_id})
        edited = root / "sqlparse/sql.py"
        edited.write_text(edited.read_text() + "\n\ndef hum(text):\n    return text\n")
        before = snapshot(root)
        message = await refused(
            client, "psmr_projection_apply", {"delta_id": delta_id}, "CONFLICT_REQUIRES_REVIEW"
        )
        assert "sqlparse/sql.py" in message and "nothing was written" in message
        assert snapshot(root) == before
        assert not AuditLog(root, name="psmr-apply").path.exists()


async def test_bad_input_gets_its_code_and_touches_no_file(
    sqlparse_copy: tuple[Path, WorkspaceRegistry],
) -> None:
    root, registry = sqlparse_copy
    original = snapshot(root)
    async with Client(build_server(registry, grants=Grants.of(write_roots=[root]))) as client:
        for tool in ("psmr_delta_validate", "psmr_projection_preview", "psmr_projection_apply"):
            assert "delta.propose" in await refused(
                client, tool, {"delta_id": "dl_00000000"}, "OBJECT_NOT_FOUND"
            )
        stale = await refused(
            client,
            "psmr_delta_propose",
            {**_propose([BODY]), "workspace_version": "0123456789abcdef"},
            "CONFLICT_REQUIRES_REVIEW",
        )
        assert "stale" in stale
        missing = await refused(
            client,
            "psmr_delta_propose",
            _propose([{**MAPPED, "target": "sqlparse.utils.imtt"}]),
            "OBJECT_NOT_FOUND",
        )
        assert "operations[0].target" in missing and IMT in missing
        unparsable = await refused(
            client, "psmr_delta_propose", _propose([{**BODY, "body": "return (token\n"}]), "INVALID_QUERY"
        )
        assert "operations[0].body does not parse" in unparsable
        not_parameters = await refused(
            client,
            "psmr_delta_propose",
            _propose([{**SIGNATURE, "parameters": "token, *, *"}]),
            "INVALID_QUERY",
        )
        assert "operations[0].parameters" in not_parameters
        dropped = await refused(
            client,
            "psmr_delta_propose",
            _propose([{**SIGNATURE, "parameter_map": {"token": {"drop": True}}}]),
            "INVALID_QUERY",
        )
        assert "parameter_map.token.drop" in dropped
        wrong = await refused(
            client, "psmr_delta_propose", _propose([{"op": "rename_symbol", "target": IMT}]), "INVALID_QUERY"
        )
        assert "new_name" in wrong
        # Steps out of order, a projection not derived from a delta, tests without the capability.
        early = (await ok(client, "psmr_delta_propose", _propose([BODY])))["data"]["delta_id"]
        for tool in ("psmr_verify_roundtrip", "psmr_verify_review"):
            assert "projection.apply first" in await refused(
                client, tool, {"delta_id": early}, "INVALID_QUERY"
            )
        assert "delta.validate" in await refused(
            client, "psmr_projection_apply", {"delta_id": early}, "VALIDATION_FAILED"
        )
        await refused(
            client, "psmr_projection_preview", {"delta_id": early, "projections": ["schema"]}, "INVALID_QUERY"
        )
        assert "--allow-exec" in await refused(
            client, "psmr_run_tests", {"delta_id": early}, "CAPABILITY_DENIED"
        )
        # A delta proposed before the workspace moved on is refused at every later step.
        delta_id = (await ok(client, "psmr_delta_propose", _propose([BODY])))["data"]["delta_id"]
        (root / "sqlparse/extra.py").write_text("def extra():\n    return 1\n")
        registry.build(root)
        for tool in ("psmr_delta_validate", "psmr_projection_preview", "psmr_projection_apply"):
            await refused(client, tool, {"delta_id": delta_id}, "CONFLICT_REQUIRES_REVIEW")
    (root / "sqlparse/extra.py").unlink()
    assert snapshot(root) == original
