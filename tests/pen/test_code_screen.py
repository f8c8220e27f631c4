"""The static screen (PSMR effects + the pen's path and URL checks): what each option forbids."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from slotrelay.chain.errors import NodeError
from slotrelay.effect_screen import Effect
from slotrelay.pen.code_screen import enforce_screen, screen_code
from slotrelay.pen.errors import PermissionViolation
from slotrelay.pen.models import SandboxOptions
from slotrelay.pen.node import run_pen_node
from slotrelay.psmr.analysis.effects import effects

TMP = SandboxOptions()
NO_FS = SandboxOptions(fs="none")
ALLOW = SandboxOptions.model_validate(
    {"network": {"allow": ["api.example.org"]}, "fs": {"allow_paths": ["/data"]}}
)


@pytest.mark.parametrize(
    ("code", "options", "kinds"),
    [
        ("def main(inputs):\n    return sum(inputs['numbers'])\n", TMP, []),
        (
            ("import json, urllib.parse\ndef main(inputs):\n    return "
            "urllib.parse.quote(json.dumps(inputs))\n"),
            TMP,
            [],
        ),
        ("import socket\ndef main(inputs):\n    return socket.gethostname()\n", TMP, ["network"]),
        (
            "from urllib.request import urlopen as get\ndef main(inputs):\n    return get('http://x').read()\n",
            TMP,
            ["network"],
        ),
        (
            "import requests\ndef main(inputs):\n    return requests.get('https://api.example.org/x').json()\n",
            ALLOW,
            [],
        ),
        (
            "import requests\ndef main(inputs):\n    return requests.get('https://evil.test/x').json()\n",
            ALLOW,
            ["network"],
        ),
        (
            "import subprocess as sp\ndef main(inputs):\n    return sp.run(['id']).returncode\n",
            TMP,
            ["subprocess"],
        ),
        ("from os import system\ndef main(inputs):\n    return system('id')\n", TMP, ["subprocess"]),
        ("def main(inputs):\n    name = 'sock' + 'et'\n    return __import__(name)\n", TMP, ["dynamic"]),
        ("def main(inputs):\n    return open('/etc/passwd').read()\n", TMP, ["fs"]),
        ("def main(inputs):\n    path = '/proc/1/environ'\n    return open(path).read()\n", TMP, ["fs"]),
        ("def main(inputs):\n    open('/tmp/x', 'w').write('a')\n    return 1\n", TMP, []),
        ("def main(inputs):\n    open('/tmp/x', 'w').write('a')\n    return 1\n", NO_FS, ["fs"]),
        (
            "from pathlib import Path\ndef main(inputs):\n    return Path('/data/in.csv').read_text()\n",
            ALLOW,
            [],
        ),
        (
            "from pathlib import Path\ndef main(inputs):\n    return Path('/srv/in.csv').read_text()\n",
            ALLOW,
            ["fs"],
        ),
        # The sandbox's environment is clean, so reading it is allowed.
        ("import os\ndef main(inputs):\n    return os.environ.get('HOME', os.getenv('USER'))\n", NO_FS, []),
        # Code that does not parse cannot be screened: refused, whatever it would do.
        ("def main(inputs:\n    return 1\n", TMP, ["unparsable"]),
    ],
)
def test_python_screen(code, options, kinds) -> None:
    assert sorted({finding.kind for finding in screen_code(code, "python", options, effects)}) == kinds


def test_node_and_shell_screens() -> None:
    node = "const cp = require('child_process');\nmodule.exports = async () => (await fetch('http://x')).status;\n"
    assert [f.kind for f in screen_code(node, "node", TMP, effects)] == ["subprocess", "network"]
    shell = "curl -s http://x > /tmp/out\ncat /etc/shadow\necho $(( 1 + 2 ))\n"
    assert sorted(f.kind for f in screen_code(shell, "shell", TMP, effects)) == ["fs", "network"]
    assert screen_code('read line\necho "[1]"\n', "shell", TMP, effects) == []


def test_enforce_names_every_finding() -> None:
    with pytest.raises(PermissionViolation) as caught:
        enforce_screen("import socket, subprocess\n", "python", TMP, effects)
    assert caught.value.code == "MPP-E005" and caught.value.details["stage"] == "static"
    assert {f["kind"] for f in caught.value.details["findings"]} == {"network", "subprocess"}


def test_code_that_does_not_parse_is_refused_with_e005() -> None:
    with pytest.raises(PermissionViolation) as caught:
        broken = "import json\ndef main(inputs):\n    return json.dumps(inputs\n"
        enforce_screen(broken, "python", TMP, effects)
    [finding] = caught.value.details["findings"]
    assert caught.value.code == "MPP-E005" and finding["kind"] == "unparsable" and finding["line"] == 3


def test_the_python_screen_is_the_one_the_caller_hands_over() -> None:
    # The pen imports nothing of PSMR: it reads Python's effects through the screen it is given.
    def sees_a_socket(source: str) -> list[Effect]:
        return [Effect("network", "socket", "import", 1, 0, 1, 13)]

    findings = screen_code("def main(inputs):\n    return 1\n", "python", TMP, sees_a_socket)
    assert [(finding.kind, finding.line) for finding in findings] == [("network", 1)]


def test_a_pen_node_without_its_settings_is_refused_before_anything_runs(tmp_path) -> None:
    # Without the screen its caller hands over, the generated code could not be checked: no pen starts.
    spec = SimpleNamespace(intent="sum the numbers", persona_id="p1", options={})
    context = SimpleNamespace(chain=SimpleNamespace(work_dir=str(tmp_path)))
    with pytest.raises(NodeError) as refused:
        run_pen_node(spec, {}, context)
    assert refused.value.error_type == "PEN_INVALID_REQUEST" and "PenNodeSettings" in refused.value.message
    assert list(tmp_path.iterdir()) == []
