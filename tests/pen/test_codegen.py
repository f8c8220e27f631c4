"""The code model client and code extraction against the stub server: every error shape, retries,
slowness, refusals and replies without code end in MPP-E003; good replies give the code."""

from __future__ import annotations

import threading

import pytest

from harness.stub_model import Reply, code_reply, completion, stream_reply
from slotrelay.audit_log import sha256_text
from slotrelay.pen import write
from slotrelay.pen.codegen import build_messages, extract_code, generate_code
from slotrelay.pen.errors import CodeGenerationFailed
from slotrelay.pen.model_client import ChatClient, ModelSettings
from slotrelay.pen.models import parse_request
from slotrelay.psmr.analysis.effects import effects

REQUEST = parse_request(
    {
        "intent": "sum the numbers in the input list",
        "context": {
            "persona_id": "p1",
            "task_category": "data-process",
            "upstream_inputs": {"numbers": [1, 2, 3]},
        },
    }
)


def test_prompt_carries_intent_lang_category_shape_and_rules_but_not_values(stub, model) -> None:
    with ChatClient(model) as client:
        code = generate_code(client, REQUEST)
    assert code.strip() == stub.default_code.strip()
    sent = stub.requests[0]
    assert sent["path"] == "/v1/chat/completions"
    assert sent["auth"] == "Bearer sk-test"
    assert sent["body"]["model"] == "stub-coder"
    system, user = (message["content"] for message in sent["body"]["messages"])
    assert "def main(inputs)" in system and "no network" in system and "/tmp" in system
    assert "python program" in system and "Task category: data-process." in system
    assert '"numbers": {"items": {"type": "integer"}' in system
    # The task comes last, on its own, where a small model attends most.
    assert user == "Write main(inputs) for this task: sum the numbers in the input list"
    assert "[1, 2, 3]" not in system + user


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        # OpenAI / vLLM >= 0.6 / llama.cpp error object, after retries of a 5xx.
        (
            Reply(
                status=503,
                body={"error": {"code": 503, "message": "Loading model", "type": "unavailable_error"}},
            ),
            "Loading model (unavailable_error)",
        ),
        # Ollama: the error is a bare string.
        (
            Reply(status=404, body={"error": "model 'stub-coder' not found, try pulling it first"}),
            "model 'stub-coder' not found",
        ),
        # vLLM before 0.6: a top-level error object.
        (
            Reply(
                status=400,
                body={
                    "object": "error",
                    "message": "max_tokens is too large",
                    "type": "BadRequestError",
                    "code": 400,
                },
            ),
            "max_tokens is too large (BadRequestError)",
        ),
        # A proxy in front of the server answering HTML.
        (Reply(status=502, raw=b"<html><body>502 Bad Gateway</body></html>"), "502 Bad Gateway"),
    ],
)
def test_server_error_shapes_become_e003(stub, model, reply, reason) -> None:
    # 5xx answers are retried (max_retries=2): script the same failure three times.
    stub.script.extend([reply] * 3)
    with ChatClient(model) as client, pytest.raises(CodeGenerationFailed) as caught:
        generate_code(client, REQUEST)
    assert caught.value.code == "MPP-E003"
    assert reason in caught.value.message
    expected_tries = 3 if reply.status >= 500 else 1
    assert len(stub.requests) == expected_tries


def test_5xx_then_success_is_retried(stub, model) -> None:
    stub.script.extend(
        [
            Reply(status=500, body={"error": {"message": "boom"}}),
            Reply(status=429, body={}, headers={"Retry-After": "0"}),
            code_reply("def main(inputs):\n    return 1\n"),
        ]
    )
    with ChatClient(model) as client:
        assert "return 1" in generate_code(client, REQUEST)
    assert len(stub.requests) == 3


