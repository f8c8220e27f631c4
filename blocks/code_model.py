"""The code-model endpoint as a Prefect Block: where the pen's OpenAI-compatible model is.

Save one (UI or Python) and pass its name to the `pen-write` or `chain` flow as `model_block`:

    CodeModel(base_url="http://127.0.0.1:11434/v1", model="qwen2.5-coder:1.5b",
    api_key=None).save("local-coder")

The API key is a `SecretStr`, stored encrypted by the Prefect server and never shown in the UI.
"""

from __future__ import annotations

from prefect.blocks.core import Block
from pydantic import Field, SecretStr

from slotrelay.pen.model_client import ModelSettings


class CodeModel(Block):
    """An OpenAI-compatible `/v1/chat/completions` endpoint (Ollama, vLLM, llama.cpp server)."""

    _block_type_name = "slotrelay code model"
    _block_type_slug = "slotrelay-code-model"
    _description = "The code model the magic pen asks for programs (an OpenAI-compatible endpoint)."

    base_url: str = Field(description="API root ending in /v1, e.g. http://127.0.0.1:11434/v1")
    model: str = Field(description="the model name the server knows")
    api_key: SecretStr | None = Field(default=None, description="bearer token, when the server wants one")
    timeout_s: float = Field(default=60.0, gt=0, description="read timeout of one request, in seconds")
    max_retries: int = Field(default=2, ge=0, le=10, description="retries of connection errors and 429/5xx")
    max_tokens: int = Field(
        default=1024, ge=1, description="cap on a program's length in tokens; a reply cut there is MPP-E003"
    )

    def settings(self) -> ModelSettings:
        """The plain settings the pen's core client takes, each said to come from this block."""
        source = f"CodeModel block {self._block_document_name or '(not saved)'}"
        return ModelSettings(
            base_url=self.base_url,
            model=self.model,
            api_key=self.api_key.get_secret_value() if self.api_key else None,
            timeout_s=self.timeout_s,
            max_retries=self.max_retries,
            max_tokens=self.max_tokens,
            sources=dict.fromkeys(("base_url", "model", "api_key", "timeout_s", "max_tokens"), source),
        )
