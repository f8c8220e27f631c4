"""Prompting the code model and pulling code out of its reply.

The prompt carries the intent, the language, the task category, the *shape* of upstream_inputs
(a JSON Schema, never the values), a skeleton of the program that reads the inputs the documented
way, and the sandbox's rules, which are also the contract the program must follow to hand back a
structured result (`RESULT_CONVENTION`). Replies are read the way real models write them (each
shape has a case in tests/pen/test_codegen.py):

- prose before and after the code, reasoning blocks (`<think>...</think>`);
- several fenced blocks (``` or ~~~, indented or not): the one that parses and defines `main`
  wins over usage examples, whatever its language tag says, since small models tag python `bash`;
- no fence at all: the longest run of lines that parses, from the first line that looks like code;
- python whose only function is named after the task (`def parse_csv(data):`): it becomes `main`;
- python that calls `main` itself (`if __name__ == "__main__":`, `print(main([1, 2]))`): those
  top-level calls are dropped, since the sandbox calls `main(inputs)` with the real inputs;
- a reply cut off at max_tokens (finish_reason "length"): usable only when its code block was
  closed before the cut, else MPP-E003 saying so.

A reply without usable code (none, not parsing, no `main(inputs)` for python) is MPP-E003.
"""

from __future__ import annotations

import ast
import json
import re
import textwrap
from dataclasses import dataclass
from typing import Any

from slotrelay.pen.errors import CodeGenerationFailed
from slotrelay.pen.json_shape import infer_schema
from slotrelay.pen.model_client import ChatClient, ChatReply
from slotrelay.pen.models import Lang, PenRequest, SandboxOptions

# How a program receives upstream_inputs and returns its structured result, per language.
# It matches slotrelay.sandbox's runners: python and node call main(inputs); shell scripts read stdin
# and the pen takes the last line of stdout as the result.
RESULT_CONVENTION: dict[str, str] = {
    "python": (
        "Define `def main(inputs):` taking the upstream inputs (a JSON value, None when there are none) "
        "and returning a JSON-serialisable result. Do not read stdin and do not call main yourself."
    ),
    "node": (
        "Write a CommonJS module: `module.exports = function main(inputs) { ... }` taking the upstream "
        "inputs (a JSON value, null when there are none) and returning a JSON-serialisable result "
        "(a promise is awaited). Do not read stdin."
    ),
    "shell": (
        "Write a bash script: the upstream inputs arrive as JSON on stdin; print the result as one JSON "
        "value on the last line of stdout. Use bash and coreutils only."
    ),
}

_FENCE_TAG = {"python": "python", "node": "javascript", "shell": "bash"}
_LANG_TAGS: dict[str, tuple[str, ...]] = {
    "python": ("python", "py", "python3"),
    "node": ("javascript", "js", "node", "nodejs", "mjs"),
    "shell": ("sh", "bash", "shell", "zsh", "console"),
}
_THINK = re.compile(r"<think>.*?(</think>|\Z)", re.DOTALL | re.IGNORECASE)
_FENCE_OPEN = re.compile(r"^[ \t]*(`{3,}|~{3,})[ \t]*([\w+.-]*)")
_IDENTIFIER = re.compile(r"^[A-Za-z_]\w*$")
_REFUSAL = re.compile(
    r"\b(I can(no|')t|I cannot|I am unable|I'm unable|I won't|I will not|I'm sorry|I am sorry|as an AI)\b",
    re.IGNORECASE,
)
_CODE_START = {
    "python": re.compile(r"^(import |from |def |class |#|@|[A-Za-z_]\w* *=|if __name__)"),
    "node": re.compile(
        r"^(const |let |var |function |import |'use strict'|\"use strict\"|//|process\.|module\.)"
    ),
    "shell": re.compile(r"^(#!|set |[a-z_]+=|read |echo |printf |cat |jq |while |for |if )"),
}
# The skeleton's input lines name at most this many top-level keys: enough for a real record, short
# enough that a small model copies the form rather than the list.
_SKELETON_KEYS = 8


