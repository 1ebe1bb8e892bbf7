"""Op-test fixtures: a scripted in-process LLM (`llm`). The fake OpenAI server (for the embedding client, and for
tests of the OpenAI transport) is the `fake_openai` fixture of `reme_service.testing.pytest_plugin`."""

from __future__ import annotations

import pytest

from reme_service.testing.scripted_llm import ScriptedLLM


@pytest.fixture
def llm() -> ScriptedLLM:
    """A fresh scripted LLM: script it per op (`llm.on("SuccessExtractionOp", reply)`), give it to the app."""
    return ScriptedLLM()
