"""ReMe's own configuration starts the service: the flow expressions of ReMe's default.yaml and the no-op keys of
its docs are accepted (each ignored key named in one warning); keys and parameters that are not ReMe's stay errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from reme_service.app import ReMeApp
from reme_service.errors import ConfigError, FlowSyntaxError
from reme_service.ops.task.update_memory_freq_op import UpdateMemoryFreqOp
from reme_service.ops.working.react_search_op import ReactSearchOp

# ReMe 0.2.0.6 reme_ai/config/default.yaml, as printed there
REME_FLOWS = {
    "add_tool_call_result": "ParseToolCallResultOp(max_history_tool_call_cnt=100, evaluation_sleep_interval=1.0)",
    "summary_tool_memory": "SummaryToolMemoryOp(recent_call_count=20, summary_sleep_interval=1.0)",
    "record_task_memory": "UpdateMemoryFreqOp() >> UpdateMemoryUtilityOp() >> UpdateVectorStoreOp()",
    "react": "SimpleReactOp()",
}


def _reme_args() -> list[str]:
    return [f"flow.{name}.flow_content={content}" for name, content in REME_FLOWS.items()]


def test_reme_default_flows_and_doc_keys_start_with_one_warning_each(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("WARNING")
    app = ReMeApp(
        f"data_dir={tmp_path}",
        *_reme_args(),
        "http_service.port=8001",
        "http_service.host=0.0.0.0",
        "op.parse_tool_call_result_op.params.evaluation_sleep_interval=2",
        env={},
    )
    assert [type(op) for op in app.flows["record_task_memory"].tree.ops()] == [UpdateMemoryFreqOp]
    assert [type(op) for op in app.flows["react"].tree.ops()] == [ReactSearchOp]
    warnings = [record.getMessage() for record in caplog.records if record.levelname == "WARNING"]
    for ignored in (
        "'http_service.port'",
        "'http_service.host'",
        "'op.parse_tool_call_result_op.params.evaluation_sleep_interval'",
        "'evaluation_sleep_interval'",
        "'summary_sleep_interval'",
    ):
        assert len([w for w in warnings if ignored in w and "ignored" in w]) == 1, (ignored, warnings)
    assert app.config.http.port != 8001  # ignored, as in ReMe


@pytest.mark.parametrize(
    "arg",
    [
        "http_services.port=8001",  # not ReMe's key: a typo
        "flow.add_tool_call_result.flow_content=ParseToolCallResultOp(evaluation_sleep=1.0)",
        "flow.summary_tool_memory.flow_content=SummaryToolMemoryOp(summary_sleep_interval=-1)",
        "flow.record_task_memory.flow_content=UpdateMemoryUtilityOp()",  # only ReMe's whole chain is ours
        "flow.react.flow_content=SimpleReactOpp()",
    ],
)
def test_keys_that_are_not_remes_stay_errors(tmp_path: Path, arg: str) -> None:
    with pytest.raises((ConfigError, FlowSyntaxError)):
        ReMeApp(f"data_dir={tmp_path}", arg, env={})


@pytest.mark.anyio
async def test_remes_record_chain_counts_a_use_as_the_service_does(tmp_path: Path) -> None:
    args = (f"data_dir={tmp_path}", "embedding_model.default.backend=hash", "vector_store.default.backend=memory")
    async with ReMeApp(*args, _reme_args()[2], env={}) as app:
        stored = await app.async_execute(
            "vector_store",
            workspace_id="ws",
            action="insert",
            memory_dicts=[{"when_to_use": "book a flight", "content": "compare prices first"}],
        )
        (memory_id,) = stored["metadata"]["action_result"]["memory_ids"]
        result = await app.async_execute(
            "record_task_memory", workspace_id="ws", memory_dicts=[{"memory_id": memory_id}], update_utility=True
        )
        assert result["success"] is True, result
        assert result["metadata"]["update_result"] == {"deleted_count": 0, "inserted_count": 1, "updated_count": 1}
        assert result["metadata"]["memory_list"][0]["metadata"] == {"freq": 1, "utility": 1}