def test_slow_model_times_out_without_retrying(stub, model) -> None:
    # The reply is held until the client has failed: a client that waited for it would get it (HOLD_S
    # later) and return its code, and one that retried would get the default reply.
    released = threading.Event()
    stub.script.append(Reply(body=completion("```python\nx = 1\n```"), hold=released))
    settings = ModelSettings(base_url=model.base_url, model="stub-coder", timeout_s=0.4)
    try:
        with (
            ChatClient(settings) as client,
            pytest.raises(CodeGenerationFailed, match="did not answer within 0.4 s"),
        ):
            generate_code(client, REQUEST)
    finally:
        released.set()
    assert len(stub.requests) == 1


def test_unreachable_endpoint_is_e003() -> None:
    settings = ModelSettings(base_url="http://127.0.0.1:9/v1", model="m", timeout_s=1, max_retries=1)
    with ChatClient(settings) as client, pytest.raises(CodeGenerationFailed, match="unreachable"):
        generate_code(client, REQUEST)


@pytest.mark.parametrize(
    ("body", "match"),
    [
        (completion(None, refusal="I can't help with that."), "refused: I can't help"),
        (completion("", finish_reason="content_filter"), "refused: content filtered"),
        (completion("I'm sorry, but I cannot write that program."), "refused"),
        (completion("The numbers add up nicely, good luck!"), "replied without code"),
        (completion("   "), "no text"),
        ({"unexpected": True}, "not a chat completion"),
        (completion("```python\ndef main(inputs):\n    return (\n"), "does not parse"),
    ],
)
def test_refusals_and_replies_without_code_are_e003(stub, model, body, match) -> None:
    stub.script.append(Reply(body=body))
    with ChatClient(model) as client, pytest.raises(CodeGenerationFailed, match=match):
        generate_code(client, REQUEST)


# Answer shapes, most of them as SmolLM2-135M-Instruct on llama.cpp's server wrote them
# (tests/pen/test_real_model.py); each is a case here so CI covers it without the model.
@pytest.mark.parametrize(
    ("reply", "lang", "expected", "complete"),
    [
        (
            "```python\ndef main(inputs):\n    return 1\n```",
            "python",
            "def main(inputs):\n    return 1",
            True,
        ),
        (
            "<think>maybe ```python\nimport os\n```</think>\n```py\ndef main(inputs):\n    return 2\n```",
            "python",
            "def main(inputs):\n    return 2",
            True,
        ),
        (
            "Sure:\n~~~\ndef main(inputs):\n    return 3\n~~~",
            "python",
            "def main(inputs):\n    return 3",
            True,
        ),
        # Cut off at max_tokens: the last fence is open.
        (
            "Here:\n```python\ndef main(inputs):\n    return 4\n",
            "python",
            "def main(inputs):\n    return 4",
            False,
        ),
        (
            "Here you go.\nimport json\ndef main(inputs):\n    return 5",
            "python",
            "import json\ndef main(inputs):\n    return 5",
            True,
        ),
        # No fence, and prose after the code.
        (
            "def main(inputs):\n    return 5\n\nThis function returns five.",
            "python",
            "def main(inputs):\n    return 5",
            True,
        ),
        (
            "```text\nusage\n```\n```python\nx = 1\n```\n```python\ndef main(inputs):\n    return 6\n```",
            "python",
            "def main(inputs):\n    return 6",
            True,
        ),
        # The program, then an example of its use in a second, longer block.
        (
            (
                "```python\ndef main(inputs):\n    return sum(inputs)\n```\nExample:\n```python\n"
                "numbers = [1, 2, 3, 4, 5, 6, 7]\nresult = main(numbers)\nprint(f'The sum is {result}')\n```"
            ),
            "python",
            "def main(inputs):\n    return sum(inputs)",
            True,
        ),
        # Python under a wrong language tag, beside a shell block that is really shell.
        (
            ("Run it with:\n```bash\npython3 main.py\n```\n"
            "```javascript\ndef main(inputs):\n    return 7\n```"),
            "python",
            "def main(inputs):\n    return 7",
            True,
        ),
        # A block indented under a list item.
        (
            "1. The code:\n   ```python\n   def main(inputs):\n       return 8\n   ```",
            "python",
            "def main(inputs):\n    return 8",
            True,
        ),
        ("```js\nmodule.exports = (inputs) => 7;\n```", "node", "module.exports = (inputs) => 7;", True),
        ("```bash\necho 8\n```", "shell", "echo 8", True),
    ],
)
def test_extract_code(reply, lang, expected, complete) -> None:
    found = extract_code(reply, lang)
    assert found is not None
    assert (found.code, found.complete) == (expected, complete)


