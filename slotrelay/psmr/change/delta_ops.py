"""The typed operations of `delta.propose`, each expanded into concrete edits of files.

    change_signature   target, parameters ("a, b=1, *, c"), parameter_map for the call sites
    replace_body       target, body (the new statements)
    rename_symbol      target, new_name, optionally include_unresolved (rename the unresolved calls
                       of the same name too)
    add_symbol         module, source, optionally after (a symbol of that module) or parent (a class)
    move_call_site     evidence_id (a call site), new_callee, optionally expression (written at the site)
    edit_reference     file, line, column, name (a reference by its position, resolved or not):
                       new_name, expression (written in its place) and/or arguments (of its call)

A `Planner` holds the workspace and one `FilePlan` per file; each operation adds to those plans and
to the delta's records (the edits, the expected graph change, assumptions). Call sites come from the
graph's evidence spans; sites the analysis could not resolve but whose name matches are listed as
possibly affected, never edited on a guess: only on request (include_unresolved), each listed as an
edit, or one by one (edit_reference). Every edit keeps the file's layout: a parameter list written
one a line stays so, and blank lines inside new statements stay blank.
"""

from __future__ import annotations

import ast
import hashlib
import keyword
import textwrap
from typing import Any

import libcst as cst

from slotrelay.psmr.analysis.callbinding import (
    BindError,
    Unbindable,
    Unmapped,
    params_of,
    parse_parameters,
    remap_call,
)
from slotrelay.psmr.change import references
from slotrelay.psmr.change.rewrite import (
    FilePlan,
    Position,
    arguments_laid_out_like,
    char_column,
    laid_out_like,
    placed,
    spaced_like,
)
from slotrelay.psmr.errors import ConflictRequiresReview, InvalidQuery, ObjectNotFound, TypeMismatch
from slotrelay.psmr.ops.slicing import file_node, find_node
from slotrelay.psmr.workspace.build import NotSource, Unanalysable, artifact_text, read_artifact
from slotrelay.psmr.workspace.identity import qname, sid
from slotrelay.psmr.workspace.store import Workspace

FUNCTION_KINDS = frozenset({"function", "method", "test"})
CALL_REASONS_SKIPPED = frozenset({"external_module", "syntax_error"})


def _identifier(value: str, where: str) -> str:
    if not value.isidentifier() or keyword.iskeyword(value):
        raise InvalidQuery(f"{where}: {value!r} is not a Python identifier")
    return value


