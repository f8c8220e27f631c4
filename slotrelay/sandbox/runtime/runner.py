"""The in-sandbox runner for python and shell programs (runs under the sandbox's own python3).

It reads the request from stdin (`{"lang", "code", "inputs", "marker"}`), runs the program and
writes the result trailer. It imports nothing from slotrelay: it is copied into the images and
bound into bwrap sandboxes as a single file.

python: the code runs as `__main__`; `sys.stdin` holds the inputs as JSON. The result is what
`main(inputs)` returns when the code defines `main` (a `main()` without parameters is called
without them), else the value of a global named `result`, else None. It must be JSON-serializable.
shell: the code runs under bash with the inputs as JSON on its stdin; the result is None.
"""

import io
import json
import os
import sys

# inspect, subprocess, linecache and traceback are imported where needed: every run pays for what the
# runner imports at start (inspect alone is ~10 ms), and most programs need none of them.


def _write_trailer(marker, result):
    sys.stdout.flush()
    sys.stderr.flush()
    os.write(1, b"\n" + marker.encode() + json.dumps(result).encode() + b"\n")


def _run_python(code, inputs):
    namespace = {"__name__": "__main__", "__builtins__": __builtins__, "__file__": "<sandbox>"}
    sys.argv = ["<sandbox>"]
    sys.stdin = io.TextIOWrapper(io.BytesIO(json.dumps(inputs).encode()), encoding="utf-8")
    exec(compile(code, "<sandbox>", "exec"), namespace)  # noqa: S102 - running the program is the point
    main = namespace.get("main")
    if callable(main):
        import inspect

        wants_inputs = bool(inspect.signature(main).parameters)
        return main(inputs) if wants_inputs else main()
    return namespace.get("result")


def _run_shell(code, inputs):
    import subprocess

    # The script goes through a pipe (not an argument: those fail above 128 KiB), so bash's
    # stdin stays free for the inputs.
    script_read, script_write = os.pipe()
    shell = subprocess.Popen(
        ["/bin/bash", f"/dev/fd/{script_read}"], stdin=subprocess.PIPE, pass_fds=(script_read,)
    )
    os.close(script_read)
    with os.fdopen(script_write, "wb") as script:
        script.write(code.encode())
    try:
        shell.stdin.write(json.dumps(inputs).encode())
        shell.stdin.close()
    except BrokenPipeError:
        pass
    return shell.wait()


def _announce_start():
    # bwrap passes an open pipe end: a byte on it tells the host the sandbox was set up and the
    # runner started (so a bwrap setup failure is not mistaken for the program's own exit 1).
    ready = os.environ.pop("SLOTRELAY_READY_FD", None)
    if ready:
        os.write(int(ready), b"1")
        os.close(int(ready))


def main():
    _announce_start()
    request = json.loads(sys.stdin.buffer.read())
    marker = request["marker"]
    if request["lang"] == "shell":
        status = _run_shell(request["code"], request["inputs"])
        _write_trailer(marker, None)
        sys.exit(status if status >= 0 else 128 - status)
    try:
        result = _run_python(request["code"], request["inputs"])
    except SystemExit:
        raise
    except BaseException as error:  # noqa: BLE001 - any failure of the program, shown as its traceback
        import linecache
        import traceback

        # Tracebacks show the program's source lines, and its own frames, not the runner's.
        code = request["code"]
        linecache.cache["<sandbox>"] = (len(code), None, code.splitlines(True), "<sandbox>")
        trace = error.__traceback__
        while trace is not None and trace.tb_frame.f_code.co_filename == __file__:
            trace = trace.tb_next
        traceback.print_exception(type(error), error, trace)
        sys.exit(1)
    try:
        _write_trailer(marker, result)
    except (TypeError, ValueError) as error:
        print(f"slotrelay: the result is not JSON-serializable: {error}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
