"""The flow runner and the declaration checks, on small ops of the test's own (the engine knows no memory).

Each op records what it saw in the context; the runner's behaviour — order, concurrency, failure wrapping,
`on_error="skip"`, declared access — is asserted on real runs.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from pydantic import BaseModel

from reme_service.errors import FlowDeclarationError, InvalidRequestError, OpError, UndeclaredAccessError
from reme_service.flow.context import FlowContext, Input, Key
from reme_service.flow.current_op import current_op
from reme_service.flow.op import Op, OpParams
from reme_service.flow.runner import FlowRunner

NUMBER: Input[int] = Input("number", int, default=1)
LABEL: Input[str] = Input("label", str, default="none")
TRACE: Key[list[str]] = Key("trace")
DOUBLED: Key[int] = Key("doubled")
LEFT: Key[str] = Key("left")
RIGHT: Key[str] = Key("right")


class Request(BaseModel):
    number: int | None = None
    label: str | None = None


class NoNumber(BaseModel):
    label: str = ""


class TextNumber(BaseModel):
    number: str = ""


class StartParams(OpParams):
    factor: int = 2


class StartOp(Op[StartParams, FlowContext]):
    inputs = (NUMBER,)
    writes = (TRACE, DOUBLED)

    async def run(self, ctx: FlowContext) -> None:
        ctx[TRACE] = ["start"]
        ctx[DOUBLED] = ctx.input(NUMBER) * self.params.factor


class LeftOp(Op[OpParams, FlowContext]):
    reads = (DOUBLED,)
    writes = (LEFT,)

    async def run(self, ctx: FlowContext) -> None:
        ctx[LEFT] = f"left:{ctx[DOUBLED]}"


class RightOp(Op[OpParams, FlowContext]):
    reads = (DOUBLED,)
    writes = (RIGHT,)

    async def run(self, ctx: FlowContext) -> None:
        ctx[RIGHT] = f"right:{ctx[DOUBLED]}"


class FinishOp(Op[OpParams, FlowContext]):
    reads = (LEFT, RIGHT)
    may_read = (TRACE,)
    inputs = (LABEL,)

    async def run(self, ctx: FlowContext) -> None:
        ctx.response.answer = f"{ctx.input(LABEL)} {ctx[LEFT]} {ctx[RIGHT]}"
        ctx.response.metadata["trace"] = ctx.get(TRACE, [])


class FailParams(OpParams):
    status: int = 400


class FailOp(Op[FailParams, FlowContext]):
    async def run(self, ctx: FlowContext) -> None:
        if self.params.status == 400:
            raise InvalidRequestError("that number is not acceptable")
        raise ZeroDivisionError("boom")


class GatedParams(OpParams):
    tag: str = ""


class GatedOp(Op[GatedParams, FlowContext]):
    """Waits until its sibling has started: proves `|` branches run at the same time."""

    writes = (LEFT,)

    async def run(self, ctx: FlowContext) -> None:
        started = ctx.request.started  # type: ignore[attr-defined]
        started.set()
        await asyncio.wait_for(ctx.request.other.wait(), timeout=5)  # type: ignore[attr-defined]
        ctx[LEFT] = "gated"


class PeerOp(Op[OpParams, FlowContext]):
    writes = (RIGHT,)

    async def run(self, ctx: FlowContext) -> None:
        ctx.request.other.set()  # type: ignore[attr-defined]
        await asyncio.wait_for(ctx.request.started.wait(), timeout=5)  # type: ignore[attr-defined]
        ctx[RIGHT] = "peer"


class SneakyOp(Op[OpParams, FlowContext]):
    """Reads a field it did not declare."""

    async def run(self, ctx: FlowContext) -> None:
        ctx.input(LABEL)


class StrayWriteOp(Op[OpParams, FlowContext]):
    reads = (DOUBLED,)

    async def run(self, ctx: FlowContext) -> None:
        ctx[LEFT] = "not declared"


def _context(flow: str, request_id: str, request: BaseModel) -> FlowContext:
    return FlowContext(flow_name=flow, request_id=request_id, request=request)


def _runner(tree: Any, model: type[BaseModel] = Request) -> FlowRunner[FlowContext]:
    return FlowRunner("demo", tree, model, _context)


def _run(runner: FlowRunner[FlowContext], request: BaseModel) -> Any:
    return asyncio.run(runner.run(request, request_id="r1"))


def test_sequence_and_parallel_pass_values_through_declared_keys() -> None:
    runner = _runner(StartOp(factor=3) >> (LeftOp() | RightOp()) >> FinishOp())
    response = _run(runner, Request(number=5, label="sum"))
    assert response.answer == "sum left:15 right:15"
    assert response.metadata == {"trace": ["start"]}


def test_an_absent_field_takes_the_inputs_default() -> None:
    response = _run(_runner(StartOp() >> (LeftOp() | RightOp()) >> FinishOp()), Request())
    assert response.answer == "none left:2 right:2"  # number=1 (the Input's default) x factor 2


def test_parallel_branches_run_concurrently() -> None:
    class Gates(BaseModel, arbitrary_types_allowed=True):
        started: asyncio.Event
        other: asyncio.Event

    async def scenario() -> Any:
        runner = FlowRunner("gates", GatedOp() | PeerOp(), Gates, _context)
        return await runner.run(Gates(started=asyncio.Event(), other=asyncio.Event()), request_id="r")

    # Each branch waits for the other to have started: run one after the other, they would time out.
    asyncio.run(scenario())


def test_a_failing_op_names_flow_and_op_and_keeps_its_status() -> None:
    runner = _runner(StartOp() >> FailOp())
    with pytest.raises(OpError) as caught:
        _run(runner, Request())
    error = caught.value
    assert error.status == 400 and error.code == "invalid_request"
    assert error.message == "flow 'demo', op 'FailOp': that number is not acceptable"
    assert error.details == {"flow": "demo", "op": "FailOp"}


def test_an_unexpected_exception_becomes_a_500_op_error() -> None:
    with pytest.raises(OpError) as caught:
        _run(_runner(FailOp(status=500)), Request())
    assert caught.value.status == 500
    assert "ZeroDivisionError: boom" in caught.value.message


def test_a_failing_parallel_branch_fails_the_flow_with_its_own_error() -> None:
    runner = _runner(StartOp() >> (LeftOp() | FailOp()))
    with pytest.raises(OpError) as caught:
        _run(runner, Request())
    assert caught.value.op == "FailOp" and caught.value.status == 400


def test_on_error_skip_records_the_failure_and_goes_on() -> None:
    runner = _runner(StartOp() >> FailOp(on_error="skip") >> (LeftOp() | RightOp()) >> FinishOp())
    response = _run(runner, Request(number=2, label="x"))
    assert response.answer == "x left:4 right:4"
    skipped = response.metadata["skipped_ops"]
    assert skipped == [
        {
            "op": "FailOp",
            "error": {
                "code": "invalid_request",
                "message": "flow 'demo', op 'FailOp': that number is not acceptable",
                "details": {"flow": "demo", "op": "FailOp"},
            },
        }
    ]


def test_each_request_gets_fresh_ops_and_a_fresh_context() -> None:
    runner = _runner(StartOp() >> (LeftOp() | RightOp()) >> FinishOp())
    first = _run(runner, Request(number=1, label="a"))
    second = _run(runner, Request(number=7, label="b"))
    assert first.answer == "a left:2 right:2" and second.answer == "b left:14 right:14"
    assert first is not second


def test_reading_an_undeclared_field_fails_the_op() -> None:
    with pytest.raises(OpError) as caught:
        _run(_runner(SneakyOp()), Request())
    assert isinstance(caught.value.__cause__, UndeclaredAccessError)
    assert "SneakyOp uses request field 'label' without declaring it" in caught.value.message


def test_writing_an_undeclared_key_fails_the_op() -> None:
    with pytest.raises(OpError) as caught:
        _run(_runner(StartOp() >> StrayWriteOp()), Request())
    assert "StrayWriteOp uses context key (write) 'left' without declaring it" in caught.value.message


def test_a_field_the_request_model_lacks_stops_the_flow_at_construction() -> None:
    with pytest.raises(FlowDeclarationError) as caught:
        _runner(StartOp() >> (LeftOp() | RightOp()) >> FinishOp(), NoNumber)
    assert str(caught.value).startswith(
        "flow 'demo': op StartOp reads request field 'number', which the flow's input_schema does not declare"
    )


def test_a_field_of_the_wrong_type_stops_the_flow_at_construction() -> None:
    with pytest.raises(FlowDeclarationError, match="op StartOp reads request field 'number' as int, but the flow"):
        _runner(StartOp(), TextNumber)


def test_a_key_no_earlier_op_writes_stops_the_flow() -> None:
    with pytest.raises(FlowDeclarationError, match="op LeftOp reads context key 'doubled', which no earlier op"):
        _runner(LeftOp() >> StartOp())


def test_parallel_branches_may_not_read_each_others_writes() -> None:
    with pytest.raises(FlowDeclarationError, match="op FinishOp reads context key 'left'"):
        _runner(StartOp() >> (LeftOp() | FinishOp()))


def test_two_parallel_branches_writing_one_key_stop_the_flow() -> None:
    with pytest.raises(FlowDeclarationError, match="parallel branches LeftOp and LeftOp both write context key"):
        _runner(StartOp() >> (LeftOp() | LeftOp()))


def test_params_come_from_the_subscript_and_are_typed() -> None:
    assert StartOp.Params is StartParams
    assert StartOp(factor=4).params.factor == 4
    assert LeftOp.Params is OpParams


class WhoOp(Op[OpParams, FlowContext]):
    """Records which op the runner says is running, after yielding to the other branch."""

    writes = (LEFT,)

    async def run(self, ctx: FlowContext) -> None:
        await asyncio.sleep(0)  # let the other branch run (and set its own name) in between
        ctx[self.writes[0]] = current_op.get()


class OtherWhoOp(WhoOp):
    writes = (RIGHT,)


def test_current_op_names_the_running_op_in_each_parallel_branch() -> None:
    runner = _runner(WhoOp() | OtherWhoOp())
    ctx = FlowContext(flow_name="demo", request_id="r", request=Request())

    async def scenario() -> None:
        await runner._execute(runner.tree, ctx)

    asyncio.run(scenario())
    assert ctx._data == {"left": "WhoOp", "right": "OtherWhoOp"}
    assert current_op.get() == ""


def test_compatibility_looks_inside_optionals_enums_and_annotations() -> None:
    from typing import Annotated, Literal

    from reme_service.flow.check import compatible

    assert compatible(Literal["en", "zh"] | None, str)
    assert compatible(Annotated[int, "bounds"] | None, float)
    assert compatible(list[Literal["a"]], list[str])
    assert not compatible(Literal["en", "zh"] | None, int)
    assert not compatible(list[str], list[int])
    assert not compatible(dict[str, int], list[int])
