"""The error module: the failure envelope, the validation-error formatter, the LLM error split, light imports."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict, ValidationError

from reme_service.errors import (
    InvalidRequestError,
    LLMError,
    LLMReplyError,
    NotFoundError,
    RequestValidationError,
    describe_validation_errors,
    error_envelope,
)
from reme_service.providers.retry import RetryableReply, call_with_retries

ROOT = Path(__file__).resolve().parents[2]


class _Inner(BaseModel):
    model_config = ConfigDict(extra="forbid")
    size: int


class _Outer(BaseModel):
    query: str
    top_k: int = 5
    inner: _Inner | None = None


def _errors(**data: Any) -> ValidationError:
    with pytest.raises(ValidationError) as caught:
        _Outer.model_validate(data)
    return caught.value


def test_envelope_shape() -> None:
    assert error_envelope(NotFoundError("no flow 'x'"), "rid") == {
        "answer": "",
        "success": False,
        "metadata": {"error": {"code": "not_found", "message": "no flow 'x'", "request_id": "rid"}},
    }
    with_details = error_envelope(RequestValidationError("bad", details={"errors": []}), "r2")
    assert with_details["metadata"]["error"] == {
        "code": "validation_error",
        "message": "bad",
        "details": {"errors": []},
        "request_id": "r2",
    }


def test_error_types() -> None:
    invalid = RequestValidationError("bad")
    assert isinstance(invalid, InvalidRequestError) and (invalid.code, invalid.status) == ("validation_error", 422)
    reply = LLMReplyError("unusable")
    assert isinstance(reply, LLMError) and (reply.code, reply.status) == ("llm_error", 502)


def test_describe_lists_each_field_with_its_location() -> None:
    exc = _errors(top_k="many", inner={"size": 1, "colour": "red"})
    text = describe_validation_errors(exc, prefix="bad: ")
    assert text.startswith("bad: query: Field required; top_k: Input should be a valid integer")
    assert "inner.colour: Extra inputs are not permitted" in text


def test_describe_with_input_leaves_missing_fields_alone() -> None:
    text = describe_validation_errors(_errors(top_k="many"), with_input=True)
    assert 'top_k: Input should be a valid integer, unable to parse string as an integer (got "many")' in text
    assert "query: Field required;" in text  # a missing field has no input to show
    long = describe_validation_errors(_errors(query=1, top_k="x" * 500), with_input=True, input_width=10)
    assert '(got "xxxxxxxxx)' in long


def test_describe_limit_explain_root_and_plain_items() -> None:
    exc = _errors(top_k="many", inner={"size": "big"})
    assert describe_validation_errors(exc, limit=1) == "query: Field required (and 2 more)"

    def only_missing(err: Any) -> str | None:
        return f"{err['loc'][0]} is required" if err["type"] == "missing" else None

    assert describe_validation_errors(exc, explain=only_missing, limit=2).startswith("query is required; top_k: ")
    detail = [{"loc": ["body", "top_k"], "msg": "bad int"}, {"loc": ["body"], "msg": "not an object"}, "odd"]
    assert describe_validation_errors(detail, skip_root="body", no_loc="(body)", line="<{loc}> {msg}") == (
        "<top_k> bad int; <(body)> not an object; odd"
    )


@pytest.mark.anyio
async def test_retries_name_an_unusable_reply_apart_from_a_failing_provider() -> None:
    async def empty() -> str:
        raise RetryableReply("empty reply")

    with pytest.raises(LLMReplyError, match="empty reply"):
        await call_with_retries(
            empty, max_retries=1, backoff=0, error_cls=LLMError, reply_error_cls=LLMReplyError, what="call"
        )
    with pytest.raises(LLMError) as caught:  # without reply_error_cls, the caller's class as before
        await call_with_retries(empty, max_retries=0, backoff=0, error_cls=LLMError, what="call")
    assert type(caught.value) is LLMError

    calls = 0

    async def empty_then_down() -> str:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise RetryableReply("empty reply")
        raise ConnectionRefusedError("refused")

    with pytest.raises(LLMError) as down:  # the last failure decides
        await call_with_retries(
            empty_then_down, max_retries=1, backoff=0, error_cls=LLMError, reply_error_cls=LLMReplyError, what="call"
        )
    assert type(down.value) is LLMError


def test_client_keeps_exporting_the_error_types() -> None:
    from reme_service import client, errors

    assert client.RequestValidationError is errors.RequestValidationError
    assert client.ServiceConnectionError is errors.ServiceConnectionError


@pytest.mark.slow
def test_client_import_loads_neither_openai_nor_numpy() -> None:
    code = (
        "import sys, reme_service.client; "
        "loaded = [m for m in ('openai', 'numpy', 'tokenizers', 'reme_service.app') if m in sys.modules]; "
        "assert not loaded, loaded; "
        "from reme_service import ReMeApp, AppConfig; assert ReMeApp.__name__ == 'ReMeApp'"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
