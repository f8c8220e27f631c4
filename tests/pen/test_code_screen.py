"""The static screen (PSMR effects + the pen's path and URL checks): what each option forbids."""

from __future__ import annotations

import pytest

from slotrelay.pen.code_screen import enforce_screen, screen_code
from slotrelay.pen.errors import PermissionViolation
from slotrelay.pen.models import SandboxOptions

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
    assert sorted({finding.kind for finding in screen_code(code, "python", options)}) == kinds


def test_node_and_shell_screens() -> None:
    node = "const cp = require('child_process');\nmodule.exports = async () => (await fetch('http://x')).status;\n"
    assert [f.kind for f in screen_code(node, "node", TMP)] == ["subprocess", "network"]
    shell = "curl -s http://x > /tmp/out\ncat /etc/shadow\necho $(( 1 + 2 ))\n"
    assert sorted(f.kind for f in screen_code(shell, "shell", TMP)) == ["fs", "network"]
    assert screen_code('read line\necho "[1]"\n', "shell", TMP) == []


def test_enforce_names_every_finding() -> None:
    with pytest.raises(PermissionViolation) as caught:
        enforce_screen("import socket, subprocess\n", "python", TMP)
    assert caught.value.code == "MPP-E005" and caught.value.details["stage"] == "static"
    assert {f["kind"] for f in caught.value.details["findings"]} == {"network", "subprocess"}


def test_code_that_does_not_parse_is_refused_with_e005() -> None:
    with pytest.raises(PermissionViolation) as caught:
        enforce_screen("import json\ndef main(inputs):\n    return json.dumps(inputs\n", "python", TMP)
    [finding] = caught.value.details["findings"]
    assert caught.value.code == "MPP-E005" and finding["kind"] == "unparsable" and finding["line"] == 3