class Planner:
    """Expands operations into file plans and the delta's records.

    Parameters:
        ws: the workspace the delta is proposed on.
    """

    def __init__(self, ws: Workspace) -> None:
        self.ws = ws
        self.graph = ws.graph
        self.originals: dict[str, str] = {}
        self.plans: dict[str, FilePlan] = {}
        self.edits: list[dict[str, Any]] = []
        self.problems: list[dict[str, Any]] = []
        self.possibly_affected: dict[str, dict[str, Any]] = {}
        self.assumptions: list[str] = []
        self.targets: list[str] = []
        self.signature_changed: set[str] = set()
        self.added: list[str] = []
        self.renamed: dict[str, str] = {}
        self.sites_removed: list[list[str]] = []
        self.sites_added: list[list[str]] = []
        self.edges_free: set[str] = set()

    # -- reading -----------------------------------------------------------------------------
    def text(self, artifact: str) -> str:
        """The file's text, refused if it changed since the workspace was built.

        Raises:
            ConflictRequiresReview: the file's hash is not the one the workspace holds.
        """
        if artifact not in self.originals:
            try:
                data = read_artifact(self.ws.source_root, artifact)
            except (NotSource, Unanalysable) as exc:
                raise ConflictRequiresReview(
                    f"{artifact} cannot be read now ({exc}); rebuild workspace {self.ws.workspace_id} "
                    "(verification.rebuild or psmr_workspace_build) and propose again"
                ) from exc
            if hashlib.sha256(data).hexdigest() != self.ws.files[artifact]["sha256"]:
                raise ConflictRequiresReview(
                    f"{artifact} changed since workspace {self.ws.workspace_id} was built; rebuild it "
                    "(verification.rebuild or psmr_workspace_build) and propose again"
                )
            self.originals[artifact] = data.decode("utf-8")
        return self.originals[artifact]

    def plan(self, artifact: str) -> FilePlan:
        """The plan of one file (its text is read and checked first)."""
        self.text(artifact)
        return self.plans.setdefault(artifact, FilePlan())

    def position(self, artifact: str, line: int, byte_col: int) -> Position:
        """A source position in characters."""
        return line, char_column(self.text(artifact), line, byte_col)

    def node(self, value: str, where: str, kinds: frozenset[str] | None = None) -> str:
        """The node an operation names.

        Raises:
            ObjectNotFound: no such symbol (close names suggested).
            TypeMismatch: the symbol is of another kind than the operation takes.
        """
        try:
            node = find_node(self.ws, value)
        except ObjectNotFound as exc:
            raise ObjectNotFound(f"{where}: {exc.message}") from exc
        kind = self.graph.nodes[node]["kind"]
        if kinds is not None and kind not in kinds:
            raise TypeMismatch(
                f"{where}: {qname(node)} is a {kind}; this operation takes a {'/'.join(sorted(kinds))}"
            )
        return node

    def _def_position(self, node: str) -> tuple[str, Position]:
        data = self.graph.nodes[node]
        return data["artifact"], self.position(data["artifact"], data["span"][0], data["span"][1])

    def call_sites(self, node: str) -> list[tuple[str, str, dict[str, Any]]]:
        """(caller, evidence id, evidence) of every resolved call of the node."""
        out = []
        for caller, _, key, data in self.graph.in_edges(node, keys=True, data=True):
            if key == "calls":
                out += [
                    (caller, ev, self.ws.evidence[ev]) for ev in data["evidence"] if ev in self.ws.evidence
                ]
        return sorted(out, key=lambda s: (s[2]["artifact"], s[2]["span"]["line"], s[2]["span"]["col"]))

    def note_unresolved(self, name: str) -> list[dict[str, Any]]:
        """Record the unresolved call sites whose callee's last name is `name` as possibly affected;
        returns them, by file and position."""
        found = []
        for unknown in self.ws.unknowns.values():
            if unknown["reason"] in CALL_REASONS_SKIPPED:
                continue
            last = unknown["detail"].removesuffix("()").rsplit(".", 1)[-1]
            if last == name:
                self.possibly_affected[unknown["id"]] = {**unknown, "why": f"an unresolved call named {name}"}
                found.append(unknown)
        return sorted(found, key=lambda u: (u["artifact"], u["span"]["line"], u["span"]["col"], u["id"]))

    # -- operations ----------------------------------------------------------------------------
    def change_signature(self, i: int, op: dict[str, Any]) -> None:
        """New parameters for a function; every call site is rewritten through the parameter map."""
        where = f"operations[{i}]"
        target = self.node(op["target"], f"{where}.target", FUNCTION_KINDS)
        data = self.graph.nodes[target]
        try:
            new_params, returns = parse_parameters(op["parameters"])
        except cst.ParserSyntaxError as exc:
            raise InvalidQuery(
                f"{where}.parameters: {op['parameters']!r} is not a parameter list ({exc.message})"
            ) from exc
        old_params, _ = parse_parameters(data["signature"])
        bound_first = data["kind"] == "method" and "staticmethod" not in (data.get("decorators") or [])
        old, new = (
            params_of(old_params, bound_first=bound_first),
            params_of(new_params, bound_first=bound_first),
        )
        mapping = op.get("parameter_map", {})
        new_names, old_names = {p.name for p in new}, {p.name for p in old}
        for name, source in mapping.items():
            if "drop" in source:
                if name not in old_names or name in new_names:
                    raise InvalidQuery(
                        f"{where}.parameter_map.{name}.drop: only an old parameter the new signature "
                        "no longer has can be dropped"
                    )
                continue
            if name not in new_names:
                raise InvalidQuery(f"{where}.parameter_map: {name!r} is not a parameter of the new signature")
            if "from" in source and source["from"] not in old_names:
                raise InvalidQuery(
                    f"{where}.parameter_map.{name}.from: {source['from']!r} is not an old parameter"
                )
            if "value" in source:
                try:
                    cst.parse_expression(source["value"])
                except cst.ParserSyntaxError as exc:
                    raise InvalidQuery(
                        f"{where}.parameter_map.{name}.value: not an expression ({exc.message})"
                    ) from exc
        artifact, position = self._def_position(target)

        def new_signature(d: Any) -> Any:
            return d.with_changes(
                params=laid_out_like(d.params, d.whitespace_before_params, new_params),
                returns=returns if returns is not None else d.returns,
            )

        self.plan(artifact).on_def(position, new_signature)
        self.targets.append(target)
        self.signature_changed.add(target)
        for caller, ev, record in self.call_sites(target):
            edit = {
                "operation": i,
                "kind": "call_site",
                "file": record["artifact"],
                "line": record["span"]["line"],
                "caller": caller,
                "callee": target,
                "evidence_ref": ev,
                "status": "rewritten",
            }
            self.edits.append(edit)
            self.plan(record["artifact"]).on_call(
                self.position(record["artifact"], record["span"]["line"], record["span"]["col"]),
                self._remap(edit, old, new, mapping),
            )
        self.edits.append(
            {"operation": i, "kind": "signature", "file": artifact, "line": position[0], "symbol": target}
        )
        self.note_unresolved(data["qualname"].rsplit(".", 1)[-1])
        removed = sorted(old_names - new_names - {s.get("from") for s in mapping.values()})
        for name in removed:
            if name in (data.get("doc") or ""):
                self.assumptions.append(
                    f"the docstring of {qname(target)} mentions {name!r}, which the new signature drops: "
                    "delta.validate's contracts check fails until the docstring is updated (replace_body)"
                )

    def _remap(self, edit: dict[str, Any], old: list[Any], new: list[Any], mapping: dict[str, Any]) -> Any:
        def apply(call: cst.Call) -> cst.Call:
            try:
                result = remap_call(call, old, new, mapping)
            except Unbindable as exc:
                edit.update(status="needs_review", reason=str(exc))
                self.problems.append(edit)
                return call
            except Unmapped as exc:
                # Left as written: dropping the argument would change what the call does unseen.
                edit.update(status="needs_review", reason=str(exc), unmapped=True)
                self.problems.append(edit)
                return call
            except BindError as exc:
                edit.update(
                    status="needs_review", reason=f"the call does not bind to the old signature: {exc}"
                )
                self.problems.append(edit)
                return call
            if result is call:
                edit["status"] = "unchanged"
            return result

        return apply

    def replace_body(self, i: int, op: dict[str, Any]) -> None:
        """A new body for a function (its docstring kept unless the new body starts with one)."""
        where = f"operations[{i}]"
        target = self.node(op["target"], f"{where}.target", FUNCTION_KINDS)
        try:
            statements = placed(list(cst.parse_module(textwrap.dedent(op["body"])).body))
        except cst.ParserSyntaxError as exc:
            raise InvalidQuery(
                f"{where}.body does not parse: {exc.message} at line {exc.raw_line}, column {exc.raw_column}"
            ) from exc
        if not statements:
            raise InvalidQuery(f"{where}.body is empty; give at least one statement (e.g. `pass`)")

        def new_body(d: Any) -> Any:
            body = list(statements)
            first = d.body.body[0] if d.body.body else None
            if first is not None and _is_docstring(first) and not _is_docstring(body[0]):
                body.insert(0, first)
            return d.with_changes(body=d.body.with_changes(body=body))

        artifact, position = self._def_position(target)
        self.plan(artifact).on_def(position, new_body)
        self.targets.append(target)
        self.edges_free.add(target)
        self.edits.append(
            {"operation": i, "kind": "body", "file": artifact, "line": position[0], "symbol": target}
        )

    def rename_symbol(self, i: int, op: dict[str, Any]) -> None:
        """A new name for a function, method or class: its definition, call sites and imports of it."""
        where = f"operations[{i}]"
        target = self.node(op["target"], f"{where}.target", FUNCTION_KINDS | {"class"})
        new_name = _identifier(op["new_name"], f"{where}.new_name")
        data = self.graph.nodes[target]
        old_name = data["qualname"].rsplit(".", 1)[-1]
        parent = data["qualname"].rsplit(".", 1)[0]
        new_id = sid(f"{parent}.{new_name}")
        if new_id in self.graph:
            raise InvalidQuery(f"{where}.new_name: {qname(new_id)} already exists; pick another name")
        artifact, position = self._def_position(target)
        self.plan(artifact).on_def(position, lambda d: d.with_changes(name=cst.Name(new_name)))
        self.targets.append(target)
        self.renamed[target] = new_id
        self.edits.append(
            {"operation": i, "kind": "definition", "file": artifact, "line": position[0], "symbol": target}
        )
        module = data.get("module") or parent
        top_level = parent == module
        if top_level:
            self.plan(artifact).rename_global(old_name, new_name)
        for caller, ev, record in self.call_sites(target):
            self.edits.append(
                {"operation": i, "kind": "call_site", "file": record["artifact"],
                 "line": record["span"]["line"],
                 "caller": caller, "callee": target, "evidence_ref": ev, "status": "rewritten"}
            )  # fmt: skip
            self.plan(record["artifact"]).on_call(
                self.position(record["artifact"], record["span"]["line"], record["span"]["col"]),
                _renamed_callee(old_name, new_name),
            )
        if top_level:
            self._rename_imports(i, module, old_name, new_name)
        found = self.note_unresolved(old_name)
        if op.get("include_unresolved"):
            self._rename_unresolved(i, found, old_name, new_name)
            self.assumptions.append(
                f"the unresolved calls named {old_name} are renamed too (edits of kind reference, status "
                "renamed_unresolved): review each, as the analysis cannot say they call "
                f"{qname(target)}; strings and getattr are not renamed"
            )
        else:
            self.assumptions.append(
                f"references to {old_name} the analysis does not resolve (strings, getattr, attributes of "
                "objects other than an imported module) are not renamed; see possibly_affected, and "
                "delta.validate lists every one left"
            )

    def _rename_unresolved(self, i: int, found: list[dict[str, Any]], old: str, new: str) -> None:
        """Rename the identifier of each unresolved call site named `old` (the possibly affected)."""
        for unknown in found:
            artifact, span = unknown["artifact"], unknown["span"]
            reference = self._reference_at(artifact, old, span["line"], span["col"])
            if reference is None or reference.kind != "call":
                continue
            self.plan(artifact).rename(self.position(artifact, reference.name_line, reference.name_col), new)
            self.edits.append(
                {"operation": i, "kind": "reference", "file": artifact, "line": span["line"],
                 "column": span["col"], "name": old, "new_name": new, "text": reference.text,
                 "scope": unknown["scope"], "status": "renamed_unresolved",
                 "reason": f"an unresolved call named {old}: it may call something else"}
            )  # fmt: skip
            self.possibly_affected[unknown["id"]]["edited"] = "renamed_unresolved"
            self.edges_free.add(unknown["scope"])

    def _reference_at(self, artifact: str, name: str, line: int, col: int) -> references.Reference | None:
        module = self.ws.files[artifact]["module"]
        return references.at(self.text(artifact), artifact, module, name, line, col)

    def _rename_imports(self, i: int, module: str, old: str, new: str) -> None:
        """Rename `from M import old` wherever M is the defining module or re-exports it."""
        sources = {module}
        done: set[str] = set()
        changed = True
        while changed:
            changed = False
            for artifact, entry in sorted(self.ws.files.items()):
                if artifact in done:
                    continue
                text = self.text(artifact) if old in self._peek(artifact) else ""
                if not text:
                    continue
                try:
                    tree = ast.parse(text)
                except SyntaxError:
                    continue
                is_package = artifact.endswith("__init__.py")
                for item in ast.walk(tree):
                    if not isinstance(item, ast.ImportFrom):
                        continue
                    if references.absolute_module(item, entry["module"], is_package) not in sources:
                        continue
                    for alias in item.names:
                        if alias.name != old:
                            continue
                        plan = self.plan(artifact)
                        plan.rename(self.position(artifact, alias.lineno, alias.col_offset), new)
                        done.add(artifact)
                        self.edits.append(
                            {"operation": i, "kind": "import", "file": artifact, "line": alias.lineno}
                        )
                        if alias.asname is not None:
                            continue
                        if item.col_offset == 0:
                            plan.rename_global(old, new)
                            if entry["module"] not in sources:
                                sources.add(entry["module"])
                                changed = True
                        else:
                            plan.rename_local_import(
                                self.position(artifact, item.lineno, item.col_offset), old, new
                            )
        self._rename_module_attributes(i, sources, old, new)

    def _rename_module_attributes(self, i: int, sources: set[str], old: str, new: str) -> None:
        """Rename `M.old` wherever a module-level import binds a module M that defines or re-exports
        old (`from pkg import sql` -> `sql.Old`, `import pkg.sql as s` -> `s.Old`, `import pkg` ->
        `pkg.sql.Old`): a class is referred to this way without being called (isinstance, a base)."""
        for artifact, entry in sorted(self.ws.files.items()):
            if old not in self._peek(artifact):
                continue
            try:
                tree = ast.parse(self.text(artifact))
            except SyntaxError:
                continue
            bound: set[tuple[str, tuple[str, ...]]] = set()
            for item in tree.body:
                if isinstance(item, ast.Import):
                    # `import a.b` binds the dotted name `a.b` (as libcst's scopes record it).
                    for alias in item.names:
                        below = alias.name.count(".") + 1
                        bound |= {
                            (alias.asname or alias.name, tuple(source.split(".")[below:]))
                            for source in sources
                            if source == alias.name or source.startswith(alias.name + ".")
                        }
                elif isinstance(item, ast.ImportFrom):
                    base = references.absolute_module(item, entry["module"], artifact.endswith("__init__.py"))
                    bound |= {
                        (alias.asname or alias.name, ())
                        for alias in item.names
                        if f"{base}.{alias.name}" in sources
                    }
            # Only where such an attribute is written: the scope analysis of a whole file is not free.
            written = {
                _dotted(node.value)
                for node in ast.walk(tree)
                if isinstance(node, ast.Attribute) and node.attr == old
            }
            for binding, path in sorted(bound):
                if ".".join((binding, *path)) not in written:
                    continue
                self.plan(artifact).rename_module_attribute(binding, path, old, new)
                self.edits.append(
                    {"operation": i, "kind": "module_attribute", "file": artifact,
                     "reference": ".".join((binding, *path, old))}
                )  # fmt: skip

    def _peek(self, artifact: str) -> str:
        if artifact in self.originals:
            return self.originals[artifact]
        return artifact_text(self.ws.source_root, artifact) or ""

    def add_symbol(self, i: int, op: dict[str, Any]) -> None:
        """New definitions in a module, after a symbol of it, inside a class, or at its end."""
        where = f"operations[{i}]"
        if op["module"].endswith(".py"):
            try:
                module = file_node(self.ws, op["module"])
            except ObjectNotFound as exc:
                raise ObjectNotFound(f"{where}.module: {exc.message}") from exc
        else:
            module = self.node(op["module"], f"{where}.module", frozenset({"module"}))
        artifact = self.graph.nodes[module]["artifact"]
        source = textwrap.dedent(op["source"])
        try:
            statements = placed(list(cst.parse_module(source).body))
        except cst.ParserSyntaxError as exc:
            raise InvalidQuery(
                f"{where}.source does not parse: {exc.message} at line {exc.raw_line}, column "
                f"{exc.raw_column}"
            ) from exc
        names = [s.name.value for s in statements if isinstance(s, cst.FunctionDef | cst.ClassDef)]
        if not names:
            raise InvalidQuery(f"{where}.source defines no function or class")
        owner = qname(module)
        plan = self.plan(artifact)
        if op.get("parent"):
            parent = self.node(op["parent"], f"{where}.parent", frozenset({"class"}))
            if self.graph.nodes[parent].get("module") != qname(module):
                raise InvalidQuery(f"{where}.parent: {qname(parent)} is not in {qname(module)}")
            owner = qname(parent)
            _, position = self._def_position(parent)

            def append(d: Any) -> Any:
                members = list(d.body.body)
                added = spaced_like(statements, members[-1], indented=True) if members else statements
                return d.with_changes(body=d.body.with_changes(body=[*members, *added]))

            plan.on_def(position, append)
        elif op.get("after"):
            after = self.node(op["after"], f"{where}.after", FUNCTION_KINDS | {"class"})
            if self.graph.nodes[after].get("module") != qname(module):
                raise InvalidQuery(f"{where}.after: {qname(after)} is not in {qname(module)}")
            _, position = self._def_position(after)
            plan.add(source, after=position)
        else:
            plan.add(source)
        for name in names:
            new_id = sid(f"{owner}.{name}")
            if new_id in self.graph:
                raise InvalidQuery(
                    f"{where}.source: {qname(new_id)} already exists; change it with replace_body"
                )
            self.added.append(new_id)
            self.edges_free.add(new_id)
        self.targets.append(module)
        self.edits.append(
            {
                "operation": i,
                "kind": "addition",
                "file": artifact,
                "symbols": [sid(f"{owner}.{n}") for n in names],
            }
        )

    def move_call_site(self, i: int, op: dict[str, Any]) -> None:
        """Point one call site at another callee."""
        where = f"operations[{i}]"
        record = self.ws.evidence.get(op["evidence_id"])
        caller, _, callee = (record or {}).get("about", "").partition(" calls ")
        if record is None or not callee:
            raise ObjectNotFound(
                f"{where}.evidence_id: {op['evidence_id']} is not a call site of workspace "
                f"{self.ws.workspace_id} (the evidence_refs of a calls edge in query.subgraph are)"
            )
        # A definition an earlier operation of this delta adds is a callee too (add a helper, move
        # call sites to it, in one delta).
        added = {qname(n): n for n in self.added}
        new_callee = added.get(op["new_callee"]) or self.node(
            op["new_callee"], f"{where}.new_callee", FUNCTION_KINDS | {"class"}
        )
        expression = op.get("expression") or qname(new_callee).rsplit(".", 1)[-1]
        try:
            func = cst.parse_expression(expression)
        except cst.ParserSyntaxError as exc:
            raise InvalidQuery(
                f"{where}.expression: {expression!r} is not an expression ({exc.message})"
            ) from exc
        artifact = record["artifact"]
        position = self.position(artifact, record["span"]["line"], record["span"]["col"])
        self.plan(artifact).on_call(position, lambda c: c.with_changes(func=func))
        self.targets.append(sid(caller))
        self.sites_removed.append([sid(caller), sid(callee)])
        self.sites_added.append([sid(caller), new_callee])
        self.edits.append(
            {"operation": i, "kind": "call_site", "file": artifact, "line": position[0],
             "caller": sid(caller),
             "callee": new_callee, "evidence_ref": op["evidence_id"], "status": "moved"}
        )  # fmt: skip

    def edit_reference(self, i: int, op: dict[str, Any]) -> None:
        """Edit one reference found by its position (resolved or not): rename its identifier, write an
        expression in its place, and/or give its call new arguments."""
        where = f"operations[{i}]"
        artifact = op["file"]
        if artifact not in self.ws.files:
            raise ObjectNotFound(
                f"{where}.file: {artifact} is not a file of workspace {self.ws.workspace_id} (paths are "
                "relative to its root, as the artifact of a span)"
            )
        name = _identifier(op["name"], f"{where}.name")
        if "new_name" in op and "expression" in op:
            raise InvalidQuery(f"{where}: give new_name or expression, not both")
        if not any(k in op for k in ("new_name", "expression", "arguments")):
            raise InvalidQuery(f"{where}: say what to write: new_name, expression and/or arguments")
        line, column = op["line"], op["column"]
        reference = self._reference_at(artifact, name, line, column)
        if reference is None:
            raise ObjectNotFound(
                f"{where}: no reference to {name} starts at {artifact}:{line}:{column} (line from 1, column "
                "from 0 in bytes, as the spans of query.unknowns and delta.validate's sites give them)"
            )
        plan = self.plan(artifact)
        start = self.position(artifact, line, column)
        if "new_name" in op:
            new_name = _identifier(op["new_name"], f"{where}.new_name")
            plan.rename(self.position(artifact, reference.name_line, reference.name_col), new_name)
        if "expression" in op:
            plan.replace_reference(start, name, _parsed(op["expression"], f"{where}.expression"))
        if "arguments" in op:
            if reference.kind != "call":
                raise InvalidQuery(f"{where}.arguments: {name} is not called at {artifact}:{line}:{column}")
            call = _parsed(f"_({op['arguments']})", f"{where}.arguments")
            assert isinstance(call, cst.Call)  # `_(...)` parses as a call or not at all
            plan.on_call(start, lambda c: c.with_changes(args=arguments_laid_out_like(c, list(call.args))))
        scope = sid(reference.scope)
        if scope in self.graph:
            self.targets.append(scope)
            self.edges_free.add(scope)
        self.edits.append(
            {"operation": i, "kind": "reference", "file": artifact, "line": line, "column": column,
             "name": name, "reference": reference.kind, "text": reference.text, "scope": scope,
             "status": "edited"}
        )  # fmt: skip


def _parsed(text: str, where: str) -> cst.BaseExpression:
    try:
        return cst.parse_expression(text)
    except cst.ParserSyntaxError as exc:
        raise InvalidQuery(f"{where}: {text!r} is not an expression ({exc.message})") from exc


def _is_docstring(statement: Any) -> bool:
    return (
        isinstance(statement, cst.SimpleStatementLine)
        and len(statement.body) == 1
        and isinstance(statement.body[0], cst.Expr)
        and isinstance(statement.body[0].value, cst.SimpleString | cst.ConcatenatedString)
    )


def _renamed_callee(old: str, new: str) -> Any:
    def apply(call: cst.Call) -> cst.Call:
        func = call.func
        if isinstance(func, cst.Name) and func.value == old:
            return call.with_changes(func=func.with_changes(value=new))
        if isinstance(func, cst.Attribute) and func.attr.value == old:
            return call.with_changes(func=func.with_changes(attr=func.attr.with_changes(value=new)))
        return call

    return apply


def _dotted(node: ast.expr) -> str | None:
    """`a.b.c` for a chain of attributes on a name, else None."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return f"{base}.{node.attr}" if base else None
    return None
