"""The head of a cycle of the resolver's memo keys (`slotrelay.psmr.analysis.memo.CanonicalMemo` cuts each
cycle there): the same key in every process, whatever the hash seed."""

from __future__ import annotations

from collections.abc import Callable
from operator import itemgetter
from typing import Any


class CycleHeads:
    """The head of a cycle of memo keys: the least by repr, the same in every process.

    A key holding a set is written with the set sorted (a set's repr follows the hash seed), which
    is slow; keys without a set, nearly all, come first. Both texts are kept per key: the same keys
    meet again in later components (a component entered away from its head, each round of argument
    flow), and equal keys have equal texts (the resolver's keys hold no 1 where another holds True).
    """

    def __init__(self, look: Callable[[], None] = lambda: None) -> None:
        # Called before each key is written out: the build's budget (`BuildBudget.look`), since a
        # key's text is as large as the values it holds.
        self._look = look
        self._texts: dict[Any, str] = {}
        # repr(key), or None for a key holding a set.
        self._plain: dict[Any, str | None] = {}
        # A frozenset sorted (see `_sorted_sets`): the same argument values recur in many keys.
        self._sets: dict[frozenset[Any], tuple[Any, ...]] = {}

    def __call__(self, keys: list[Any]) -> Any:
        groups = _by_tag(keys)
        for group in groups:
            plain = [(text, key) for key in group if (text := self._plain_text(key)) is not None]
            if plain:
                return min(plain, key=itemgetter(0))[1]
        return min(groups[0], key=self._text)

    def _plain_text(self, key: Any) -> str | None:
        try:
            return self._plain[key]
        except KeyError:
            self._look()
            text = repr(key)
            found = self._plain[key] = None if "{" in text else text
            return found

    def _text(self, key: Any) -> str:
        text = self._texts.get(key)
        if text is None:
            self._look()
            text = self._texts[key] = repr(_sorted_sets(key, self._sets))
        return text


def _by_tag(keys: list[Any]) -> list[list[Any]]:
    """The keys grouped by their tag (first item), least tag first, each group in the keys' order.

    A key's text starts with its tag's, `('tag', ...`, so keys of different tags compare as their
    tags do, followed by the closing quote: the least text is in the first group that has a key of
    that kind of text. One group of all the keys when one is not a tuple with a plain tag.
    """
    tagged: dict[str, list[Any]] = {}
    for key in keys:
        tag = key[0] if type(key) is tuple and key else None
        if type(tag) is not str or repr(tag) != f"'{tag}'":
            return [keys]
        tagged.setdefault(tag + "'", []).append(key)
    return [tagged[tag] for tag in sorted(tagged)]


def _sorted_sets(item: Any, sets: dict[frozenset[Any], tuple[Any, ...]]) -> Any:
    """The item with each set (and dict) in it written as a tuple of its sorted parts; the frozensets
    done are kept in `sets`."""
    if isinstance(item, tuple):
        return tuple(_sorted_sets(part, sets) for part in item)
    if isinstance(item, frozenset):
        done = sets.get(item)
        if done is None:
            done = sets[item] = ("<set>", *sorted((_sorted_sets(part, sets) for part in item), key=repr))
        return done
    if isinstance(item, set):
        return ("<set>", *sorted((_sorted_sets(part, sets) for part in item), key=repr))
    if isinstance(item, dict):
        return ("<dict>", *sorted(((k, _sorted_sets(v, sets)) for k, v in item.items()), key=repr))
    return item
