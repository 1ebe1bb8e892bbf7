"""`ServiceContext.publish_memories`: `metadata.memory_list` is always the dump of the memories as they are when
published, though a memory already dumped by the request, unchanged, is not dumped again."""

from __future__ import annotations

from typing import Any, cast

from pydantic import BaseModel

from reme_service.auth.caller import TRUSTED
from reme_service.auth.policy import RequestScope
from reme_service.flow.op import AnyOp
from reme_service.ops.common.context import ServiceContext
from reme_service.schema.memory import TaskMemory
from reme_service.schema.workspace_ids import WorkspaceId
from reme_service.services import Services


class _Request(BaseModel):
    workspace_id: str = "ws"


def _context() -> ServiceContext:
    services = cast(Services, object())  # publishing never touches the services
    scope = RequestScope(caller=TRUSTED, workspace_id=WorkspaceId("ws"), needed="write")
    return ServiceContext(flow_name="f", request_id="r", request=_Request(), services=services, scope=scope)


def _memory(n: int) -> TaskMemory:
    return TaskMemory(memory_id=f"m{n}", when_to_use=f"when {n}", content=f"do {n}", metadata={"session": "s"})


def test_published_memories_are_their_dumps_and_each_is_dumped_once() -> None:
    ctx = _context()
    first, second = _memory(1), _memory(2)
    first.relevance = 0.5
    ctx.publish_memories([first, second])
    listed: list[dict[str, Any]] = ctx.response.metadata["memory_list"]
    assert listed == [first.model_dump(mode="json"), second.model_dump(mode="json")]
    assert listed[0]["relevance"] == 0.5 and "relevance" not in listed[1]
    view = ctx.bind(cast(AnyOp, _Op()))  # a later op's view shares what was dumped
    view.publish_memories([second])
    assert ctx.response.metadata["memory_list"] == [second.model_dump(mode="json")]
    assert ctx.response.metadata["memory_list"][0] is listed[1]  # reused, not dumped again


def test_a_memory_changed_after_publishing_is_dumped_again() -> None:
    ctx = _context()
    memory = _memory(1)
    ctx.publish_memories([memory])
    before = ctx.response.metadata["memory_list"][0]
    memory.relevance = 0.25
    memory.metadata = {"session": "t"}
    ctx.publish_memories([memory])
    after = ctx.response.metadata["memory_list"][0]
    assert after is not before
    assert (
        after == memory.model_dump(mode="json") and after["relevance"] == 0.25 and after["metadata"] == {"session": "t"}
    )
    assert "relevance" not in before  # the earlier dump is left as it was


class _Op:
    name = "later"
    input_names: frozenset[str] = frozenset()
    readable_keys: frozenset[str] = frozenset()
    writable_keys: frozenset[str] = frozenset()
