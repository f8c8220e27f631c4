"""Generated-code screen: the code model's program, read before it runs (MPP-E005 without running it).

Python goes through the screen the pen's caller hands it (an `EffectScreen`: PSMR's analyzer,
`slotrelay.psmr.analysis.effects.effects`, the same resolver as a workspace build, so aliases and
`from x import y` resolve), which reports network, subprocess, file and dynamic-code effects; the pen
adds, from the AST, the literal paths and URLs the code names, checked against `fs` and the network
allow-list. Node and shell are read through their tokens.
Refused: network use while `network` is "none" (or URLs outside the allow-list), starting processes,
dynamic code (eval, exec, computed imports: the screen cannot see through them), python that does
not parse (it cannot be screened, so it must not run), file access when `fs` is "none", and paths
outside what `fs` allows. Environment access (os.environ, os.getenv, os.chdir) is allowed: both
sandbox backends start the program with a clean environment, so there is no host variable to read.
It is a first gate only: the sandbox enforces the same at run time, and a violation it reports is
also MPP-E005.
"""

from __future__ import annotations

import ast
import posixpath
import re
import shlex
from dataclasses import dataclass
from typing import Literal
from urllib.parse import urlsplit

from slotrelay.effect_screen import EffectScreen
from slotrelay.pen.errors import PermissionViolation
from slotrelay.pen.models import FsAllow, Lang, NetworkAllow, SandboxOptions

FindingKind = Literal["network", "subprocess", "fs", "dynamic", "unparsable"]

FILE_CALLS = frozenset(
    {
        "open",
        "io.open",
        "os.open",
        "os.remove",
        "os.unlink",
        "os.rmdir",
        "os.mkdir",
        "os.makedirs",
        "os.listdir",
        "os.scandir",
        "os.walk",
        "os.rename",
        "os.replace",
        "os.chmod",
        "os.chown",
        "os.symlink",
        "os.link",
        "os.stat",
        "os.removedirs",
        "os.truncate",
        "pathlib.Path",
        "Path",
        "shutil.copy",
        "shutil.copy2",
        "shutil.copyfile",
        "shutil.copytree",
        "shutil.rmtree",
        "shutil.move",
        "glob.glob",
        "glob.iglob",
        "sqlite3.connect",
    }
)
# Always usable: the standard streams and the null device.
ALWAYS_ALLOWED_PATHS = ("/dev/null", "/dev/stdin", "/dev/stdout", "/dev/stderr", "/dev/urandom")
# A string naming these is a file access outside any sandbox grant, wherever it is used.
SENSITIVE_PREFIXES = ("/etc/", "/proc/", "/sys/", "/root", "/home/", "/var/run/", "/run/", "/dev/", "/boot/")

NODE_NETWORK = re.compile(
    r"""require\(\s*['"](node:)?(http|https|http2|net|dgram|tls|dns|undici|node-fetch|axios|ws)['"]\s*\)"""
    r"""|from\s+['"](node:)?(http|https|http2|net|dgram|tls|dns|undici|node-fetch|axios|ws)['"]"""
    r"""|\bfetch\s*\(|\bXMLHttpRequest\b|\bnew\s+WebSocket\b"""
)
NODE_PROCESS = re.compile(r"""['"](node:)?(child_process|cluster)['"]""")
STRING_PATH = re.compile(r"""['"](/[^'"\s]*)['"]""")
SHELL_NETWORK = frozenset(
    {"curl", "wget", "nc", "ncat", "netcat", "ssh", "scp", "sftp", "telnet", "ftp", "socat", "rsync"}
)
SHELL_PROGRAM_DIRS = ("/bin/", "/usr/bin/", "/usr/local/bin/", "/sbin/", "/usr/sbin/")


@dataclass(frozen=True)
class CodeFinding:
    """One forbidden use found in the code."""

    kind: FindingKind
    detail: str
    line: int | None = None

    def to_json(self) -> dict[str, object]:
        """The finding as reported in errors and review reports."""
        return {"kind": self.kind, "detail": self.detail, "line": self.line}


