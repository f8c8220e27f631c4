"""Prompting the code model and pulling code out of its reply.

The prompt carries the intent, the language, the task category, the *shape* of upstream_inputs
(a JSON Schema, never the values) and the sandbox's rules, which are also the contract the program
must follow to hand back a structured result (`RESULT_CONVENTION`). Replies are read robustly:
fenced blocks (``` or ~~~, with or without a language tag, closed or cut off), reasoning blocks
(`<think>...</think>`) dropped, or bare code; a reply without code is MPP-E003.
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass

from slotrelay.pen.errors import CodeGenerationFailed
from slotrelay.pen.json_shape import infer_schema
from slotrelay.pen.model_client import ChatClient
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

_LANG_TAGS: dict[str, tuple[str, ...]] = {
    "python": ("python", "py", "python3"),
    "node": ("javascript", "js", "node", "nodejs", "mjs"),
    "shell": ("sh", "bash", "shell", "zsh", "console"),
}
_THINK = re.compile(r"<think>.*?(</think>|\Z)", re.DOTALL | re.IGNORECASE)
_FENCE_OPEN = re.compile(r"^[ \t]*(`{3,}|~{3,})[ \t]*([\w+.-]*)")
_REFUSAL = re.compile(
    r"\b(I can(no|')t|I cannot|I am unable|I'm unable|I won't|I will not|I'm sorry|I am sorry|as an AI)\b",
    re.IGNORECASE,
)
_CODE_START = {
    "python": re.compile(r"^(import |from |def |class |#|@|[A-Za-z_]\w* *=|if __name__)"),
    "node": re.compile(r"^(const |let |var |function |import |'use strict'|\"use strict\"|//|process\.)"),
    "shell": re.compile(r"^(#!|set |[a-z_]+=|read |echo |printf |cat |jq |while |for |if )"),
}


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
        f"The program is killed after {options.timeout_ms} ms and may use at most {options.memory_mb} MB of memory."
    )
    if options.lang == "python":
        rules.append("Use the Python standard library only.")
    return rules


def build_messages(request: PenRequest) -> list[dict[str, str]]:
    """The chat messages asking for the program.

    Parameters:
        request: the validated `pen.write` request.

    Returns:
        A system and a user message.
    """
    options = request.options.sandbox
    shape = infer_schema(request.context.upstream_inputs)
    system = (
        f"You write one self-contained {options.lang} program that does what the user asks. "
        "Reply with the program in a single fenced code block and nothing else.\nRules:\n- "
        + "\n- ".join(sandbox_rules(options))
    )
    user = "\n".join(
        [
            f"Intent: {request.intent.strip()}",
            f"Language: {options.lang}",
            f"Task category: {request.context.task_category or 'unspecified'}",
            f"Shape of the inputs (JSON Schema): {json.dumps(shape, sort_keys=True)}",
        ]
    )
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


@dataclass(frozen=True)
class _Block:
    tag: str
    body: str


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
        index += 1
        # A reply cut off at max_tokens leaves the last fence open: take the block to the end.
        while index < len(lines):
            stripped = lines[index].strip()
            if stripped.startswith(fence[0] * len(fence)) and not stripped.strip(fence[0]):
                break
            body.append(lines[index])
            index += 1
        index += 1
        blocks.append(_Block(tag, "\n".join(body).strip("\n")))
    return [block for block in blocks if block.body.strip()]


def _parses(code: str, lang: Lang) -> bool:
    if lang != "python":
        return True
    try:
        ast.parse(code)
    except SyntaxError:
        return False
    return True


def extract_code(reply: str, lang: Lang) -> str | None:
    """The program in a model's reply, or None when there is none.

    Parameters:
        reply: the reply's text.
        lang: the language asked for.

    Returns:
        The code of the best fenced block (tagged with the language, parsing, defining `main` for
        python, longest), else the bare code the reply consists of, else None.
    """
    text = _THINK.sub("", reply).strip()
    blocks = _fenced_blocks(text)
    if blocks:
        tags = _LANG_TAGS[lang]
        tagged = [block for block in blocks if block.tag in tags] or [
            block for block in blocks if not block.tag
        ]
        candidates = tagged or blocks

        def rank(block: _Block) -> tuple[bool, bool, int]:
            return (_parses(block.body, lang), "def main" in block.body, len(block.body))

        return max(candidates, key=rank).body
    lines = text.splitlines()
    # Bare code, maybe after a line or two of prose: start at the first line that looks like code.
    for start, line in enumerate(lines):
        if _CODE_START[lang].match(line.strip()):
            code = "\n".join(lines[start:]).strip()
            if _parses(code, lang):
                return code
            break
    return None


def generate_code(client: ChatClient, request: PenRequest) -> str:
    """Ask the code model for the program and extract it.

    Parameters:
        client: a chat-completions client.
        request: the validated request (its intent already screened).

    Returns:
        The program's source.

    Raises:
        CodeGenerationFailed: (MPP-E003) the endpoint failed, refused, or the reply holds no usable code.
    """
    lang = request.options.sandbox.lang
    reply = client.complete(build_messages(request))
    code = extract_code(reply.content, lang)
    if code is None:
        if _REFUSAL.search(reply.content):
            raise CodeGenerationFailed(
                "code model refused: " + reply.content.strip()[:200], details={"reason": "refused"}
            )
        raise CodeGenerationFailed(
            "code model replied without code: " + reply.content.strip()[:200], details={"reason": "no_code"}
        )
    if lang == "python":
        try:
            ast.parse(code)
        except SyntaxError as exc:
            raise CodeGenerationFailed(
                f"generated python does not parse: {exc.msg} at line {exc.lineno}"
                + (" (the reply was cut off)" if reply.finish_reason == "length" else ""),
                details={"reason": "syntax_error"},
            ) from exc
    return code
