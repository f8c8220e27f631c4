"""The code model client and code extraction against the stub server: every error shape, retries,
slowness, refusals and replies without code end in MPP-E003; good replies give the code."""

from __future__ import annotations

import time

import pytest

from slotrelay.pen.codegen import build_messages, extract_code, generate_code
from slotrelay.pen.errors import CodeGenerationFailed, ModelNotConfigured
from slotrelay.pen.model_client import ChatClient, ModelSettings
from slotrelay.pen.models import parse_request

from .stub_model import Reply, code_reply, completion

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
    assert "sum the numbers in the input list" in user and "data-process" in user and "python" in user
    assert '"numbers": {"items": {"type": "integer"}' in user
    assert "[1, 2, 3]" not in user


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
    stub.script.append(Reply(body=completion("```python\nx = 1\n```"), delay=3))
    settings = ModelSettings(base_url=model.base_url, model="stub-coder", timeout_s=0.4)
    started = time.monotonic()
    with (
        ChatClient(settings) as client,
        pytest.raises(CodeGenerationFailed, match="did not answer within 0.4 s"),
    ):
        generate_code(client, REQUEST)
    assert time.monotonic() - started < 2.5, "the client must give up at its timeout, not when the reply comes"
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


@pytest.mark.parametrize(
    ("reply", "lang", "expected"),
    [
        ("```python\ndef main(inputs):\n    return 1\n```", "python", "def main(inputs):\n    return 1"),
        (
            "<think>maybe ```python\nimport os\n```</think>\n```py\ndef main(inputs):\n    return 2\n```",
            "python",
            "def main(inputs):\n    return 2",
        ),
        ("Sure:\n~~~\ndef main(inputs):\n    return 3\n~~~", "python", "def main(inputs):\n    return 3"),
        ("Here:\n```python\ndef main(inputs):\n    return 4\n", "python", "def main(inputs):\n    return 4"),
        (
            "Here you go.\nimport json\ndef main(inputs):\n    return 5",
            "python",
            "import json\ndef main(inputs):\n    return 5",
        ),
        (
            "```text\nusage\n```\n```python\nx = 1\n```\n```python\ndef main(inputs):\n    return 6\n```",
            "python",
            "def main(inputs):\n    return 6",
        ),
        ("```js\nmodule.exports = (inputs) => 7;\n```", "node", "module.exports = (inputs) => 7;"),
        ("```bash\necho 8\n```", "shell", "echo 8"),
        ("No code for you.", "python", None),
    ],
)
def test_extract_code(reply, lang, expected) -> None:
    assert extract_code(reply, lang) == expected


def test_settings_from_env_and_dotenv(tmp_path, monkeypatch) -> None:
    for key in ("BASE_URL", "NAME", "API_KEY", "TIMEOUT_S"):
        monkeypatch.delenv(f"SLOTRELAY_MODEL_{key}", raising=False)
    env_file = tmp_path / ".env"
    env_file.write_text(
        "SLOTRELAY_MODEL_BASE_URL=http://127.0.0.1:11434/v1\nSLOTRELAY_MODEL_NAME=qwen\n"
        "SLOTRELAY_MODEL_API_KEY=secret\n"
    )
    monkeypatch.setenv("SLOTRELAY_MODEL_TIMEOUT_S", "12.5")
    settings = ModelSettings.from_env(env_file=env_file)
    assert (settings.base_url, settings.model, settings.api_key, settings.timeout_s) == (
        "http://127.0.0.1:11434/v1",
        "qwen",
        "secret",
        12.5,
    )
    assert "secret" not in repr(settings)
    with pytest.raises(ModelNotConfigured, match="SLOTRELAY_MODEL_BASE_URL and SLOTRELAY_MODEL_NAME"):
        ModelSettings.from_env(env_file=tmp_path / "missing.env")


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
