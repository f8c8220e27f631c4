"""The callees of a call site: what its callee denotes, made targets (a class's constructor methods,
an instance's `__call__`), with the calls a builtin or the standard library makes of its arguments,
the overrides dispatch may reach, and how each was found (its resolution)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from slotrelay.psmr.analysis.evaluation import Evaluator
from slotrelay.psmr.analysis.facttables import cached
from slotrelay.psmr.analysis.linkrules import (
    ATTRIBUTE_KINDS,
    CALLED_ARGUMENTS,
    ITERATING_BUILTINS,
    MAX_ENUMERATION_DEPTH,
    ORDERED_BY,
    ORDERING_DUNDERS,
    SERIALIZERS,
    STATED_KINDS,
    WRAPPED_BUFFER_CALLS,
    Value,
    ordered,
)
from slotrelay.psmr.analysis.typerefs import BUILTIN_DUNDERS, OPERATOR_FUNCTIONS


@dataclass
class CallTarget:
    """One resolved callee of a call site."""

    target: str
    kind: str
    resolution: str



class CallTargets:
    """The targets of call sites, as one evaluation (`values`) denotes their callees."""

    def __init__(self, values: Evaluator) -> None:
        self.values = values
        self.names = values.names
        self.hierarchy = values.hierarchy
        self.dunders = values.dunders
        self.contexts = values.contexts
        self.strict = values.strict
        self.record = values.record
        self.memo = values.memo
        self.params = values.params
        self.modules = values.modules
        self.defs = values.defs
        self.bindings = values.bindings
        self.instance_attrs = values.instance_attrs
        self.metaclasses = values.metaclasses
        # The classes the tree instantiates: set once argument flow has settled (`Linker.settle`).
        self.constructed: set[str] = set()
        self._enumerated: dict[Any, frozenset[Value]] = {}
        self._abstract: dict[Any, bool] = {}

    def sibling_supers(self, cls: str, name: str) -> list[str]:
        """For `super().name()` in class cls, the methods the MRO of a subclass the tree instantiates
        puts next instead (diamond inheritance: Left's super() is Right in Both(Left, Right))."""
        out = []
        for sub in self.hierarchy.subclasses(cls):
            if not self.is_constructed(sub):
                continue
            order = self.hierarchy.mro(sub)
            for klass in order[order.index(cls) + 1 :]:
                if f"{klass}.{name}" in self.defs:
                    out.append(f"{klass}.{name}")
                    break
                if name in self.bindings.get(klass, {}):
                    break
        return sorted(set(out))

    def targets(self, site: dict[str, Any]) -> list[CallTarget]:
        """The resolved callees of one call site, with how each was resolved."""
        callee = site["callee"]
        found: dict[str, CallTarget] = {}
        resolution = self.resolution(callee)
        # A receiver the code binds to instances of several classes whose methods of that name differ:
        # which one runs is a guess.
        several = callee[0] == "attr" and len(self.method_owners(callee[1], callee[2])) > 1
        if resolution in ("attribute", "constructor", "annotation") and several:
            resolution = "heuristic"
        # A decorator site calls the decorator (or what `@factory(...)` returned for this site alone).
        values = self.contexts.eval_in(callee, {}, 0) if site.get("decorates") else self.values.eval(callee)
        for value in ordered(values):
            offset = self.bound_offset(callee, value)
            for target in self.value_targets(value, resolution):
                if self.fits(target, site, offset):
                    found.setdefault(target.target, target)
            if value[0] == "builtin":
                # The builtin calls what it is given (`map(f, xs)`, `sorted(xs, key=f)`), nothing else,
                # and the dunder of its argument it stands for (`len(x)`: x.__len__).
                for arg in ordered(self.called_arguments(value[1], site)):
                    for v in ordered(self.values.eval(arg)):
                        for target in self.value_targets(v, "lexical") if v[0] in ("def", "builtin") else []:
                            found.setdefault(target.target, target)
                for subject in self.iterated_arguments(value[1], site):
                    # `list(xs)`, `enumerate(xs)`: iterating xs (a generator's body runs from here).
                    how = self.implicit_resolution(subject)
                    for v in ordered(self.values.eval(subject)):
                        for target in self.protocol_targets(v, "__iter__", "__next__", how):
                            found.setdefault(target.target, target)
                names = BUILTIN_DUNDERS.get(value[1])
                if names and site["args"] and self.dunders.defines_dunder(names):
                    subject = site["args"][0]
                    how = self.implicit_resolution(subject)
                    for method in self.dunders.operator_methods(self.values.eval(subject), names):
                        found.setdefault(method, CallTarget(method, "method", how))
                for target in self.ordering_targets(value[1], site):
                    found.setdefault(target.target, target)
            elif value[0] in ("ext", "extm") and value[1].removesuffix(".__init__") in WRAPPED_BUFFER_CALLS:
                for target in self.wrapped_buffer_targets(value[1].removesuffix(".__init__"), site):
                    found.setdefault(target.target, target)
            elif value[0] == "ext" and value[1] in CALLED_ARGUMENTS:
                for arg in ordered(self.called_arguments(value[1], site)):
                    for v in ordered(self.values.eval(arg)):
                        for target in self.value_targets(v, "lexical") if v[0] == "def" else []:
                            found.setdefault(target.target, target)
            elif value[0] == "ext" and value[1] in SERIALIZERS and site["args"]:
                for target in self.serializer_methods(value[1], site["args"][0]):
                    found.setdefault(target.target, target)
            elif value[0] == "ext" and value[1].startswith("operator."):
                function = value[1].removeprefix("operator.")
                for target in self.operator_function_targets(function, site, resolution):
                    found.setdefault(target.target, target)
        if not self.strict and any(v[0] == "many" for v in values):
            # Too many values to carry (every command's stored callback): each argument that flows
            # into the parameters and attributes the callee reads denotes its functions alone.
            for value in ordered(self.enumerated(callee)):
                for target in self.value_targets(value, "heuristic"):
                    found.setdefault(target.target, target)
        if callee[0] == "attr":
            # `x.m()` where x's class (and x) binds no m: Python asks the class's `__getattr__` for it
            # (derived, as for a read: `setattr` may have stored m).
            for value in ordered(self.values.eval(callee[1])):
                hook = self.getattr_hook(value, callee[2]) if value[0] == "inst" else None
                if hook is not None:
                    found.setdefault(hook, CallTarget(hook, "method", "heuristic"))
        if not self.strict:
            dispatched = self.dispatched(callee, found)
            if dispatched and callee[0] in ("attr", "name"):
                # Where an override may run instead, which of them runs depends on the receiver's
                # class at run time: the method the declared class finds is a guess too.
                read = {callee[2]} if callee[0] == "attr" else {n for _, n in self.bound_reads(callee)}
                for name, target in list(found.items()):
                    overridden = target.kind == "method" and name.rsplit(".", 1)[-1] in read
                    if overridden and not self.is_abstract(name):
                        found[name] = CallTarget(name, "method", "heuristic")
            for method in dispatched:
                found.setdefault(method, CallTarget(method, "method", "heuristic"))
        return sorted(found.values(), key=lambda t: t.target)

    def dispatched(self, callee: Any, found: dict[str, CallTarget]) -> list[str]:
        """The methods a call may reach through dispatch, beyond what its receiver denotes: a
        sibling's for `super().m()`, the overrides in subclasses for `self.m()`, a receiver its
        annotation declares, or a method that is abstract (a Protocol's, an ABC's, a stub); for
        `c()` where `issubclass(c, C)` holds, the constructors of C's subclasses."""
        if callee[0] == "narrowcls":
            out = []
            for value in ordered(self.values.eval(callee)):
                if value[0] == "def":
                    for sub in self.hierarchy.subclasses(value[1]):
                        made = self.value_targets(("def", sub), "heuristic")
                        out += [t.target for t in made if t.kind == "method"]
            return sorted(set(out) - found.keys())
        if callee[0] == "name":
            # `report = e.show; report()` runs what `e.show()` would.
            return sorted({m for r, n in self.bound_reads(callee) for m in self.overrides(r, n, found)})
        if callee[0] != "attr":
            return []
        if callee[1][0] == "super":
            return self.sibling_supers(callee[1][1], callee[2])
        return self.overrides(callee[1], callee[2], found)

    def bound_reads(self, name_ref: Any) -> list[tuple[Any, str]]:
        """The attribute reads (receiver, name) a called name is bound to: `report = e.show`, or an
        element of a literal tuple unpacked into it (`report, code = e.show, e.code`)."""
        out = []
        for ref in self.names.binding_refs(name_ref):
            while ref[0] == "sub" and ref[1][0] == "coll" and isinstance(ref[2], int) and ref[2] in ref[1][2]:
                ref = ref[1][1][ref[1][2].index(ref[2])]
            if ref[0] == "attr" and ref[1][0] != "super":
                out.append((ref[1], ref[2]))
        return out

    def implicit_resolution(self, receiver: Any) -> str:
        """How a call without call syntax on a receiver is resolved: `implicit`, or `heuristic` where
        the receiver is a guess (a parameter) or denotes instances of several classes; a container
        literal is as sure as its least sure element."""
        if receiver[0] == "coll":
            sure = all(self.implicit_resolution(r) == "implicit" for r in receiver[1])
            return "implicit" if sure else "heuristic"
        if self.resolution(("attr", receiver, "")) == "heuristic" or len(self.receiver_classes(receiver)) > 1:
            return "heuristic"
        return "implicit"

    def receiver_classes(self, receiver: Any) -> set[Any]:
        """The classes (or modules) a receiver's values belong to, for telling one from several; a
        container literal, each generator and too many values to tell count as a class of their own
        (`return missing` on one path and a list on another: which `len` runs depends on the data)."""
        values = self.values.eval(receiver)
        classes = {v[1] for v in values if v[0] in ("inst", "def", "super", "mod", "extinst")}
        classes |= {v for v in values if v[0] == "gen"}
        return classes | {(v[0],) for v in values if v[0] in ("coll", "many")}

    def method_owners(self, receiver: Any, name: str) -> set[Any]:
        """What an attribute call on the receiver runs, per class of its values: the method their MRO
        finds (one for a class and a subclass that inherits it), else the class or module itself. An
        abstract method is a declaration its implementations answer for: it is none of them."""
        out: set[Any] = set()
        for kind, subject in self.values.eval(receiver):
            if kind in ("inst", "def"):
                method = self.hierarchy.find_method(subject, name)
                if method is None or not self.is_abstract(method):
                    out.add(method or subject)
            elif kind in ("super", "mod", "extinst"):
                out.add(subject)
            elif kind in ("coll", "many"):
                out.add((kind,))
            elif kind == "gen":
                out.add((kind, subject))
        return out

    def wrapped_buffer_targets(self, cls: str, site: dict[str, Any]) -> list[CallTarget]:
        """`TextIOWrapper(buffer)` (or a subclass's `super().__init__(buffer)`): the methods of the
        buffer it calls (WRAPPED_BUFFER_CALLS), or the `__getattr__` the buffer's class answers a
        missing one with. Derived: which of them run depends on what the buffer answers."""
        buffer = site["args"][0] if site["args"] else site["kwargs"].get("buffer")
        out = []
        for value in ordered(self.values.eval(buffer)) if buffer is not None else []:
            if value[0] != "inst":
                continue
            for name in WRAPPED_BUFFER_CALLS[cls]:
                method = self.hierarchy.find_method(value[1], name) or self.getattr_hook(value, name)
                if method is not None:
                    out.append(CallTarget(method, "method", "heuristic"))
        return out

    @staticmethod
    def called_arguments(builtin: str, site: dict[str, Any]) -> list[Any]:
        """The arguments a builtin (or a function of CALLED_ARGUMENTS) calls: `map(f, xs)` and
        `filter(f, xs)` call f, `max(xs, key=f)` f."""
        if builtin == "iter":
            # iter(f, sentinel) calls f until it returns the sentinel; iter(xs) calls nothing given.
            return [site["args"][0]] if len(site["args"]) == 2 else []
        indexes, keywords = CALLED_ARGUMENTS.get(builtin, ((), ()))
        return [site["args"][i] for i in indexes if i < len(site["args"])] + [
            site["kwargs"][k] for k in keywords if k in site["kwargs"]
        ]

    def ordering_targets(self, builtin: str, site: dict[str, Any]) -> list[CallTarget]:
        """`max(a, b)`, `min(xs)`, `sorted(xs)` without a key: the comparisons of the values compared
        (max asks `>`, min and sorted `<`, each falling back on the reflected one)."""
        names = ORDERED_BY.get(builtin)
        args = site["args"]
        if names is None or not args or "key" in site["kwargs"]:
            return []
        if not self.dunders.defines_dunder(ORDERING_DUNDERS):
            return []
        compared = args if len(args) > 1 and builtin != "sorted" else [("iter", args[0])]
        out = []
        for subject in compared:
            how = self.implicit_resolution(subject)
            values = frozenset(v for v in self.values.eval(subject) if v[0] == "inst")
            out += [CallTarget(m, "method", how) for m in self.dunders.operator_methods(values, names)]
        return out

    def operator_function_targets(self, name: str, site: dict[str, Any], resolution: str) -> list[CallTarget]:
        """`operator.lt(a, b)` (or a parameter given `operator.lt`) is `a < b`: a's `__lt__`, then b's
        reflected `__gt__`; derived where the function is a value flowed in through a parameter."""
        names = OPERATOR_FUNCTIONS.get(name)
        if names is None:
            return []
        out = []
        for subject, dunders in zip(site["args"], names, strict=False):
            if not dunders or not self.dunders.defines_dunder(self.dunders.operator_names(dunders)):
                continue
            how = "heuristic" if resolution == "heuristic" else self.implicit_resolution(subject)
            methods = self.dunders.operator_methods(self.values.eval(subject), dunders)
            out += [CallTarget(m, "method", how) for m in methods]
        return out

    @staticmethod
    def iterated_arguments(builtin: str, site: dict[str, Any]) -> list[Any]:
        """The arguments a builtin iterates: `list(xs)`, `sorted(xs)`, `enumerate(xs)`, `zip(a, b)`,
        `map(f, xs)` (the lazy ones are nearly always consumed where they are made)."""
        args = site["args"]
        if builtin in ("zip",):
            return list(args)
        if builtin in ("map", "filter"):
            return list(args[1:])
        return list(args[:1]) if builtin in ITERATING_BUILTINS else []

    def bound_offset(self, callee: Any, value: Value) -> int | None:
        """How many leading parameters the call binds itself (self or cls); None when it cannot tell."""
        if value[0] != "def":
            return None
        info = self.defs.get(value[1], {})
        decorators = info.get("decorators", [])
        if info.get("kind") == "class" or "classmethod" in decorators:
            return 1
        if info.get("kind") != "method" or "staticmethod" in decorators:
            return 0
        if callee[0] != "attr":
            return None
        receivers = {v[0] for v in self.values.eval(callee[1])}
        if receivers <= {"inst", "super"}:
            return 1
        return 0 if receivers == {"def"} else None

    def fits(self, target: CallTarget, site: dict[str, Any], offset: int | None) -> bool:
        """False when the target's signature cannot take the site's arguments (the call would raise)."""
        info = self.defs.get(target.target, {})
        accepts = info.get("accepts")
        decorators = [d for d in info.get("decorators", []) if d not in ("classmethod", "staticmethod")]
        if accepts is None or offset is None or decorators or site.get("unpacks"):
            # A decorator may replace the signature; unpacked arguments have no count.
            return True
        positional = accepts["positional"][offset:]
        if not accepts["varargs"] and len(site["args"]) > len(positional):
            return False
        return accepts["varkw"] or all(k in accepts["keywords"] for k in site["kwargs"])

    def overrides(self, receiver: Any, name: str, found: dict[str, CallTarget]) -> list[str]:
        """The methods that replace (or supply) m in subclasses of the receiver's class, for
        `self.m()` and any receiver whose class the code does not fix (a parameter, an annotation,
        an attribute, a call's result, an element); for an instance the code constructs
        (`x = Cls(); x.m()`), only those that supply an m its class lacks, or that implement an
        abstract one.

        Only subclasses the tree instantiates count; a hierarchy the tree never instantiates (a
        library's, instantiated by its users) dispatches to every override.
        """
        classes = {v[1] for v in self.values.eval(receiver) if v[0] == "inst"}
        if self.constructed_here(receiver) and not any(self.is_abstract(t.target) for t in found.values()):
            classes = {c for c in classes if not self.values.class_attr(c, name, instance=True)}
        out = set()
        for cls in sorted(classes):
            out |= set(self.subclass_methods(cls, (name,)))
        return sorted(out - found.keys())

    def constructed_here(self, receiver: Any) -> bool:
        """Whether a receiver is a name bound only to constructor calls of the tree's classes."""
        if receiver[0] != "name" or self.names.binding_kinds(receiver) != {"call"}:
            return False
        return all(
            any(self.hierarchy.is_class(v) for v in self.values.eval(r[1]))
            for r in self.names.binding_refs(receiver)
        )

    def live_subclasses(self, cls: str) -> list[str]:
        """The subclasses of cls the tree instantiates, or all of them when it instantiates none."""
        subs = self.hierarchy.subclasses(cls)
        live = [s for s in subs if self.is_constructed(s)]
        return live if live or self.is_constructed(cls) else subs

    def subclass_methods(self, cls: str, names: Any) -> list[str]:
        """The first of the named methods each subclass of cls has (of those the tree instantiates,
        or of all when it instantiates none)."""
        out = []
        for sub in self.live_subclasses(cls):
            method = next(filter(None, (self.hierarchy.find_method(sub, n) for n in names)), None)
            if method:
                out.append(method)
        return out

    def is_abstract(self, method: str) -> bool:
        """Whether a method only declares what subclasses implement: `@abstractmethod`, a stub body
        (`...`, `pass`, `raise NotImplementedError`), or a method of a Protocol (cached)."""
        abstract: bool = cached(
            self.memo,
            self.record,
            self._abstract,
            ("@abstract", method),
            lambda: self._is_abstract(method),
        )
        return abstract

    def _is_abstract(self, method: str) -> bool:
        info = self.defs.get(method, {})
        if info.get("kind") != "method":
            return False
        if info.get("stub") or any(d.endswith("abstractmethod") for d in info.get("decorators", [])):
            return True
        owner = info.get("parent", "")
        return any(b.endswith(".Protocol") for b in self.hierarchy.external_bases(owner))

    def is_constructed(self, cls: str) -> bool:
        """Whether the tree instantiates a class somewhere (known once argument flow has settled)."""
        if self.record:
            self.memo.use(("constructed", cls))
        return cls in self.constructed

    def metaclass(self, cls: str) -> str | None:
        """The tree's class that is cls's metaclass (declared on cls or a base), if any."""
        if self.record:
            self.memo.use(("metaclasses",))
        if not self.metaclasses:
            return None
        for klass in self.hierarchy.mro(cls):
            ref = self.defs.get(klass, {}).get("metaclass")
            if ref is not None:
                found = [v[1] for v in ordered(self.values.eval(ref)) if self.hierarchy.is_class(v)]
                return found[0] if found else None
        return None

    def protocol_targets(self, value: Value, first: str, second: str, resolution: str) -> list[CallTarget]:
        """`for`/`with` on an instance: its first protocol method, then the second (for `for`, on the
        iterator the first returned). Iterating or entering a generator runs its function's body, from
        here."""
        iterates = first in ("__iter__", "__aiter__")
        if value[0] == "gen":
            # Entering a generator is entering what `contextlib.contextmanager` made of its function
            # (a bare generator has no `__enter__`): the body runs up to its `yield` from here.
            return [CallTarget(value[1], self.defs.get(value[1], {}).get("kind", "function"), resolution)]
        if value[0] != "inst":
            return []
        out = []
        method = self.hierarchy.find_method(value[1], first)
        if method:
            out.append(CallTarget(method, "method", resolution))
        if iterates:
            made = self.values.call_result(("def", method)) if method else set()
            subjects = [v[1] for v in ordered(made) if v[0] == "inst"]
            for made_value in ordered(made):
                if made_value[0] == "gen":
                    out += self.protocol_targets(made_value, first, second, resolution)
        else:
            subjects = [value[1]]
        for subject in subjects:
            follow = self.hierarchy.find_method(subject, second)
            if follow:
                out.append(CallTarget(follow, "method", resolution))
        return out

    def serializer_methods(self, function: str, arg: Any) -> list[CallTarget]:
        """The methods copying or pickling runs of the tree's classes (the `copy` and `pickle` modules'
        protocol): `__copy__`/`__deepcopy__` where defined, else the object is reduced
        (`__reduce_ex__`, `__reduce__`, `__getstate__`) and, for a copy or `pickle.loads`, rebuilt: the
        callable the reduction names (a class is constructed) or `__new__`, then `__setstate__`."""
        how = self.implicit_resolution(arg)
        values = self.values.eval(arg)
        if function == "pickle.loads":
            declared = sorted({v[1] for v in values if v[0] == "pickled"})
        else:
            declared = sorted({v[1] for v in values if v[0] == "inst"})
        # A value declared as a base may be any subclass the tree instantiates: which class's protocol
        # runs is then a guess.
        subclasses = []
        if not self.constructed_here(arg):
            subclasses = [s for c in declared for s in self.live_subclasses(c) if s not in declared]
        if subclasses:
            how = "heuristic"
        out: list[str] = []
        for cls in dict.fromkeys(declared + subclasses):
            own = {"copy.copy": "__copy__", "copy.deepcopy": "__deepcopy__"}.get(function)
            method = self.hierarchy.find_method(cls, own) if own else None
            if method:
                out.append(method)
                continue
            reducers = (self.hierarchy.find_method(cls, n) for n in ("__reduce_ex__", "__reduce__"))
            reduce = next(filter(None, reducers), None)
            if function != "pickle.loads":
                out += [m for m in (reduce, self.hierarchy.find_method(cls, "__getstate__")) if m]
            if function == "pickle.dumps":
                continue
            if reduce is None:
                out += [m for m in (self.hierarchy.find_method(cls, "__new__"),) if m]
            else:
                owner = reduce.rsplit(".", 1)[0]
                for result in ordered(self.values.call_result(("def", reduce))):
                    for made in ordered(self.values.elements(result, 0)):
                        # `self.__class__` in the base's reduction is the class being copied.
                        made = ("def", cls) if made == ("def", owner) else made
                        out += [t.target for t in self.value_targets(made, how) if t.kind == "method"]
            out += [m for m in (self.hierarchy.find_method(cls, "__setstate__"),) if m]
        return [CallTarget(m, "method", how) for m in dict.fromkeys(out)]

    def getattr_hook(self, value: Value, name: str) -> str | None:
        """The `__getattr__` an instance's read of `name` asks, where neither the instance's stored
        attributes nor its class's MRO (all of the tree's, no external base) bind the name; and a
        module's (PEP 562) where the module binds no such name and has no such submodule."""
        if name.startswith("__") and name.endswith("__"):
            return None
        if value[0] == "mod":
            module = value[1]
            bound = name in self.bindings.get(module, {}) or f"{module}.{name}" in self.modules
            if bound or self.values.star_lookup(module, name):
                return None
            hooks = [v[1] for v in ordered(self.values.module_attr(module, "__getattr__")) if v[0] == "def"]
            return hooks[0] if hooks else None
        if value[0] != "inst":
            return None
        cls = value[1]
        hook = self.hierarchy.find_method(cls, "__getattr__")
        if hook is None or self.hierarchy.method_bases(cls):
            return None
        if self.values.class_attr(cls, name, instance=True):
            return None
        stored = any(self.instance_attrs.get(k, {}).get(name) for k in self.hierarchy.mro(cls))
        return None if stored else hook

    def value_targets(self, value: Value, resolution: str) -> list[CallTarget]:
        kind, subject = value
        if kind == "def":
            info = self.defs.get(subject)
            if info is None:
                return []
            if info["kind"] == "class":
                # A class abc refuses to instantiate raises TypeError before it is made: only a call
                # whose class is a guess (a subclass at run time) constructs anything.
                how = "heuristic" if self.is_abstract_class(subject) else "constructor"
                out = [CallTarget(subject, "class", how)]
                # A metaclass's __call__ runs the construction, __new__ makes the instance, __init__
                # sets it up.
                meta = self.metaclass(subject)
                called = self.hierarchy.find_method(meta, "__call__") if meta else None
                made = self.hierarchy.find_method(subject, "__new__")
                for method in (called, made, self.hierarchy.find_method(subject, "__init__")):
                    if method:
                        out.append(CallTarget(method, "method", how))
                return out
            return [CallTarget(subject, info["kind"], resolution)]
        if kind == "inst":
            method = self.hierarchy.find_method(subject, "__call__")
            return [CallTarget(method, "method", resolution)] if method else []
        if kind == "builtin":
            return [CallTarget(f"<builtin>.{subject}", "builtin", "lexical")]
        if kind == "ext":
            return [CallTarget(subject, "external", "import")]
        if kind == "extm":
            # A method of an external class: the class was guessed from a name or a base.
            return [CallTarget(subject, "external", "heuristic")]
        return []

    def is_abstract_class(self, cls: str) -> bool:
        """Whether abc refuses to instantiate cls: its metaclass is `abc.ABCMeta` (declared, or through
        `abc.ABC`) and a name its MRO binds first is an `@abstractmethod`."""
        mro = self.hierarchy.mro(cls)
        abc_meta = "abc.ABC" in self.hierarchy.external_bases(cls) or any(
            ("ext", "abc.ABCMeta") in self.values.eval(self.defs.get(klass, {}).get("metaclass"))
            for klass in mro
        )
        if not abc_meta:
            return False
        for klass in mro:
            for name in self.defs.get(klass, {}).get("abstract", ()):
                first = next((k for k in mro if name in self.bindings.get(k, {})), None)
                if first == klass:
                    return True
        return False

    def resolution(self, callee: Any) -> str:
        """How a callee ref is resolved: lexical, import, self_mro, constructor or heuristic."""
        kind = callee[0]
        if kind == "name":
            first = self.names.binding_kinds(callee)
            if first & {"imp", "from"}:
                return "import"
            if "typed" in first:
                return "annotation"
            if "fixture" in first:
                return "fixture"
            if first & {"param", "attrs"}:
                # Bound to a value flowed in, or to an attribute whose name is computed: a guess.
                return "heuristic"
            if "call" in first:
                return "constructor"
            return "lexical"
        if kind == "attr":
            base = callee[1]
            if base[0] in ("super", "self", "cls"):
                return "self_mro"
            if base[0] == "name":
                first = self.names.binding_kinds(base)
                if first & {"self", "cls"}:
                    return "self_mro"
                if first & {"imp", "from"}:
                    return "import"
                if "typed" in first:
                    return "annotation"
                if "fixture" in first:
                    return "fixture"
                if "call" in first:
                    return "constructor"
                if first & {"def", "deco"}:
                    return "lexical"
                return "attribute" if first and first <= ATTRIBUTE_KINDS else "heuristic"
            # An attribute of an attribute, of a call's or an operator's result, of an element: what
            # the code binds there (certain when the strict linker finds it too, and the receiver is
            # of one class).
            return "attribute" if base[0] in ATTRIBUTE_KINDS else "heuristic"
        return "heuristic"

    def unknown_reason(self, callee: Any) -> str:
        """Why a callee denotes nothing: a reason code for the unknown."""
        kind = callee[0]
        if kind == "unk":
            return str(callee[1])
        if kind == "name":
            kinds = self.names.binding_kinds(callee)
            if not kinds:
                return "unresolved_name"
            if "param" in kinds and kinds <= {"param", "unk", *STATED_KINDS}:
                return "parameter_call"
            if kinds == {"varargs"}:
                return "variadic_parameter"
            if kinds == {"unk"}:
                # Bound only to what the fast pass refused to model: say why (e.g. variadic_parameter).
                return str(self.names.binding_refs(callee)[0][1])
            if kinds <= {"sub", "iter", "rows"}:
                return "container_element"
            if kinds == {"call"}:
                return "call_result"
            return "untyped_value"
        if kind == "attr":
            base = self.values.eval(callee[1])
            if not base:
                return "untyped_receiver"
            classes = [v[1] for v in base if v[0] in ("inst", "def", "super")]
            if any(self.hierarchy.external_bases(c) for c in classes):
                return "external_base_class"
            if all(v[0] in ("coll", "builtin", "gen") for v in base):
                return "builtin_receiver"
            return "attribute_not_found"
        if any(v[0] == "many" for v in self.values.eval(callee)):
            return "ambiguous_target"
        if kind == "attrs":
            return "dynamic_getattr"
        if kind == "call":
            return "call_result"
        if kind in ("sub", "iter"):
            return "container_element"
        return "untyped_value"

    def enumerated(self, ref: Any) -> frozenset[Value]:
        """The tree's functions a ref that denotes too many values to carry (`("many", n)`) may call:
        through the parameters and instance attributes it reads, each argument the tree passes them
        evaluated alone (a few levels deep), the functions among its values (cached)."""
        found: frozenset[Value] = cached(
            self.memo,
            self.record,
            self._enumerated,
            ("@enumerated", ref),
            lambda: frozenset(self._enumerate(ref, 0, {})),
        )
        return found

    def _enumerate(self, ref: Any, depth: int, seen: dict[Any, int]) -> set[Value]:
        # A ref is expanded again only when reached nearer than before (its arguments then go deeper).
        if seen.get(ref, MAX_ENUMERATION_DEPTH + 1) <= depth or not isinstance(ref, tuple) or not ref:
            return set()
        seen[ref] = depth
        values = self.values.eval(ref)
        out = {v for v in values if v[0] == "def" and self.defs.get(v[1], {}).get("kind") != "class"}
        if not any(v[0] == "many" for v in values) or depth >= MAX_ENUMERATION_DEPTH:
            return out
        if ref[0] == "kw":
            self.memo.read(("@param", ref[1], ref[2]))
            for arg in ordered(self.params.get((ref[1], ref[2]), ())):
                out |= self._enumerate(arg, depth + 1, seen)
        elif ref[0] == "name":
            for r in self.names.binding_refs(ref):
                if r[0] == "param":
                    self.memo.read(("@param", r[1], r[2]))
                    self.memo.read(("@param", r[1], r[3]))
                    passed = self.params.get((r[1], r[2]), set()) | self.params.get((r[1], r[3]), set())
                    for arg in ordered(passed):
                        out |= self._enumerate(arg, depth + 1, seen)
                else:
                    out |= self._enumerate(r, depth + 1, seen)
        elif ref[0] == "attr":
            for value in ordered(self.values.eval(ref[1])):
                for klass in self.hierarchy.mro(value[1]) if value[0] == "inst" else []:
                    for r in self.instance_attrs.get(klass, {}).get(ref[2], ()):
                        out |= self._enumerate(r, depth + 1, seen)
        elif ref[0] == "cast":
            out |= self._enumerate(ref[2], depth + 1, seen)
        elif ref[0] in ("narrow", "without", "unlike", "typed"):
            out |= self._enumerate(ref[1], depth + 1, seen)
        return out