def path_allowed(path: str, options: SandboxOptions) -> bool:
    """Whether the sandbox's `fs` option lets a program touch `path`.

    Parameters:
        path: a path as written in the code (relative paths are inside the working directory).
        options: the request's sandbox options.

    Returns:
        True when the path is allowed.
    """
    if path in ALWAYS_ALLOWED_PATHS:
        return True
    if options.fs == "none":
        return False
    if not path.startswith("/"):
        # Relative paths land in the sandbox's writable working directory; the sandbox checks them.
        return True
    normal = posixpath.normpath(path)
    roots = ["/tmp"]
    if isinstance(options.fs, FsAllow):
        roots += [posixpath.normpath(root) for root in options.fs.allow_paths]
    return any(normal == root or normal.startswith(root.rstrip("/") + "/") for root in roots)


def _url_allowed(text: str, options: SandboxOptions) -> bool:
    host = urlsplit(text).hostname or ""
    if not isinstance(options.network, NetworkAllow):
        return True
    for allowed in options.network.allow:
        name = allowed.split(":")[0].lower()
        if host == name or (name.startswith("*.") and host.endswith(name[1:])):
            return True
    return False


class _PythonScreen(ast.NodeVisitor):
    def __init__(self, options: SandboxOptions) -> None:
        self.options = options
        self.findings: list[CodeFinding] = []
        self.aliases: dict[str, str] = {}

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if alias.asname:
                self.aliases[alias.asname] = alias.name
        self.generic_visit(node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        for alias in node.names:
            self.aliases[alias.asname or alias.name] = f"{node.module or ''}.{alias.name}"
        self.generic_visit(node)

    def _dotted(self, node: ast.expr) -> str | None:
        if isinstance(node, ast.Name):
            return self.aliases.get(node.id, node.id)
        if isinstance(node, ast.Attribute):
            base = self._dotted(node.value)
            return f"{base}.{node.attr}" if base else None
        return None

    def visit_Call(self, node: ast.Call) -> None:
        name = self._dotted(node.func) or ""
        first = node.args[0] if node.args else None
        literal = first.value if isinstance(first, ast.Constant) and isinstance(first.value, str) else None
        if name in FILE_CALLS and literal is not None and not path_allowed(literal, self.options):
            self.findings.append(
                CodeFinding("fs", f"{name}({literal!r}) is outside fs={_fs_label(self.options)}", node.lineno)
            )
        self.generic_visit(node)

    def visit_Constant(self, node: ast.Constant) -> None:
        value = node.value
        if isinstance(value, str):
            if value.startswith(SENSITIVE_PREFIXES) and not path_allowed(value, self.options):
                self.findings.append(CodeFinding("fs", f"names the host path {value!r}", node.lineno))
            elif re.match(r"^(https?|wss?|ftp)://", value) and not _url_allowed(value, self.options):
                self.findings.append(
                    CodeFinding("network", f"names {value!r}, outside network.allow", node.lineno)
                )


def _python_effects(code: str, options: SandboxOptions, effect_screen: EffectScreen) -> list[CodeFinding]:
    findings = []
    for effect in effect_screen(code):
        if effect.kind == "network" and options.network == "none":
            findings.append(
                CodeFinding("network", f"uses {effect.target} while network is none", effect.line)
            )
        elif effect.kind == "subprocess":
            findings.append(CodeFinding("subprocess", f"starts processes ({effect.target})", effect.line))
        elif effect.kind == "dynamic":
            findings.append(
                CodeFinding(
                    "dynamic", f"runs dynamic code the screen cannot check ({effect.target})", effect.line
                )
            )
        elif effect.kind == "file" and options.fs == "none":
            findings.append(
                CodeFinding("fs", f"accesses files ({effect.target}) while fs is none", effect.line)
            )
        # "environment" effects pass: the sandbox's environment holds nothing of the host's.
        # "unparsable" cannot occur: screen_code parses the code first.
    return findings


def _fs_label(options: SandboxOptions) -> str:
    return options.fs if isinstance(options.fs, str) else "allow_paths"


def _screen_node(code: str, options: SandboxOptions) -> list[CodeFinding]:
    findings: list[CodeFinding] = []
    for number, line in enumerate(code.splitlines(), start=1):
        if options.network == "none" and NODE_NETWORK.search(line):
            findings.append(
                CodeFinding("network", f"network use while network is none: {line.strip()[:80]}", number)
            )
        if NODE_PROCESS.search(line):
            findings.append(CodeFinding("subprocess", f"starts processes: {line.strip()[:80]}", number))
        for path in STRING_PATH.findall(line):
            if not path_allowed(path, options):
                findings.append(
                    CodeFinding("fs", f"path {path!r} is outside fs={_fs_label(options)}", number)
                )
    return findings


def _screen_shell(code: str, options: SandboxOptions) -> list[CodeFinding]:
    findings: list[CodeFinding] = []
    for number, line in enumerate(code.splitlines(), start=1):
        if "/dev/tcp/" in line or "/dev/udp/" in line:
            findings.append(CodeFinding("network", "opens a /dev/tcp or /dev/udp socket", number))
        try:
            tokens = shlex.split(line, comments=True)
        except ValueError:
            tokens = line.split()
        for token in tokens:
            word = posixpath.basename(token)
            if options.network == "none" and word in SHELL_NETWORK:
                findings.append(CodeFinding("network", f"runs {word} while network is none", number))
            for path in re.findall(r"(?<![\w.:/])(/[\w./-]+)", token):
                if path.startswith(SHELL_PROGRAM_DIRS) or path.startswith(("/dev/tcp/", "/dev/udp/")):
                    continue
                if not path_allowed(path, options):
                    findings.append(
                        CodeFinding("fs", f"path {path!r} is outside fs={_fs_label(options)}", number)
                    )
    return findings


def screen_code(
    code: str, lang: Lang, options: SandboxOptions, effect_screen: EffectScreen
) -> list[CodeFinding]:
    """Everything in `code` that the sandbox options forbid.

    Parameters:
        code: the program's source.
        lang: its language.
        options: the request's sandbox options.
        effect_screen: the effects of Python code (PSMR's `slotrelay.psmr.analysis.effects.effects`).

    Returns:
        The findings, in source order (empty when the code looks clean).
    """
    if lang == "python":
        try:
            tree = ast.parse(code)
        except SyntaxError as exc:
            # Unscreened code must not run. pen.write never gets here (codegen refuses generated
            # code that does not parse, MPP-E003); code edited afterwards, as in a review, does.
            return [
                CodeFinding("unparsable", f"does not parse ({exc.msg}), so it cannot be screened", exc.lineno)
            ]
        visitor = _PythonScreen(options)
        visitor.visit(tree)
        findings = visitor.findings + _python_effects(code, options, effect_screen)
        return sorted(set(findings), key=lambda finding: (finding.line or 0, finding.kind, finding.detail))
    if lang == "node":
        return _screen_node(code, options)
    return _screen_shell(code, options)


def enforce_screen(
    code: str, lang: Lang, options: SandboxOptions, effect_screen: EffectScreen
) -> list[CodeFinding]:
    """Run the screen and refuse the code when it finds anything.

    Parameters:
        code: the program's source.
        lang: its language.
        options: the request's sandbox options.
        effect_screen: the effects of Python code (PSMR's `slotrelay.psmr.analysis.effects.effects`).

    Returns:
        An empty list (the code passed).

    Raises:
        PermissionViolation: (MPP-E005) with every finding in `details["findings"]`.
    """
    findings = screen_code(code, lang, options, effect_screen)
    if findings:
        summary = "; ".join(f"line {finding.line}: {finding.detail}" for finding in findings[:5])
        raise PermissionViolation(
            f"generated code uses what the sandbox options forbid: {summary}",
            details={"stage": "static", "findings": [finding.to_json() for finding in findings]},
        )
    return findings