def test_extract_code_finds_nothing_in_prose() -> None:
    assert extract_code("No code for you.", "python") is None
    assert extract_code("The answer is:\n\nIt depends on the list.", "python") is None


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        # The model calls main on made-up inputs: the sandbox calls it with the real ones.
        (
            (
                "```python\ndef main(inputs):\n    return len(inputs)\n\nif __name__ == '__main__':\n"
                "    print(main([1, 2]))\n```"
            ),
            "def main(inputs):\n    return len(inputs)\n",
        ),
        (
            ("```python\ndef main(inputs):\n    return len(inputs)\n\nprint(main([1, 2]))\nresult = "
            "main([3])\n```"),
            "def main(inputs):\n    return len(inputs)\n",
        ),
        (
            "```python\nimport json\n\ndef main(inputs):\n    return json.dumps(inputs)\n```",
            "import json\n\ndef main(inputs):\n    return json.dumps(inputs)",
        ),
        # SmolLM2-135M named its only function after the task and called it on a file of its own.
        (
            (
                "Here's how you could implement it:\n```python\nimport csv\ndef parse_csv(input):\n"
                "    return list(csv.DictReader(input['csv'].splitlines()))\n\nprint(parse_csv({'csv': "
                "'a'}))\n```"
            ),
            (
                "import csv\ndef parse_csv(input):\n    return "
                "list(csv.DictReader(input['csv'].splitlines()))\n\n\n"
                "# The sandbox calls main(inputs): parse_csv is the program's entry.\nmain = parse_csv\n"
            ),
        ),
    ],
)
def test_generated_python_is_the_program_without_its_own_calls_of_main(
    stub, model, content, expected
) -> None:
    stub.script.append(Reply(body=completion(content)))
    with ChatClient(model) as client:
        assert generate_code(client, REQUEST) == expected


@pytest.mark.parametrize(
    ("body", "reason", "match"),
    [
        # Cut off at max_tokens inside its code block: whatever parses is not the whole program.
        (
            completion("```python\ndef main(inputs):\n    total = 0\n", finish_reason="length"),
            "truncated",
            "cut off at max_tokens=1024 .finish_reason 'length'.",
        ),
        (completion("def main(inputs):\n    return [", finish_reason="length"), "truncated", "cut off"),
        (
            completion("```python\nnumbers = [1, 2, 3]\nprint(sum(numbers))\n```"),
            "no_main",
            "defines no main.inputs. function",
        ),
        (completion("```python\ndef main():\n    return 1\n```"), "no_main", "takes no argument"),
        # Two candidate functions: which one is the entry is a guess the pen does not make.
        (
            completion("```python\ndef load(path):\n    return path\n\ndef count(items):\n    return 1\n```"),
            "no_main",
            "nor a single function",
        ),
        (completion("```python\ndef main(inputs):\n    return (\n```"), "syntax_error", "does not parse"),
    ],
)
def test_unusable_programs_are_e003_with_the_reason(stub, model, body, reason, match) -> None:
    stub.script.append(Reply(body=body))
    with ChatClient(model) as client, pytest.raises(CodeGenerationFailed, match=match) as caught:
        generate_code(client, REQUEST)
    assert caught.value.code == "MPP-E003"
    assert caught.value.details["reason"] == reason


def test_a_reply_cut_off_after_its_closed_block_is_used(stub, model) -> None:
    # Small models ramble after the code until max_tokens: the program itself ended.
    rambling = "```python\ndef main(inputs):\n    return 9\n```\nThis program is a program that " * 3
    stub.script.append(Reply(body=completion(rambling, finish_reason="length")))
    with ChatClient(model) as client:
        assert generate_code(client, REQUEST) == "def main(inputs):\n    return 9"
    assert stub.requests[0]["body"]["max_tokens"] == 1024