def sandbox_rules(options: SandboxOptions) -> list[str]:
    """The rules the sandbox enforces, in words the model is given.

    Parameters:
        options: the request's sandbox options.

    Returns:
        One sentence per rule.
    """
    rules = [RESULT_CONVENTION[options.lang]]
    if options.network == "none":
        rules.append("There is no network: do not open sockets or make HTTP requests.")
    else:
        rules.append("Network access is limited to these hosts: " + ", ".join(options.network.allow) + ".")
    if options.fs == "none":
        rules.append("There is no writable file system: do not open, create or delete files.")
    elif options.fs == "tmp":
        rules.append("Only /tmp is writable; do not read or write files anywhere else.")
    else:
        rules.append(
            "Files may only be read under: " + ", ".join(options.fs.allow_paths) + "; /tmp is writable."
        )
    rules.append("Do not start processes (no subprocess, os.system, exec of other programs).")
    rules.append(
        f"The program is killed after {options.timeout_ms} ms and may use at most {options.memory_mb} MB of "
        "memory."
    )
    if options.lang == "python":
        rules.append("Use the Python standard library only.")
    return rules


_TYPE_WORDS = {
    "string": ("a string", "strings"),
    "integer": ("an integer", "integers"),
    "number": ("a number", "numbers"),
    "boolean": ("true or false", "booleans"),
    "object": ("an object", "objects"),
    "array": ("a list", "lists"),
    "null": ("null", "nulls"),
}


def describe_shape(shape: dict[str, Any]) -> str:
    """A JSON Schema from `infer_schema` in a few words ("a list of integers"), for the skeleton's comments.

    Parameters:
        shape: the schema.

    Returns:
        The words ("a JSON value" when the schema says nothing).
    """
    kind = shape.get("type")
    if kind == "array" and isinstance(shape.get("items"), dict) and shape["items"].get("type") in _TYPE_WORDS:
        return f"a list of {_TYPE_WORDS[shape['items']['type']][1]}"
    return _TYPE_WORDS.get(kind, ("a JSON value", ""))[0] if isinstance(kind, str) else "a JSON value"


def program_skeleton(lang: Lang, shape: dict[str, Any]) -> str:
    """The form of the program, reading the inputs the documented way, for the model to fill in.

    Small models copy a form far more reliably than they follow a rule in words.

    Parameters:
        lang: the program's language.
        shape: the JSON Schema of upstream_inputs.

    Returns:
        The skeleton, without fences.
    """
    properties = shape.get("properties", {})
    keys = [key for key in properties if _IDENTIFIER.match(key)][:_SKELETON_KEYS]
    if lang == "python":
        if keys:
            reads = [f"    {key} = inputs[{key!r}]  # {describe_shape(properties[key])}" for key in keys]
        elif shape.get("type") == "null" or not shape:
            reads = ["    # there are no upstream inputs: inputs is None"]
        else:
            reads = [f"    # inputs is {describe_shape(shape)}"]
        return "\n".join(["def main(inputs):", *reads, "    result = ...", "    return result"])
    if lang == "node":
        reads = [
            f"  const {key} = inputs[{json.dumps(key)}];  // {describe_shape(properties[key])}"
            for key in keys
        ]
        return "\n".join(
            [
                "module.exports = function main(inputs) {",
                *reads,
                "  const result = null;",
                "  return result;",
                "};",
            ]
        )
    return '#!/bin/bash\ninputs=$(cat)\n# compute the result from "$inputs" (JSON)\necho "$result_json"'


def build_messages(request: PenRequest) -> list[dict[str, str]]:
    """The chat messages asking for the program.

    The system message holds the rules, the task category, the inputs' shape and the program's form
    (its input lines typed in words); the user message is the task alone, last, where a small model
    attends most. Against the JSON Schema and the task's fields in the user message, this took
    SmolLM2-135M from 2 to 6 of 7 programs running in the sandbox (tests/pen/test_real_model.py).

    Parameters:
        request: the validated `pen.write` request.

    Returns:
        A system and a user message.
    """
    options = request.options.sandbox
    shape = infer_schema(request.context.upstream_inputs)
    fence = _FENCE_TAG[options.lang]
    system = (
        f"You write one self-contained {options.lang} program that does what the user asks. "
        f"Reply with exactly one ```{fence} fenced code block and nothing else: no explanation, "
        "no example usage, no second block.\nRules:\n- "
        + "\n- ".join(sandbox_rules(options))
        + f"\nTask category: {request.context.task_category or 'unspecified'}."
        + f"\nThe inputs' shape (JSON Schema): {json.dumps(shape, sort_keys=True)}"
        + f"\nThe program has this form:\n```{fence}\n{program_skeleton(options.lang, shape)}\n```"
    )
    what = "the bash script" if options.lang == "shell" else "main(inputs)"
    user = f"Write {what} for this task: {request.intent.strip()}"
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


