"""What an external or builtin callee does to the world: network, subprocess, file, environment, dynamic code.

One table of import-path prefixes (`classify`), used by the workspace queries for effects, boundaries and
the boundary_adapter motif, and by the static screen of one code string (`effects`), which the pen is
handed to refuse generated code by:

    effects("import subprocess as sp\\nsp.run(['ls'])")
    -> [Effect(kind="subprocess", target="subprocess", via="import", line=1, ...),
        Effect(kind="subprocess", target="subprocess.run", via="call", line=2, ...)]

The screen runs the same fast pass and resolver as a workspace build on a one-module tree, so aliases,
`from x import y`, `getattr(mod, "name")` and functions passed around resolve as they do there. Calls it
cannot resolve with a dynamic cause (computed getattr, `__import__` of a variable, eval/exec) are reported
as `dynamic`; a source that does not parse yields one `unparsable` effect, so a caller that blocks on any
effect blocks on it too.
"""

from __future__ import annotations

from slotrelay.effect_screen import Effect

MODULE = "__screen__"
_DYNAMIC_REASONS = frozenset({"dynamic_getattr", "dynamic_import", "dynamic_eval", "dynamic_exec"})

EFFECT_PREFIXES: dict[str, tuple[str, ...]] = {
    "network": (
        "socket",
        "ssl",
        "http.client",
        "http.server",
        "urllib.request",
        "urllib3",
        "requests",
        "httpx",
        "aiohttp",
        "ftplib",
        "smtplib",
        "poplib",
        "imaplib",
        "telnetlib",
        "xmlrpc",
        "websocket",
        "websockets",
        "paramiko",
        "grpc",
        "asyncio.open_connection",
        "asyncio.start_server",
    ),
    "subprocess": (
        "subprocess",
        "os.system",
        "os.popen",
        "os.exec",
        "os.spawn",
        "os.fork",
        "os.kill",
        "pty",
        "multiprocessing",
        "asyncio.create_subprocess_exec",
        "asyncio.create_subprocess_shell",
    ),
    "file": (
        "<builtin>.open",
        "io.open",
        "os.remove",
        "os.unlink",
        "os.rmdir",
        "os.removedirs",
        "os.rename",
        "os.replace",
        "os.makedirs",
        "os.mkdir",
        "os.chmod",
        "os.chown",
        "os.open",
        "os.truncate",
        "os.symlink",
        "os.link",
        "shutil",
        "pathlib",
        "tempfile",
        "glob",
        "fileinput",
        "sqlite3",
        "dbm",
        "shelve",
    ),
    "environment": ("os.environ", "os.getenv", "os.putenv", "os.unsetenv", "os.chdir"),
    "dynamic": (
        "<builtin>.eval",
        "<builtin>.exec",
        "<builtin>.compile",
        "<builtin>.__import__",
        "importlib.import_module",
        "importlib.__import__",
        "ctypes",
        "pickle.load",
        "pickle.loads",
        "marshal.loads",
    ),
}


def classify(target: str) -> str | None:
    """The effect kind of a callee or imported module path, or None when it has no outside effect.

    Parameters:
        target: a dotted import path (`subprocess.run`) or `<builtin>.name`.

    Returns:
        One of `EFFECT_PREFIXES`' keys, or None.
    """
    for kind, prefixes in EFFECT_PREFIXES.items():
        for prefix in prefixes:
            if (
                target == prefix
                or target.startswith(prefix + ".")
                or (prefix.endswith(("exec", "spawn")) and target.startswith(prefix))
            ):
                return kind
    return None


def effects(source: str) -> list[Effect]:
    """The network, subprocess, file, environment and dynamic-code effects of a Python source string.

    Parameters:
        source: Python code (a module's text).

    Returns:
        Effects sorted by position: `via` is `import`, `call`, or `parse` (for `unparsable`).
    """
    # Imported here, not at the top: the queries read the table alone, and a server's first answers must
    # not load the fast pass and the resolver.
    from slotrelay.psmr.analysis.extract import extract
    from slotrelay.psmr.analysis.link import Linker

    facts = extract(source, MODULE)
    if facts["syntax_error"]:
        line, col, end_line, end_col = facts["syntax_error"]["span"]
        return [Effect("unparsable", "syntax_error", "parse", line, col, end_line, end_col)]
    found: set[Effect] = set()
    for item in facts["imports"]:
        for target in (item["module"], f"{item['module']}.{item['name']}" if item["name"] else None):
            kind = classify(target) if target else None
            if kind and target:
                found.add(Effect(kind, target, "import", *item["span"]))
                break
    link = Linker({MODULE: facts}).run()
    for index, site in enumerate(facts["calls"]):
        for target in link.targets.get((MODULE, index), []):
            kind = classify(target.target)
            if kind:
                found.add(Effect(kind, target.target, "call", *site["span"]))
    for item in facts["unknowns"]:
        if item["reason"] in _DYNAMIC_REASONS:
            found.add(Effect("dynamic", item["detail"], "call", *item["span"]))
    return sorted(found, key=lambda e: (e.line, e.col, e.via, e.target))