@pytest.mark.parametrize(
    ("reply", "match"),
    [
        (
            stream_reply(["```python\n", "def main(inputs):\n", "    return 10\n", "```"]),
            None,
        ),
        # llama.cpp and vLLM send an error mid-stream as a chunk of its own.
        (
            stream_reply(
                ["```python\n"],
                finish_reason=None,
                error={"error": {"message": "context window exceeded", "type": "server_error"}},
            ),
            "context window exceeded .server_error.",
        ),
        (stream_reply(["```python\ndef main(inputs):"], finish_reason=None, done=False), "ended its stream"),
        (stream_reply(["```python\ndef main(inputs):\n"], finish_reason="length"), "cut off"),
        (Reply(raw=b"data: {not json\n\n", content_type="text/event-stream"), "not JSON"),
        # Status 200 with an error body (a proxy, or a server that reports errors that way).
        (Reply(body={"error": {"message": "model is loading", "code": 503}}), "model is loading .503."),
        (
            Reply(body={"object": "error", "message": "out of memory", "type": "InternalServerError"}),
            "out of memory",
        ),
        # The server dies half-way through a chunked body.
        (
            Reply(body=completion("```python\ndef main(inputs):\n    return 11\n```"), cut=True),
            "broke the connection",
        ),
    ],
)
def test_streamed_and_broken_answers(stub, model, reply, match) -> None:
    stub.script.append(reply)
    with ChatClient(model) as client:
        if match is None:
            assert generate_code(client, REQUEST) == "def main(inputs):\n    return 10"
            return
        with pytest.raises(CodeGenerationFailed, match=match) as caught:
            generate_code(client, REQUEST)
    assert caught.value.code == "MPP-E003"


def test_the_prompt_gives_the_form_reading_the_inputs() -> None:
    system = build_messages(REQUEST)[0]["content"]
    assert "exactly one ```python fenced code block" in system
    assert (
        "def main(inputs):\n    numbers = inputs['numbers']  # a list of integers\n    result = ...\n"
        "    return result" in system
    )
    no_inputs = parse_request({"intent": "return the first ten primes", "context": {"persona_id": "p1"}})
    assert "inputs is None" in build_messages(no_inputs)[0]["content"]


def test_messages_for_node_tell_the_module_convention() -> None:
    request = parse_request(
        {
            "intent": "count words in the text",
            "context": {"persona_id": "p1"},
            "options": {"sandbox": {"lang": "node", "network": {"allow": ["example.org"]}}},
        }
    )
    system = build_messages(request)[0]["content"]
    assert "module.exports" in system and "example.org" in system


@pytest.mark.docker
def test_a_small_models_answer_runs_end_to_end(stub, model, root, sandbox_backend) -> None:
    # SmolLM2-135M's shape: prose, the function named after the task, a call of it on made-up inputs.
    stub.script.append(
        Reply(
            body=completion(
                "The task is to parse the CSV text.\nHere's how you could implement it:\n```python\nimport "
                "csv\n"
                "def parse_csv(data):\n    return list(csv.DictReader(data['csv'].splitlines()))\n\n"
                "print(parse_csv({'csv': 'a,b'}))\n```\nThis returns a list of dicts."
            )
        )
    )
    request = {
        "intent": "parse the CSV text in inputs['csv'] into a list of dicts",
        "context": {"persona_id": "p1", "upstream_inputs": {"csv": "name,age\nann,31"}},
        "options": {"persist_hint": "keep"},
    }
    outcome = write(request, root=root, model=model, effect_screen=effects, backend=sandbox_backend)
    assert outcome.output.execution.status == "success", outcome.output.execution.stderr
    assert outcome.output.execution.result == [{"name": "ann", "age": "31"}]
    # The made-up call did not run: the sandbox called main(inputs) once, with the real inputs.
    assert outcome.output.execution.stdout == ""
    assert outcome.output.code.endswith("main = parse_csv\n")
    assert outcome.output.audit.code_hash == sha256_text(outcome.output.code)