@dataclass(frozen=True)
class ExtractedCode:
    """The program found in a reply.

    Attributes:
        code: its source.
        complete: whether it visibly ended (a closed fence, or bare code): a reply cut off at
            max_tokens is usable only when its code was complete before the cut.
    """

    code: str
    complete: bool


@dataclass(frozen=True)
class _Block:
    tag: str
    body: str
    closed: bool


def _fenced_blocks(text: str) -> list[_Block]:
    blocks: list[_Block] = []
    lines = text.splitlines()
    index = 0
    while index < len(lines):
        opening = _FENCE_OPEN.match(lines[index])
        if not opening:
            index += 1
            continue
        fence, tag = opening.group(1), opening.group(2).lower()
        body: list[str] = []
        closed = False
        index += 1
        # A reply cut off at max_tokens leaves the last fence open: take the block to the end.
        while index < len(lines):
            stripped = lines[index].strip()
            if stripped.startswith(fence[0] * len(fence)) and not stripped.strip(fence[0]):
                closed = True
                break
            body.append(lines[index])
            index += 1
        index += 1
        # A block inside a list item is indented as a whole.
        blocks.append(_Block(tag, textwrap.dedent("\n".join(body)).strip("\n"), closed))
    return [block for block in blocks if block.body.strip()]


def _parse_python(code: str) -> ast.Module | None:
    try:
        return ast.parse(code)
    except (SyntaxError, ValueError):
        return None


def _takes_an_argument(function: ast.FunctionDef) -> bool:
    return bool(function.args.posonlyargs or function.args.args or function.args.vararg)


def entry_function(tree: ast.Module) -> ast.FunctionDef | None:
    """The function the sandbox is to call with the inputs.

    Parameters:
        tree: a python module.

    Returns:
        The top-level `main`; without one, the only top-level function taking an argument (small
        models name it after the task: `parse_csv(data)`); else None.
    """
    functions = [node for node in tree.body if isinstance(node, ast.FunctionDef)]
    main = next((function for function in functions if function.name == "main"), None)
    if main is not None:
        return main
    takers = [function for function in functions if _takes_an_argument(function)]
    return takers[0] if len(takers) == 1 else None


def _entry_fit(code: str, lang: Lang) -> int:
    if lang == "python":
        tree = _parse_python(code)
        entry = entry_function(tree) if tree is not None else None
        return 0 if entry is None else 2 if entry.name == "main" else 1
    if lang == "node":
        return 2 if "module.exports" in code or "exports.main" in code else 0
    return 2


def _rank(block: _Block, lang: Lang) -> tuple[bool, int, int, bool, int]:
    tag_fit = 2 if block.tag in _LANG_TAGS[lang] else 1 if not block.tag else 0
    parses = lang != "python" or _parse_python(block.body) is not None
    return (parses, _entry_fit(block.body, lang), tag_fit, block.closed, len(block.body))


def _bare_code(text: str, lang: Lang) -> str | None:
    lines = text.splitlines()
    start = next((n for n, line in enumerate(lines) if _CODE_START[lang].match(line.strip())), None)
    if start is None:
        return None
    if lang != "python":
        return "\n".join(lines[start:]).strip()
    # Prose may follow the code: keep the longest run of lines from the start that parses.
    for end in range(len(lines), start, -1):
        code = "\n".join(lines[start:end]).strip()
        if _parse_python(code) is not None:
            return code
    return None


def extract_code(reply: str, lang: Lang) -> ExtractedCode | None:
    """The program in a model's reply, or None when there is none.

    Parameters:
        reply: the reply's text.
        lang: the language asked for.

    Returns:
        The best fenced block (for python: parsing, then defining `main`, then tagged with the
        language, closed, longest), else the bare code the reply holds, else None.
    """
    text = _THINK.sub("", reply).strip()
    blocks = _fenced_blocks(text)
    if blocks:
        best = max(blocks, key=lambda block: _rank(block, lang))
        return ExtractedCode(best.body, best.closed)
    code = _bare_code(text, lang)
    return ExtractedCode(code, True) if code is not None else None


