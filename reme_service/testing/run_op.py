"""Run one op, or a small op tree, on real services without the app: no HTTP server, no jobs, audit, events or API
keys, only what an op reaches through its `ServiceContext` (config, LLM, embedder, store, prompts, file roots).

```python
async with op_services(tmp_path, llm=ScriptedLLM().on("RerankMemoryOp", "[1, 0]")) as services:
    await services.store().insert("ws", nodes)
    done = await run_op(services, "BuildQueryOp() >> RecallVectorStoreOp()", workspace_id="ws", query="tea")
    done.response.metadata["memory_list"], done.context[keys.MEMORY_LIST]
```

The services are the configured ones of `key=value` overrides (as for the CLI) over the shipped defaults, with the
memory store and the hash embedder unless the overrides say otherwise, and `llm` as the default LLM (none given:
the configured one, which is no LLM unless `env` names a provider, e.g. FLOW_LLM_BASE_URL). The op tree is checked as
a flow's is (`flow/check.py`): a request field it reads must be a field of the request model (the named `flow`'s,
when the config has it, else one made of the ops' own inputs), and a context key it reads must be written by an
earlier op or given in `context`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Protocol

from pydantic import BaseModel, ValidationError, create_model

from reme_service.auth.caller import TRUSTED
from reme_service.auth.policy import resolve_flow
from reme_service.config.loader import load_config
from reme_service.errors import ReMeError, RequestValidationError, error_envelope
from reme_service.file_roots import FileRoots
from reme_service.flow.context import FlowResponse, Key
from reme_service.flow.expression import parse_flow
from reme_service.flow.op import AnyOp, Node, Op, OpParams, Sequential
from reme_service.flow.registry import Registry
from reme_service.flow.runner import FlowRunner
from reme_service.ops import ALL_OPS, OP_ITEM_SCHEMAS
from reme_service.ops.common.context import ServiceContext, ServiceContextFactory
from reme_service.providers.factory import create_embedder, create_llm
from reme_service.providers.llm.base import LLMClient
from reme_service.schema.requests import FlowRequest, build_request_model
from reme_service.services import Services
from reme_service.storage.factory import build_store

DEFAULTS = ("vector_store.default.backend=memory", "embedding_model.default.backend=hash")
"""The overrides `op_services` starts from: an in-memory store on the hash embedder (no files, no model)."""


@asynccontextmanager
async def op_services(
    data_dir: Path, *overrides: str, llm: LLMClient | None = None, env: Mapping[str, str] | None = None
) -> AsyncIterator[Services]:
    """The services ops use, started, for the length of the block (then closed). `data_dir` is the service's
    data folder (the working-memory root and the file roots live under it); `env` replaces the process
    environment for `${VAR}` and the providers' keys (empty by default, so nothing of the machine leaks in)."""
    environ = dict(env or {})
    config = load_config([f"data_dir={data_dir}", *DEFAULTS, *overrides], environ=environ)
    services = Services(config=config, file_roots=FileRoots.defaults(Path(config.data_dir)))
    for name, model in config.llm.items():
        services.llms[name] = llm if llm is not None and name == "default" else create_llm(name, model, environ)
    for name, embedding in config.embedding_model.items():
        services.embedders[name] = create_embedder(name, embedding, environ)
    for name, store in config.vector_store.items():
        services.stores[name] = build_store(
            store.backend,
            store.params,
            embedder=services.embedder(store.embedding_model),
            data_dir=Path(data_dir),
            max_memory_bytes=store.max_memory_bytes,
        )
    started: list[Any] = []
    try:
        for client in services.clients():
            await client.start()
            started.append(client)
        yield services
    finally:
        for client in reversed(started):
            await client.close()


@dataclass(frozen=True)
class OpRun:
    """What `run_op` leaves: the response the ops wrote and the request's context (its keys, as `context[key]`)."""

    response: FlowResponse
    context: ServiceContext


