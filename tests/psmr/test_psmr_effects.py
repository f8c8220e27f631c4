"""The pen's static screen: effects of one code string, resolved like a workspace build."""

from __future__ import annotations

from slotrelay.effect_screen import Effect
from slotrelay.psmr.analysis.effects import effects

SOURCE = """import subprocess as sp
from os import system
import importlib


def fetch(url):
    import urllib.request
    return urllib.request.urlopen(url)


def run(cmd):
    sp.run(cmd)
    system("ls")
    runner = getattr(sp, "check_output")
    runner(cmd)
    with open("/etc/passwd") as handle:
        return handle.read()


importlib.import_module(name)
eval("1")
"""


def test_effects_of_a_code_string() -> None:
    found = {(e.kind, e.target, e.via, e.line) for e in effects(SOURCE)}
    assert found == {
        ("subprocess", "subprocess", "import", 1),
        ("subprocess", "os.system", "import", 2),
        ("network", "urllib.request", "import", 7),
        ("network", "urllib.request.urlopen", "call", 8),
        ("subprocess", "subprocess.run", "call", 12),
        ("subprocess", "os.system", "call", 13),
        ("subprocess", "subprocess.check_output", "call", 15),
        ("file", "<builtin>.open", "call", 16),
        ("dynamic", "importlib.import_module", "call", 20),
        ("dynamic", "importlib.import_module(name)", "call", 20),
        ("dynamic", "<builtin>.eval", "call", 21),
        ("dynamic", "eval('1')", "call", 21),
    }


def test_clean_code_has_no_effects_and_broken_code_is_unparsable() -> None:
    assert effects("def add(a, b):\n    return a + b\n\nprint(add(1, 2))\n") == []
    assert effects("def broken(:\n") == [Effect("unparsable", "syntax_error", "parse", 1, 11, 1, 12)]
