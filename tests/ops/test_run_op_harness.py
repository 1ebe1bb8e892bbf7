"""The op harness (`reme_service.testing.run_op`): ops run on real services without the app, a configured flow
answers as `ReMeApp.async_execute` does, and a test may give the op under test what earlier ops would write."""

from __future__ import annotations

from pathlib import Path

import pytest

from reme_service.errors import FlowDeclarationError
from reme_service.ops.common import keys
from reme_service.testing.run_op import op_services, run_flow, run_op

pytestmark = pytest.mark.anyio

MEMORIES = [
    {"when_to_use": "brewing green tea", "content": "water at 80 degrees"},
    {"when_to_use": "deploying the web service", "content": "refresh the token first"},
]


async def test_an_op_tree_runs_on_the_services_and_leaves_its_context(tmp_path: Path) -> None:
    async with op_services(tmp_path) as services:
        stored = await run_flow(services, "vector_store", workspace_id="ws", action="insert", memory_dicts=MEMORIES)
        assert stored["success"] is True, stored
        done = await run_op(
            services, "BuildQueryOp() >> RecallVectorStoreOp(hybrid=False)", workspace_id="ws", query="green tea"
        )
        given = await run_op(services, "RecallVectorStoreOp(hybrid=False)", workspace_id="ws", top_k=1,
                             context={keys.QUERY: "deploying the web service"})  # fmt: skip
    assert done.context[keys.QUERY] == "green tea"
    assert done.context[keys.MEMORY_LIST][0].content == "water at 80 degrees"
    assert [m.content for m in given.context[keys.MEMORY_LIST]] == ["refresh the token first"]


async def test_an_op_reading_what_nothing_wrote_is_refused_as_in_a_flow(tmp_path: Path) -> None:
    async with op_services(tmp_path) as services:
        with pytest.raises(FlowDeclarationError, match="reads context key 'query', which no earlier op writes"):
            await run_op(services, "RecallVectorStoreOp()", workspace_id="ws")
        failed = await run_flow(services, "retrieve_task_memory", workspace_id="ws", top_k="many")
    assert failed["success"] is False and failed["metadata"]["error"]["code"] == "validation_error"
