"""The values a ref of the facts denotes, across the whole tree.

Values a ref can denote:

    ("def", q)     a function, method, lambda or class defined in the tree
    ("inst", q)    an instance of class q
    ("mod", m)     a module of the tree
    ("ext", d)     something outside the tree, by import path (`requests.get`)
    ("builtin", n) a builtin
    ("coll", k)    a container literal (k indexes its element refs)
    ("gen", q)     the generator a call to generator function q returns
    ("super", q)   `super()` inside class q
    ("prop", q)    a property whose getter (and setter) is method q
    ("extinst", d) an instance of the external class d (a call of a capitalised external name)
    ("extm", d)    an attribute of an external class reached through an instance or an external base
    ("returns", r) a callable an annotation declares, whose call returns what ref r declares

Evaluation is memoised and flow-insensitive, except that a name in straight-line code denotes only
the bindings that reach it. The memo cuts each cycle at its canonical head (`memo.CanonicalMemo`,
`cycleheads.CycleHeads`), so no value depends on the order of the questions. Parameters denote the
arguments argument flow has bound to them so far (`params`, grown by `slotrelay.psmr.analysis.rounds`), none
for a strict evaluation. The evaluator owns the state; its parts hold one concern each: the class
hierarchy, narrowing by checks, operator dunders, declared types, and call contexts.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from typing import Any

from slotrelay.psmr.analysis.buildbudget import BuildBudget
from slotrelay.psmr.analysis.callcontext import CallContexts, context_env
from slotrelay.psmr.analysis.cycleheads import CycleHeads
from slotrelay.psmr.analysis.declared import DeclaredTypes
from slotrelay.psmr.analysis.dunders import Dunders
from slotrelay.psmr.analysis.facttables import Consulted, ConsultedNames, LinkTables, NameBindings
from slotrelay.psmr.analysis.hierarchy import Hierarchy
from slotrelay.psmr.analysis.linkrules import (
    BUILTIN_NAMES,
    COLLECTION_METHODS,
    ELEMENT_BUILTINS,
    ENUM_BASES,
    FIRST_ARGUMENT_STANDS,
    MAX_ROWS,
    MAX_VALUES,
    ORDERING_DUNDERS,
    SERIALIZERS,
    Value,
    ordered,
)
from slotrelay.psmr.analysis.memo import CanonicalMemo
from slotrelay.psmr.analysis.narrowing import Narrowing


class Evaluator:
    """The values of one tree's refs, under the arguments flowed so far (`params`).

    `strict`: no argument flows into a parameter (only defaults). `record`: each lookup in the facts
    is recorded as used by what the memo is evaluating (`Consulted`), and the memo keeps who used what.
    """

    def __init__(
        self, modules: set[str], tables: LinkTables, *, strict: bool, record: bool, budget: BuildBudget
    ) -> None:
        self.strict = strict
        self.record = record
        self.budget = budget
        self.modules = modules
        self.tables = tables
        self.scopes: dict[str, dict[str, Any]] = tables.scopes
        self.bindings: dict[str, dict[str, list[Any]]] = tables.bindings
        self.defs: dict[str, dict[str, Any]] = tables.defs
        self.instance_attrs: dict[str, dict[str, tuple[Any, ...]]] = tables.instance_attrs
        self.stars: dict[str, list[str]] = tables.stars
        self.exports: dict[str, list[str] | None] = tables.exports
        self.property_names: set[str] = tables.property_names
        self.dunder_names: set[str] = tables.dunder_names
        self.metaclasses = tables.metaclasses
        # What argument flow has bound to each parameter (function, name or position).
        self.params: dict[tuple[str, Any], set[Any]] = defaultdict(set)
        self.memo: CanonicalMemo[frozenset[Value]] = CanonicalMemo(
            self._compute, self._on_cycle, CycleHeads(budget.look)
        )
        self.memo.keep_past = record
        if record:
            self.scopes = Consulted("scope", self.memo, self.scopes)
            self.defs = Consulted("def", self.memo, self.defs)
            self.stars = Consulted("stars", self.memo, self.stars)
            self.exports = Consulted("exports", self.memo, self.exports)
            self.instance_attrs = Consulted("instance_attrs", self.memo, self.instance_attrs)
            # Every scope has its names' table, empty or not, so a lookup in a scope that binds
            # nothing yet is recorded too.
            self.bindings = {
                scope: ConsultedNames(scope, self.memo, self.bindings.get(scope, {}))
                for scope in {*self.scopes, *self.bindings}
            }
        self.names = NameBindings(self.scopes, self.bindings, self.memo, record)
        self.hierarchy = Hierarchy(self)
        self.narrowing = Narrowing(self, self.hierarchy)
        self.dunders = Dunders(self, self.hierarchy)
        self.declared = DeclaredTypes(self, self.hierarchy, self.narrowing)
        self.contexts = CallContexts(self, self.names, self.declared)
        self._steps = self._eval_steps()

    def close(self) -> None:
        """Let go of everything: the evaluator and its parts refer to each other (its memo and its
        table of steps hold its bound methods, each part holds it), so without this only the cyclic
        collector frees them, with every fact they hold. Unusable after."""
        vars(self).clear()

    def eval(self, ref: Any) -> frozenset[Value]:
        """The values a frozen ref may denote (empty when unknown)."""
        if ref is None:
            return frozenset()
        return self.memo.get(ref)

    def _compute(self, key: Any) -> frozenset[Value]:
        self.budget.step()
        tag = key[0]
        if tag[0] != "@":
            result = frozenset(self._eval(key))
            if len(result) > MAX_VALUES and not (len(result) <= MAX_ROWS and self.parametrized(key)):
                return frozenset({("many", len(result))})
            return result
        if tag == "@modattr":
            return frozenset(self._module_attr(key[1], key[2]))
        if tag == "@apply":
            return self.contexts.compute_apply(key)
        if tag == "@in":
            return frozenset(self.contexts.compute_in(key[1], context_env(key[2]), key[3]))
        # "@name_in"
        return frozenset(self.contexts.compute_name_in(key[1], context_env(key[2]), key[3]))

    def _on_cycle(self, key: Any) -> frozenset[Value]:
        tag = key[0]
        if tag == "@apply":
            return frozenset(self.call_result(("def", key[1][0])))
        if tag == "@name_in":
            # A local bound in terms of itself (`x = x.parent`): its context-free values.
            return self.eval(key[1])
        return frozenset()

    def _eval(self, ref: Any) -> set[Value]:
        step = self._steps.get(ref[0])
        return set() if step is None else step(ref)

    def _eval_steps(self) -> dict[str, Callable[[Any], set[Value]]]:
        """How each kind of ref is evaluated (see the module docstring for the values)."""
        return {
            "name": lambda ref: self.lookup(ref[1], ref[2], ref[3] if len(ref) > 3 else None),
            "attr": self._eval_attr,
            "attrs": self._eval_attrs,
            "call": self._eval_call,
            "sub": self._eval_element,
            "iter": self._eval_element,
            "rows": self._eval_element,
            "coll": lambda ref: {("coll", ref)},
            "narrow": lambda ref: self.narrowing.narrow(self.eval(ref[1]), ref[2]),
            "without": lambda ref: self.narrowing.without(self.eval(ref[1]), ref[2]),
            "unlike": lambda ref: self.narrowing.unlike(self.eval(ref[1]), ref[2]),
            "typed": lambda ref: set(self.eval(ref[1])),
            "cast": self._eval_cast,
            "op": lambda ref: self.dunders.operator_result(ref[1]),
            "narrowcls": lambda ref: self.narrowing.narrow_classes(self.eval(ref[1]), ref[2]),
            "fixture": lambda ref: self.fixture_value(ref[1], ref[2]),
            "prop": lambda ref: {("prop", ref[1])},
            "vals": lambda ref: set(ref[1]),
            "guard": lambda ref: set(self.eval(ref[3])),
            "union": self._eval_union,
            "def": lambda ref: {("def", ref[1])},
            "deco": self.decorated,
            "imp": lambda ref: self.import_value(ref[1]),
            "from": lambda ref: self.from_value(ref[1], ref[2]),
            "param": self._eval_param,
            "annot": self._eval_annot,
            "alias": lambda ref: {("alias", ref[1])},
            "returns": lambda ref: {("returns", ref[1])},
            "kw": self._eval_keyword,
            "varargs": self._eval_varargs,
            "self": lambda ref: {("inst", ref[1])},
            "cls": lambda ref: {("def", ref[1])},
            "super": lambda ref: {("super", ref[1])},
        }

    def _eval_attr(self, ref: Any) -> set[Value]:
        out: set[Value] = set()
        for value in ordered(self.eval(ref[1])):
            out |= self.attribute(value, ref[2])
        return out

    def _eval_attrs(self, ref: Any) -> set[Value]:
        # `getattr(x, prefix + rest)`: the attributes whose names complete the prefix.
        out: set[Value] = set()
        completions = self.completions(ref[3])
        for value in ordered(self.eval(ref[1])):
            if completions is None and not ref[2]:
                # `getattr(x, name)` with a name from outside could be any attribute: none is guessed.
                names = []
            elif completions is None:
                names = self.prefixed_names(value, ref[2])
            else:
                names = [f"{ref[2]}{c}" for c in completions]
            for name in names:
                out |= self.attribute(value, name)
        return out

    def _eval_call(self, ref: Any) -> set[Value]:
        out: set[Value] = set()
        for value in ordered(self.eval(ref[1])):
            out |= self._called(value, ref)
        if ref[1][0] == "attr" and ref[1][2] in ("__enter__", "__aenter__"):
            # Entering what `contextlib.contextmanager` made of a generator: what it yields.
            for value in ordered(self.eval(ref[1][1])):
                out |= self.elements(value) if value[0] == "gen" else set()
        if ref[1][0] == "attr" and ref[1][2] == "__new__" and ref[2]:
            # `C.__new__(cls)` (object's, or `super().__new__(cls)`) makes an instance of cls.
            out |= {("inst", v[1]) for v in self.eval(ref[2][0]) if self.hierarchy.is_class(v)}
        return self.declared.declared_call(self.eval(ref[1]), out)

    def _called(self, value: Value, ref: Any) -> set[Value]:
        """What the call ref returns where its callee is this value."""
        if value[0] == "builtin":
            return self.builtin_result(value[1], ref[2])
        if value in FIRST_ARGUMENT_STANDS and ref[2]:
            return set(self.eval(ref[2][0]))
        if value[0] == "ext" and value[1] in SERIALIZERS and ref[2]:
            return self.serialized(value[1], ref[2][0])
        if value[0] == "collm":
            return self.collection_result(value[1], ref[2])
        if value[0] == "returns":
            return set(self.eval(value[1]))
        if value[0] == "def" and self.scopes.get(value[1], {}).get("overloads"):
            return self.declared.overload_result(value[1], ref[2], ref[3])
        if value[0] == "def" and ref[1][0] == "attr" and self.returns_receiver(value[1]):
            return self.result_on(value[1], self.eval(ref[1][1]))
        if value[0] == "def" and self.contexts.returns_argument(value[1]):
            # A function that returns (part of) its argument returns this call's argument.
            args = [frozenset(self.eval(a)) for a in ref[2]]
            kwargs = {k: frozenset(self.eval(v)) for k, v in ref[3]}
            return self.contexts.apply(value[1], args, kwargs, 0, self.contexts.maybe_none(ref))
        return self.call_result(value)

    def _eval_element(self, ref: Any) -> set[Value]:
        # `x[k]` (at a constant key if given), an element iterated, a test parameter's rows.
        subscript = ref[0] == "sub"
        key = ref[2] if subscript and len(ref) > 2 else None
        out: set[Value] = set()
        for value in ordered(self.eval(ref[1])):
            if subscript and self.hierarchy.is_class(value):
                out |= self.dunders.class_subscript(value[1])
            else:
                out |= self.elements(value, key)
        return out

    def _eval_cast(self, ref: Any) -> set[Value]:
        stated = {v for v in self.eval(ref[1]) if v[0] in ("inst", "def")}
        return stated or set(self.eval(ref[2]))

    def _eval_union(self, ref: Any) -> set[Value]:
        out: set[Value] = set()
        for part in ref[1]:
            out |= self.eval(part)
        return out

    def _eval_param(self, ref: Any) -> set[Value]:
        # What flowed into the parameter (by position or name), then its default.
        out: set[Value] = set()
        if not self.strict:
            flowed: set[Value] = set()
            self.memo.read(("@param", ref[1], ref[2]))
            self.memo.read(("@param", ref[1], ref[3]))
            for arg in ordered(
                self.params.get((ref[1], ref[2]), set()) | self.params.get((ref[1], ref[3]), set())
            ):
                flowed |= self.eval(arg)
            # Only what the annotation admits can arrive (in code whose annotations hold).
            out |= self.narrowing.admit(flowed, ref[5] if len(ref) > 5 else None)
        if ref[4] is not None:
            out |= self.eval(ref[4])
        return out

    def _eval_annot(self, ref: Any) -> set[Value]:
        out: set[Value] = set()
        for v in ordered(self.eval(ref[1])):
            if v[0] == "def" and self.defs.get(v[1], {}).get("kind") == "class":
                out.add(("inst", v[1]))
            elif v[0] == "alias":
                out |= self.eval(v[1])
        return out

    def _eval_keyword(self, ref: Any) -> set[Value]:
        # A keyword a function's `**` parameter took, where it passes it on (`f(**kwargs)`).
        self.memo.read(("@param", ref[1], ref[2]))
        out: set[Value] = set()
        for arg in () if self.strict else ordered(self.params.get((ref[1], ref[2]), ())):
            out |= self.eval(arg)
        return out

    def _eval_varargs(self, ref: Any) -> set[Value]:
        self.memo.read(("@param", ref[1], "*"))
        extra = () if self.strict else tuple(ordered(self.params.get((ref[1], "*"), ())))
        return {("coll", ("coll", extra, (None,) * len(extra)))}

    def parametrized(self, ref: Any) -> bool:
        """Whether a ref is a test parameter's `parametrize` values, or a name bound to them."""
        if ref[0] == "rows":
            return True
        return ref[0] == "name" and "rows" in self.names.binding_kinds(ref)

    def completions(self, rest: Any) -> list[str] | None:
        """The strings that complete an attribute name (`getattr(x, prefix + rest)`): rest's constant,
        or the constants the tree passes to the parameter rest is (none where it passes none: the
        names come from outside); None when rest may be anything else, so any name with the prefix."""
        if rest[0] == "const":
            return [str(rest[1])]
        if rest[0] == "name" and "rows" in self.names.binding_kinds(rest):
            # A test parameter: the strings `parametrize` lists for it, if it lists only constants (the
            # list of its rows then holds no ref).
            rows = [r[1] for r in self.names.binding_refs(rest) if r[0] == "rows"]
            constant = all(r[0] == "const" or (r[0] == "coll" and not r[1]) for r in rows)
            if self.names.binding_kinds(rest) <= {"param", "rows", "fixture"} and constant:
                return sorted({str(r[1]) for r in rows if r[0] == "const"})
            return None
        if rest[0] != "name" or self.names.binding_kinds(rest) != {"param"}:
            return None
        if self.strict:
            return []
        out: list[str] = []
        for param in self.names.binding_refs(rest):
            self.memo.read(("@param", param[1], param[2]))
            self.memo.read(("@param", param[1], param[3]))
            passed = self.params.get((param[1], param[2]), set())
            passed |= self.params.get((param[1], param[3]), set())
            if any(arg[0] != "const" for arg in passed):
                return None
            out += [str(arg[1]) for arg in passed]
        return sorted(set(out))

    def prefixed_names(self, value: Value, prefix: str) -> list[str]:
        """The names with this prefix that a class (along its MRO) or a module of the tree binds."""
        if value[0] == "mod":
            scopes = [value[1]]
        elif value[0] in ("inst", "def") and self.defs.get(value[1], {}).get("kind") == "class":
            scopes = self.hierarchy.mro(value[1])
        else:
            return []
        return sorted({n for scope in scopes for n in self.bindings.get(scope, {}) if n.startswith(prefix)})

    def fixture_value(self, module: str, name: str) -> set[Value]:
        """What the pytest fixture `name` gives a test (or fixture) of module: the nearest fixture of
        that name (the module's own, then each conftest.py from the module's package up), called
        (for a generator fixture, what it yields)."""
        parts = module.split(".")
        conftests = [".".join([*parts[:cut], "conftest"]) for cut in range(len(parts) - 1, -1, -1)]
        for place in [module, *conftests]:
            if place not in self.modules:
                continue
            fixtures = [v for v in self.module_attr(place, name) if v[0] == "def" and self.is_fixture(v[1])]
            if fixtures:
                out: set[Value] = set()
                for fixture in ordered(fixtures):
                    for result in self.call_result(fixture):
                        out |= self.elements(result) if result[0] == "gen" else {result}
                return out
        return set()

    def is_fixture(self, func: str) -> bool:
        """Whether a function is decorated as a pytest fixture."""
        return any("fixture" in d for d in self.defs.get(func, {}).get("decorators", ()))

    def builtin_result(self, name: str, args: Any) -> set[Value]:
        """What calling a builtin returns, where it is one of the tree's values: `next(it)`, `list(xs)`..."""
        if not args:
            return set()
        if name == "next":
            return {v for value in self.eval(args[0]) for v in self.elements(value)}
        if name in ELEMENT_BUILTINS:
            subject = args[1] if name == "filter" and len(args) > 1 else args[0]
            return {("coll", ("coll", (("iter", subject),), (None,)))}
        if name in ("enumerate", "zip"):
            # Tuples: (index, element) for enumerate, one element of each argument for zip.
            index = ("unk", "opaque_value")
            parts = [index, ("iter", args[0])] if name == "enumerate" else [("iter", a) for a in args]
            pair = ("coll", tuple(parts), tuple(range(len(parts))))
            return {("coll", ("coll", (pair,), (None,)))}
        if name in ("min", "max") and len(args) == 1:
            return {v for value in self.eval(args[0]) for v in self.elements(value)}
        if name in ("staticmethod", "classmethod"):
            return set(self.eval(args[0]))
        if name == "type" and len(args) == 1:
            return {("def", v[1]) for v in self.eval(args[0]) if v[0] == "inst"}
        return set()

    def returns_receiver(self, method: str) -> bool:
        """Whether a method returns its own `self`, `cls` or `cls(...)` (a fluent method, a factory)."""
        if self.defs.get(method, {}).get("kind") != "method":
            return False
        return any(self._receiver_return(r) for r in self.scopes.get(method, {}).get("returns", ()))

    def _receiver_return(self, ref: Any) -> str | None:
        # "self" for `return self`, "cls" for `return cls`, "new" for `return cls(...)`.
        if ref[0] == "name" and self.names.binding_kinds(ref) in ({"self"}, {"cls"}):
            return "self" if self.names.binding_kinds(ref) == {"self"} else "cls"
        if ref[0] == "call" and ref[1][0] == "name" and self.names.binding_kinds(ref[1]) == {"cls"}:
            return "new"
        return None

    def result_on(self, method: str, receivers: frozenset[Value]) -> set[Value]:
        """What a method that returns its receiver returns when called on these receivers: the
        subclass instance it was called on, not an instance of the class that defines it."""
        out: set[Value] = set()
        for ref in self.scopes.get(method, {}).get("returns", ()):
            kind = self._receiver_return(ref)
            if kind is None:
                out |= self.eval(ref)
                continue
            for value in receivers:
                if value[0] in ("inst", "super") and kind in ("self", "new"):
                    out.add(("inst", value[1]))
                elif value[0] == "def" and self.defs.get(value[1], {}).get("kind") == "class":
                    out.add(("inst", value[1]) if kind == "new" else value)
        return out or self.call_result(("def", method))

    def collection_result(self, method: tuple[Any, str], args: Any) -> set[Value]:
        """What a container literal's method returns: `d.get("k")` its element at k, `d.values()` it."""
        subject, name = method
        if name in ("get", "pop", "setdefault"):
            key = args[0][1] if args and args[0][0] == "const" else None
            return self.elements(("coll", subject), key)
        if name == "items":
            # (key, value) pairs: the keys are not modelled, the values are the container's.
            pair = ("coll", (("unk", "opaque_value"), ("iter", subject)), (0, 1))
            return {("coll", ("coll", (pair,), (None,)))}
        return {("coll", subject)}

    def lookup(self, scope: str, name: str, which: Any = None) -> set[Value]:
        """LEGB lookup of a name from a scope; class bodies are skipped from nested functions.

        `which`: the indexes of the scope's own bindings of the name that reach the use (all if None).
        """
        first = True
        current: str | None = scope
        while current is not None:
            info = self.scopes.get(current)
            if info is None:
                break
            if first or info["kind"] != "class":
                refs = self.bindings.get(current, {}).get(name)
                if refs and first and which is not None:
                    refs = [refs[i] for i in which if i < len(refs)]
                if refs:
                    out: set[Value] = set()
                    for r in refs:
                        out |= self.eval(r)
                    return out | self.patched(current, name) if info["kind"] == "module" else out
                if info["kind"] == "module":
                    starred = self.star_lookup(current, name)
                    if starred:
                        return starred
            first = False
            current = info["parent"]
        if name in BUILTIN_NAMES:
            return {("builtin", name)}
        return set()

    def patched(self, module: str, name: str) -> set[Value]:
        """What code elsewhere stores into a global of a module (`termui.visible_prompt_func = fake`,
        as a test harness patches it): while stored, the module's own reads of the name see it.
        Derived: the strict linker does not see it, since whether the store ran first is the run's."""
        if self.strict:
            return set()
        if self.record:
            self.memo.use(("stores", name))
        # An input of the run, like a parameter: what reads it is not the strict linker's too.
        self.memo.read(("@stores", module, name))
        out: set[Value] = set()
        for base, value in self.tables.stores.get(name, ()):
            if ("mod", module) in self.eval(base):
                out |= self.eval(value)
        return out

    def star_lookup(self, module: str, name: str) -> set[Value]:
        out: set[Value] = set()
        for source in self.stars.get(module, []):
            if source not in self.modules:
                out.add(("ext", f"{source}.{name}"))
                continue
            exported = self.exports.get(source)
            if (exported is None and not name.startswith("_")) or (exported and name in exported):
                out |= self.module_attr(source, name)
        return out

    def module_attr(self, module: str, name: str) -> set[Value]:
        """What `module.name` denotes: its binding, a submodule, or a star import's export."""
        return set(self.memo.get(("@modattr", module, name)))

    def _module_attr(self, module: str, name: str) -> set[Value]:
        # `from . import sub` in a package's __init__ binds sub to the submodule, not to itself.
        refs = [r for r in self.bindings.get(module, {}).get(name, ()) if r != ("from", module, name)]
        if refs:
            out: set[Value] = set()
            for r in refs:
                out |= self.eval(r)
            return out | self.patched(module, name)
        if f"{module}.{name}" in self.modules:
            return {("mod", f"{module}.{name}")}
        return self.star_lookup(module, name)

    def import_value(self, dotted: str) -> set[Value]:
        if dotted in self.modules:
            return {("mod", dotted)}
        parts = dotted.split(".")
        for cut in range(len(parts) - 1, 0, -1):
            head = ".".join(parts[:cut])
            if head in self.modules:
                values = {("mod", head)}
                for attr in parts[cut:]:
                    values = {v for value in values for v in self.attribute(value, attr)}
                return values
        return {("ext", dotted)}

    def from_value(self, module: str, name: str) -> set[Value]:
        if module in self.modules:
            return self.module_attr(module, name)
        if f"{module}.{name}" in self.modules:
            return {("mod", f"{module}.{name}")}
        head = self.import_value(module)
        if head and all(v[0] == "ext" for v in head):
            return {("ext", f"{module}.{name}")}
        return {v for value in head for v in self.attribute(value, name)}

    def attribute(self, value: Value, name: str) -> set[Value]:
        kind, subject = value
        if kind == "mod":
            return self.module_attr(subject, name)
        if kind == "ext":
            return {("ext", f"{subject}.{name}")}
        if kind == "extinst":
            return {("extm", f"{subject}.{name}")}
        if kind == "coll" and name in COLLECTION_METHODS:
            return {("collm", (subject, name))}
        if kind == "def" and self.defs.get(subject, {}).get("kind") == "class":
            return self.class_attr(subject, name, instance=False)
        if kind == "inst":
            found = self.class_attr(subject, name, instance=True)
            if not found and name in ORDERING_DUNDERS and self.dunders.total_ordering(subject):
                # The comparison `functools.total_ordering` adds runs the one it derives it from.
                return {("def", m) for m in self.dunders.instance_operator(subject, (name,))}
            return found or ({("def", subject)} if name == "__class__" else set())
        if kind == "super":
            return self.super_attr(subject, name)
        return set()

    def super_attr(self, cls: str, name: str) -> set[Value]:
        """`super().name` in class cls: the next definition after cls in cls's MRO (or object's)."""
        out = self.class_attr(cls, name, instance=True, after_self=True)
        if not out and not self.hierarchy.method_bases(cls) and hasattr(object, name):
            out = {("builtin", f"object.{name}")}
        return out

    def class_attr(self, cls: str, name: str, *, instance: bool, after_self: bool = False) -> set[Value]:
        """An attribute along the MRO; through an instance a property is its getter's result.

        Not found in the tree's classes, it is the attribute of the one external base (if one).
        """
        if not instance and name in self.enum_members(cls):
            return {("inst", cls)}
        order = self.hierarchy.mro(cls)
        for klass in order[1:] if after_self else order:
            out: set[Value] = set()
            for r in self.bindings.get(klass, {}).get(name, []):
                out |= self.eval(r)
            if instance:
                refs = self.instance_attrs.get(klass, {}).get(name, ())
                # A declared attribute (`self._body: list[...]`, a field) holds what it declares,
                # not every value stored in it along the way.
                declared: set[Value] = set()
                for r in refs:
                    if r[0] == "typed":
                        declared |= self.eval(r)
                for r in refs if not declared else ():
                    out |= self.eval(r)
                out |= declared
            if out:
                props = {v for v in out if v[0] == "prop"}
                if instance and props:
                    out -= props
                    for prop in props:
                        out |= self.call_result(("def", prop[1]))
                return out
        bases = self.hierarchy.method_bases(cls)
        return {("extm", f"{bases[0]}.{name}")} if len(bases) == 1 else set()

    def enum_members(self, cls: str) -> list[str]:
        """The members of an Enum subclass: the names its own body binds, but for `_`-prefixed ones
        and descriptors (its methods and properties)."""
        bound = self.bindings.get(cls, {})
        if not bound or not ENUM_BASES.intersection(self.hierarchy.external_bases(cls)):
            return []
        return [
            name
            for name, refs in bound.items()
            if not name.startswith("_")
            and not any(v[0] in ("def", "prop") for r in refs for v in self.eval(r))
        ]

    def call_result(self, value: Value) -> set[Value]:
        kind, subject = value
        if kind == "def":
            info = self.defs.get(subject)
            if info is None:
                return set()
            if info["kind"] == "class":
                return {("inst", subject)}
            scope = self.scopes.get(subject, {})
            if scope.get("generator"):
                return {("gen", subject)}
            out: set[Value] = set()
            for r in scope.get("returns", []):
                out |= self.eval(r)
            return self.declared.with_declared(subject, out)
        if kind == "inst":
            out = set()
            for method in self.class_attr(subject, "__call__", instance=True):
                out |= self.call_result(method)
            return out
        if kind == "ext" and subject.rsplit(".", 1)[-1][:1].isupper():
            # A capitalised external name is taken for a class: its call makes an instance.
            return {("extinst", subject)}
        return set()

    def elements(self, value: Value, key: Any = None) -> set[Value]:
        """What iterating (or indexing, at a constant key if given) a value yields."""
        kind, subject = value
        out: set[Value] = set()
        if kind == "coll":
            refs, keys = subject[1], subject[2] if len(subject) > 2 else (None,) * len(subject[1])
            for r, k in zip(refs, keys, strict=False):
                if key is None or k is None or k == key:
                    out |= self.eval(r)
        elif kind == "gen":
            for r in self.scopes.get(subject, {}).get("yields", []):
                out |= self.eval(r)
        elif kind == "def" and self.enum_members(subject):
            # Iterating an Enum subclass yields its members.
            out.add(("inst", subject))
        elif kind == "inst":
            for iterator in self.protocol_results(subject, "__iter__"):
                if iterator[0] == "inst":
                    out |= self.protocol_results(iterator[1], "__next__")
                else:
                    out |= self.elements(iterator)
            out |= self.protocol_results(subject, "__getitem__")
        return out

    def protocol_results(self, cls: str, method: str) -> set[Value]:
        """What calling a protocol method of the tree's class returns (nothing for an external one)."""
        out: set[Value] = set()
        for found in self.class_attr(cls, method, instance=True):
            out |= self.call_result(found)
        return out

    def decorated(self, ref: Any) -> set[Value]:
        """What a decorated definition's name denotes: the decorators' results, innermost first.

        Each decorator is applied to this definition alone (`apply`), so one that hands back what it is
        given (a registry, rich's @auto) gives back this definition, not every one it decorates.
        """
        values = self.eval(ref[2])
        for deco in reversed(ref[1]):
            applied: set[Value] = set()
            decorators = self.contexts.eval_in(deco, {}, 0)
            for d in decorators:
                if d[0] == "def" and self.defs.get(d[1], {}).get("kind") != "class":
                    applied |= self.contexts.apply(d[1], [values], {}, 0)
                elif d[0] == "def":
                    # A class used as decorator wraps the function in an instance; the function
                    # itself stays reachable, so keep both.
                    applied |= {("inst", d[1]), *values}
                elif d[0] == "returns":
                    # A decorator its factory's annotation types (`-> Callable[[F], Group]`).
                    applied |= self.eval(d[1])
            if applied:
                values = frozenset(self.declared.declared_call(decorators, applied))
        return set(values)

    def serialized(self, function: str, arg: Any) -> set[Value]:
        """What copying or pickling returns: a copy is of its argument's class, `pickle.dumps(x)`
        the bytes of x's instances (`("pickled", cls)`), and `pickle.loads` of those bytes their class's
        instance again (bytes read from anywhere else are of no class the code states)."""
        values = self.eval(arg)
        if function == "pickle.loads":
            return {("inst", v[1]) for v in values if v[0] == "pickled"}
        kind = "pickled" if function == "pickle.dumps" else "inst"
        return {(kind, v[1]) for v in values if v[0] == "inst"}