def _calls(node: ast.stmt, name: str) -> bool:
    if isinstance(node, ast.If):
        test = node.test
        return (
            isinstance(test, ast.Compare)
            and isinstance(test.left, ast.Name)
            and test.left.id == "__name__"
            and any(isinstance(c, ast.Constant) and c.value == "__main__" for c in test.comparators)
        )
    if isinstance(node, (ast.Expr, ast.Assign)):
        return any(
            isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == name
            for call in ast.walk(node.value)
        )
    return False


def without_own_calls(code: str, entry: str = "main") -> str:
    """Python code without the top-level statements that run its entry function itself.

    The sandbox runs the code as `__main__` and then calls `main(inputs)` with the real inputs, so
    an `if __name__ == "__main__":` block or a `print(main([1, 2, 3]))` would run it a second time
    on made-up inputs (or with none, and fail).

    Parameters:
        code: python source that parses.
        entry: the name of the entry function.

    Returns:
        The source with those statements' lines removed (unchanged when there are none).
    """
    tree = ast.parse(code)
    drop = {
        line
        for node in tree.body
        if _calls(node, entry) and node.end_lineno is not None
        for line in range(node.lineno, node.end_lineno + 1)
    }
    if not drop:
        return code
    kept = [line for number, line in enumerate(code.splitlines(), start=1) if number not in drop]
    return "\n".join(kept).rstrip() + "\n"


def _no_code(reply: ChatReply) -> CodeGenerationFailed:
    if _REFUSAL.search(reply.content):
        return CodeGenerationFailed(
            "code model refused: " + reply.content.strip()[:200], details={"reason": "refused"}
        )
    return CodeGenerationFailed(
        "code model replied without code: " + reply.content.strip()[:200], details={"reason": "no_code"}
    )


def _check_python(code: str) -> str:
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError) as exc:
        where = f" at line {exc.lineno}" if isinstance(exc, SyntaxError) else ""
        raise CodeGenerationFailed(
            f"generated python does not parse: {getattr(exc, 'msg', exc)}{where}",
            details={"reason": "syntax_error"},
        ) from exc
    main = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "main"), None)
    if main is not None and not _takes_an_argument(main):
        raise CodeGenerationFailed(
            "generated python's main() takes no argument; the sandbox calls main(inputs)",
            details={"reason": "no_main"},
        )
    entry = entry_function(tree)
    if entry is None:
        raise CodeGenerationFailed(
            "generated python defines no main(inputs) function (nor a single function taking the inputs): "
            + code.strip()[:200],
            details={"reason": "no_main"},
        )
    code = without_own_calls(code, entry.name)
    if entry.name != "main":
        code = (
            code.rstrip()
            + f"\n\n\n# The sandbox calls main(inputs): {entry.name} is the program's entry.\nmain = "
              f"{entry.name}\n"
        )
    return code


def generate_code(client: ChatClient, request: PenRequest) -> str:
    """Ask the code model for the program and extract it.

    Parameters:
        client: a chat-completions client.
        request: the validated request (its intent already screened).

    Returns:
        The program's source.

    Raises:
        CodeGenerationFailed: (MPP-E003) the endpoint failed or refused, the reply was cut off
            before its code ended, or it holds no usable code; `details["reason"]` says which.
    """
    lang = request.options.sandbox.lang
    reply = client.complete(build_messages(request))
    found = extract_code(reply.content, lang)
    if reply.finish_reason == "length" and (found is None or not found.complete):
        raise CodeGenerationFailed(
            f"the code model's reply was cut off at max_tokens={client.settings.max_tokens} "
            "(finish_reason 'length') before its program ended; raise SLOTRELAY_MODEL_MAX_TOKENS "
            "or ask for a smaller program",
            details={"reason": "truncated", "finish_reason": "length"},
        )
    if found is None:
        raise _no_code(reply)
    if lang == "python":
        return _check_python(found.code)
    return found.code