async def run_op(
    services: Services,
    ops: str | Node | None = None,
    *,
    flow: str = "op_under_test",
    context: Mapping[Key[Any], Any] | None = None,
    request_id: str = "test",
    **request: Any,
) -> OpRun:
    """Run `ops` (an op, a tree, or a flow expression such as `"BuildQueryOp() >> RecallVectorStoreOp()"`; left out,
    the ops of the configured `flow`) for one request made of the keyword fields (validated by the request model,
    see the module docstring), with the context keys of `context` written before the first op. A failing op raises
    as in a flow (`OpError` naming it)."""
    configured = services.config.flow.get(flow)
    if ops is None:
        if configured is None:
            raise ValueError(f"no ops given and no flow named {flow!r} configured")
        ops = configured.flow_content
    tree = parse_flow(ops, _registry(), flow_name=flow) if isinstance(ops, str) else ops
    given = dict(context or {})
    if given:
        tree = Sequential(_given_op(given), tree)
    if configured is not None:
        model: type[BaseModel] = build_request_model(flow, configured, OP_ITEM_SCHEMAS)
    else:
        model = _request_model(tree)
    made: list[ServiceContext] = []
    factory = ServiceContextFactory(services)

    def make_context(flow_name: str, rid: str, validated: BaseModel) -> ServiceContext:
        config = services.config
        scope = resolve_flow(TRUSTED, flow_name, configured, validated, config.default_workspace)
        made.append(factory(flow_name, rid, validated, scope, None))
        return made[-1]

    runner = FlowRunner(flow, tree, model, make_context)
    response = await runner.run(model.model_validate(request), request_id=request_id)
    return OpRun(response=response, context=made[0])


def _registry() -> Registry[type[AnyOp]]:
    return Registry("op", ((op.name, op) for op in ALL_OPS))


def _request_model(tree: Node) -> type[BaseModel]:
    """A request model declaring every field the ops read, each optional with the op's default."""
    fields: dict[str, Any] = {}
    for op in tree.ops():
        for spec in (*op.inputs, *op.may_input):
            if spec.name not in FlowRequest.model_fields:
                fields.setdefault(spec.name, (spec.type | None, None))
    return create_model("OpUnderTestRequest", __base__=FlowRequest, **fields)


def _given_op(values: dict[Key[Any], Any]) -> AnyOp:
    """An op writing `values` (the keys a test gives the op under test, as an earlier op would have)."""

    class GivenContextOp(Op[OpParams, ServiceContext]):
        writes: ClassVar[tuple[Key[Any], ...]] = tuple(values)

        async def run(self, ctx: ServiceContext) -> None:
            for key, value in values.items():
                ctx[key] = value

    return GivenContextOp()


async def run_flow(services: Services, flow: str, **request: Any) -> dict[str, Any]:
    """The configured `flow` for one request, answered as `ReMeApp.async_execute` answers: the response as JSON-ready
    data, or the error envelope (`errors.error_envelope`) when the request is invalid or an op fails."""
    try:
        done = await run_op(services, flow=flow, **request)
    except ValidationError as exc:
        invalid = RequestValidationError("request validation failed", details={"errors": exc.errors(include_url=False)})
        return error_envelope(invalid, "test")
    except ReMeError as error:
        return error_envelope(error, "test")
    return done.response.model_dump(mode="json")


class FlowCaller(Protocol):
    """What calls flows by name: `ReMeApp`, and `Flows` (the flows alone, on `op_services`)."""

    async def async_execute(self, name: str, **fields: Any) -> dict[str, Any]: ...


@dataclass(frozen=True)
class Flows:
    """The configured flows on `services`, called as on the app (`await flows.async_execute(name=..., ...)`), for
    tests written against `ReMeApp` that need none of its front-end parts (jobs, audit, events, keys, history)."""

    services: Services

    async def async_execute(self, name: str, **fields: Any) -> dict[str, Any]:
        return await run_flow(self.services, name, **fields)
