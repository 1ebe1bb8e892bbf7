"""Every shipped flow gives its ops what they declare; a misdeclared flow stops the start; the engine stays generic."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from reme_service.app import ReMeApp
from reme_service.errors import FlowDeclarationError
from reme_service.ops import ALL_OPS
from reme_service.ops.common.op import ServiceOp

FLOW_DIR = Path(__file__).resolve().parents[2] / "reme_service" / "flow"
FORBIDDEN = ("schema", "stores", "ops", "providers", "config")


def _app(tmp_path: Path, *overrides: str) -> ReMeApp:
    return ReMeApp(f"data_dir={tmp_path}", "embedding_model.default.backend=hash", *overrides, env={})


def test_every_shipped_flow_builds(tmp_path: Path) -> None:
    app = _app(tmp_path)
    assert len(app.flows) == 20  # the runner checks each flow's declarations when it is built


def test_a_flow_whose_schema_forgets_top_k_stops_the_start(tmp_path: Path) -> None:
    # ReMe answered such a flow with 3 memories whatever `top_k` the client sent, and said `success: true`.
    with pytest.raises(FlowDeclarationError) as caught:
        _app(tmp_path, "flow.my_search.flow_content=BuildQueryOp() >> RecallVectorStoreOp() >> MergeMemoryOp()")
    assert str(caught.value).startswith(
        "flow 'my_search': op RecallVectorStoreOp reads request field 'top_k', which the flow's input_schema does "
        "not declare"
    )


def test_declaring_the_field_makes_the_same_flow_start(tmp_path: Path) -> None:
    app = _app(
        tmp_path,
        "flow.my_search.flow_content=BuildQueryOp() >> RecallVectorStoreOp() >> MergeMemoryOp()",
        "flow.my_search.input_schema.top_k.type=integer",
    )
    assert "my_search" in app.flows


def test_a_field_declared_with_the_wrong_type_stops_the_start(tmp_path: Path) -> None:
    with pytest.raises(FlowDeclarationError, match="reads request field 'top_k' as int, but the flow declares it"):
        _app(
            tmp_path,
            "flow.my_search.flow_content=BuildQueryOp() >> RecallVectorStoreOp()",
            "flow.my_search.input_schema.top_k.type=string",
        )


def test_an_op_whose_input_key_nobody_writes_stops_the_start(tmp_path: Path) -> None:
    with pytest.raises(FlowDeclarationError, match="op RecallVectorStoreOp reads context key 'query', which no"):
        _app(
            tmp_path,
            "flow.my_search.flow_content=RecallVectorStoreOp()",
            "flow.my_search.input_schema.top_k.type=integer",
        )


def test_every_op_is_a_service_op_with_its_own_params_model_or_none() -> None:
    for op in ALL_OPS:
        assert issubclass(op, ServiceOp), op.name
        assert op.Params.model_config.get("extra") == "forbid", op.name


def test_the_engine_imports_nothing_of_memory_stores_providers_or_config() -> None:
    pattern = re.compile(r"^\s*(?:from|import)\s+reme_service\.(\w+)", re.M)
    for module in sorted(FLOW_DIR.glob("*.py")):
        used = set(pattern.findall(module.read_text(encoding="utf-8")))
        assert not used & set(FORBIDDEN), f"{module.name} imports reme_service.{sorted(used & set(FORBIDDEN))}"
