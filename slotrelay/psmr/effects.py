"""What an external or builtin callee does to the world: network, subprocess, file, environment, dynamic code.

One table of import-path prefixes, used by the pen's static screen (`slotrelay.psmr.effect_screen`) and by
the workspace queries for effects, boundaries and the boundary_adapter motif.
"""

from __future__ import annotations

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
