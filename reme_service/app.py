"""`ReMeApp`: owns the config, providers, stores and flows; an async context manager.

```python
async with ReMeApp("vector_store.default.backend=memory") as app:
    result = await app.async_execute(name="retrieve_task_memory", workspace_id="ws", query="...")
```
`async_execute` validates exactly as the HTTP endpoint does and returns the same JSON-ready dict.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from reme_service.audit.recorder import AuditRecorder
from reme_service.audit.trail import AuditTrail
from reme_service.auth.access import Access
from reme_service.auth.caller import Caller, caller_now
from reme_service.auth.policy import RequestScope, resolve_flow
from reme_service.auth.shares import FairLane, KeyShares
from reme_service.concurrency import holds_many, off_loop_if
from reme_service.config.loader import load_config, read_env
from reme_service.config.models import AppConfig
from reme_service.errors import ConfigError, NotFoundError, ReMeError, RequestValidationError, error_envelope
from reme_service.events.bus import EventBus
from reme_service.file_roots import FileRoots
from reme_service.flow.context import FlowResponse
from reme_service.flow.expression import parse_flow
from reme_service.flow.op import AnyOp
from reme_service.flow.registry import Registry
from reme_service.flow.runner import FlowRunner
from reme_service.jobs.flow_jobs import FlowJobs
from reme_service.json_pieces import model_json_ready
from reme_service.loop_thread import LoopThread
from reme_service.observe.metrics import Metrics
from reme_service.observe.request_info import current_request
from reme_service.ops import ALL_OPS, OP_ITEM_SCHEMAS
from reme_service.ops.common.context import ServiceContext, ServiceContextFactory
from reme_service.ops.common.op import ServiceOp
from reme_service.ops.reme_names import OP_ALIASES, reme_flow_content
from reme_service.providers.factory import create_embedder, create_llm
from reme_service.providers.llm.base import LLMClient
from reme_service.providers.metered import MeteredEmbedder, MeteredLLM
from reme_service.schema.requests import build_request_model
from reme_service.services import Services
from reme_service.state.layer import StateLayer
from reme_service.storage.factory import build_store, parse_store_params
from reme_service.version import __version__

KEY_USE_FLUSH_SECONDS = 5.0

logger = logging.getLogger("reme_service")


def build_op_registry(ops: tuple[type[AnyOp], ...] = ALL_OPS) -> Registry[type[AnyOp]]:
    """Every op by its name, and by the names ReMe's configs use for some of them (`ops/reme_names.py`)."""
    return Registry("op", [*((op.name, op) for op in ops), *OP_ALIASES.items()])


class ReMeApp:
    """The service in one object. Positional args are `key=value` strings, exactly like the CLI."""

    def __init__(
        self,
        *args: str,
        config: AppConfig | None = None,
        config_path: str | None = None,
        llm_api_key: str | None = None,
        llm_api_base: str | None = None,
        embedding_api_key: str | None = None,
        embedding_api_base: str | None = None,
        env: Mapping[str, str] | None = None,
        llm_clients: Mapping[str, LLMClient] | None = None,
    ) -> None:
        all_args = ([f"config={config_path}"] if config_path else []) + list(args)
        base_env = dict(env) if env is not None else read_env()
        self.config = config if config is not None else load_config(all_args, environ=base_env)
        for key, value in {
            "FLOW_LLM_API_KEY": llm_api_key,
            "FLOW_LLM_BASE_URL": llm_api_base,
            "FLOW_EMBEDDING_API_KEY": embedding_api_key,
            "FLOW_EMBEDDING_BASE_URL": embedding_api_base,
        }.items():
            if value:
                base_env[key] = value
        self.env = base_env
        # Ready-made LLM clients that replace the configured ones of the same name (an in-process test double,
        # or a client an embedding application already owns). The app starts and closes them like its own.
        self._llm_clients = dict(llm_clients or {})
        self.data_dir = Path(self.config.data_dir).expanduser().resolve()
        if self.config.file_roots:
            self.file_roots = FileRoots.configured(self.config.file_roots)
        else:
            self.file_roots = FileRoots.defaults(self.data_dir)
        self.op_registry = build_op_registry()
        self.flows = self._build_flows()
        for store_cfg in self.config.vector_store.values():  # bad store parameters fail here, before serving
            parse_store_params(store_cfg.backend, store_cfg.params, self.env)
        # API keys: read now, so a broken key file or an exposed service without keys stops before serving
        # keys, audit, history and jobs: files under data_dir, or PostgreSQL shared by every node (`state/`)
        self.state = StateLayer.build(self.config, self.data_dir)
        self.access = Access.open(
            self.config.auth,
            self.data_dir,
            host=self.listen_host(),
            keyring=self.state.keyring,
            limiter=self.state.limiter(self.config.auth),
        )
        self.audit_log = self.state.audit_log
        self.history = self.state.history
        #: what each key holds at once, in this process (the HTTP edge's per-key shares, `auth/shares.py`)
        self.shares = KeyShares(self.config.auth.per_key, retry_after=self.config.http.retry_after)
        self.metrics = Metrics()
        self.events = EventBus(self.config.events, self.data_dir / "events")
        self.audit = AuditRecorder(
            self.config.flow,
            default_workspace=self.config.default_workspace,
            events=self.events,
            history=self.history,
            log=self.audit_log,
            together=self.state.journal,  # history and audit in one PostgreSQL: one commit a request
        )
        self.jobs = FlowJobs(
            self.config.jobs,
            self.state.jobs,
            self.flows,
            self.run_validated,
            self.events,
            stands=self.access.still_valid,  # a job runs with the rights its key has now (revoked: cancelled)
            recheck_seconds=self.access.recheck_seconds,
        )
        self.services: Services | None = None
        self._context_factory: ServiceContextFactory | None = None
        self._started = False
        self._flusher: asyncio.Task[None] | None = None
        self._sync_loop: LoopThread | None = None  # set inside a synchronous `with` block

    def listen_host(self) -> str | None:
        """The host the configured front end listens on; None for MCP over stdio (local, trusted)."""
        if self.config.backend == "mcp":
            return None if self.config.mcp.transport == "stdio" else self.config.mcp.host
        return self.config.http.host

    # -- flows ----------------------------------------------------------------------------------------

    def _enabled(self, name: str) -> bool:
        if self.config.enabled_flows:
            return name in self.config.enabled_flows
        return name not in self.config.disabled_flows

    def _build_flows(self) -> dict[str, FlowRunner[ServiceContext]]:
        flows: dict[str, FlowRunner[ServiceContext]] = {}
        for name, flow_cfg in self.config.flow.items():
            if not self._enabled(name):
                continue
            content = flow_cfg.flow_content
            if (merged := reme_flow_content(content)) is not None:
                logger.info("flow %r: ReMe's %r is %r in this service", name, content, merged)
                content = merged
            tree = parse_flow(content, self.op_registry, flow_name=name)
            for op in tree.ops():
                for param, why in op.params.ignored_set().items():
                    logger.warning("flow %r: %s parameter %r is ignored (%s)", name, op.name, param, why)
            try:
                model = build_request_model(name, flow_cfg, OP_ITEM_SCHEMAS)
            except ValueError as exc:
                raise ConfigError(f"flow '{name}': {exc}") from None
            flows[name] = FlowRunner(name, tree, model, self._make_context, description=flow_cfg.description)
        return flows

    def _make_context(self, flow_name: str, request_id: str, request: BaseModel) -> ServiceContext:
        """The context of a flow run directly (`FlowRunner.run` without one): its scope resolved here."""
        runner = self.runner(flow_name)
        return self._context(runner, request, request_id, self.request_scope(runner, request), None)

    def _context(
        self,
        runner: FlowRunner[ServiceContext],
        request: BaseModel,
        request_id: str,
        scope: RequestScope,
        trail: AuditTrail | None,
    ) -> ServiceContext:
        if self._context_factory is None:
            raise RuntimeError("ReMeApp is not started: use `async with ReMeApp(...)` or `await app.start()`")
        return self._context_factory(runner.name, request_id, request, scope, trail)

    def request_scope(
        self, runner: FlowRunner[ServiceContext], request: BaseModel, caller: Caller | None = None
    ) -> RequestScope:
        """The request's `RequestScope`, checked (`auth.policy.resolve_flow`: 400, 403), for `caller` (default: the
        request's, `auth.caller.caller_now`)."""
        caller = caller if caller is not None else caller_now()
        flow = self.config.flow.get(runner.name)
        return resolve_flow(caller, runner.name, flow, request, self.config.default_workspace)

    def _check_prompts(self, services: Services) -> None:
        seen: set[type[AnyOp]] = set()
        for runner in self.flows.values():
            for op in runner.tree.ops():
                if isinstance(op, ServiceOp) and op.prompts and type(op) not in seen:
                    seen.add(type(op))
                    services.prompts.check(op.prompt_file, op.prompts)

    # -- lifecycle ------------------------------------------------------------------------------------

    async def start(self) -> None:
        if self._started:
            return
        cfg = self.config
        data_dir = self.data_dir
        # client regexes share the lane's threads fairly between keys (`auth/shares.py`)
        lane = FairLane("reme-regex", 2, cfg.auth.per_key, retry_after=cfg.http.retry_after)
        services = Services(
            config=cfg,
            file_roots=self.file_roots,
            history=self.history,
            regex_lane=lane,
            erase_jobs=self.jobs.queue.erase_workspace,
            working=self.state.working,
        )
        self._check_prompts(services)
        # every client the app builds is wrapped from the outside: LLMs and embedders metered
        # (`providers/metered.py`), stores metered, size-bounded and audited (`storage/guarded.py`)
        for name, llm_cfg in cfg.llm.items():
            llm = self._llm_clients.get(name) or create_llm(name, llm_cfg, self.env)
            services.llms[name] = MeteredLLM(llm, self.metrics.meter("llm", name))
        for name, emb_cfg in cfg.embedding_model.items():
            embedder = create_embedder(name, emb_cfg, self.env)
            services.embedders[name] = MeteredEmbedder(embedder, self.metrics.meter("embedding", name))
        for name, store_cfg in cfg.vector_store.items():
            store_embedder = services.embedders.get(store_cfg.embedding_model)
            if store_embedder is None:
                raise ConfigError(
                    f"vector_store.{name}.embedding_model: no embedding_model named {store_cfg.embedding_model!r}"
                )
            store = build_store(
                store_cfg.backend,
                store_cfg.params,
                embedder=store_embedder,
                data_dir=data_dir,
                meter=self.metrics.meter("store", name),
                max_memory_bytes=store_cfg.max_memory_bytes,
                env=self.env,
            ).joining(self.state.journal)  # the state in a pgvector store's database: one transaction
            services.stores[name] = store
            self.metrics.track_resident(name, store.resident_workspaces)
        await asyncio.to_thread(self.file_roots.prepare)
        for client in services.clients():
            await client.start()
        self.services = services
        self._context_factory = ServiceContextFactory(services)
        self._flusher = asyncio.create_task(self._flush_key_use(), name="reme-key-use")
        self._started = True
        self.events.start()
        await self.state.start(self.events)
        await self.jobs.queue.start()  # queued jobs run again now that the flows can
        logger.info(
            "started: %d flows, llm=%s, embedding=%s, store=%s",
            len(self.flows),
            services.llm().backend,
            services.embedders["default"].backend if "default" in services.embedders else "-",
            services.store().backend if "default" in services.stores else "-",
        )

    async def stop(self) -> None:
        if not self._started or self.services is None:
            return
        services = self.services
        await self.jobs.queue.stop()  # a running job stays `running` on disk: it runs again at the next start
        await self.events.stop()
        if self._flusher is not None:
            self._flusher.cancel()
            await asyncio.gather(self._flusher, return_exceptions=True)
            self._flusher = None
        await asyncio.to_thread(self.access.keyring.flush)
        await self.state.stop()
        for client in reversed(services.clients()):
            try:
                await client.close()
            except Exception:  # noqa: BLE001 - closing must reach every client
                logger.exception("error while closing %s", type(client).__name__)
        self._started = False
        self.services = None
        self._context_factory = None

    async def _flush_key_use(self) -> None:
        """Record every few seconds when each API key was last used (`reme keys list` shows it)."""
        while True:
            await asyncio.sleep(KEY_USE_FLUSH_SECONDS)
            await asyncio.to_thread(self.access.keyring.flush)

    async def __aenter__(self) -> ReMeApp:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    def __enter__(self) -> ReMeApp:
        """`with ReMeApp(...) as app: app.execute(...)`, ReMe's synchronous use: the app runs on an event loop of
        its own thread until the block ends, so every `execute` in the block shares it (and a memory store's
        contents). Not for code that already runs in an event loop: use `async with` there."""
        loop = LoopThread("reme-app")
        try:
            loop.run(self.start())
        except BaseException:
            loop.close()
            raise
        self._sync_loop = loop
        return self

    def __exit__(self, *exc: object) -> None:
        loop, self._sync_loop = self._sync_loop, None
        if loop is not None:
            try:
                loop.run(self.stop())
            finally:
                loop.close()

    # -- execution ------------------------------------------------------------------------------------

    def runner(self, name: str) -> FlowRunner[ServiceContext]:
        try:
            return self.flows[name]
        except KeyError:
            raise NotFoundError(f"unknown flow {name!r}; available: {', '.join(sorted(self.flows))}") from None

    async def run_validated(
        self,
        runner: FlowRunner[ServiceContext],
        request: BaseModel,
        request_id: str,
        *,
        offload: bool = False,
        progress: Callable[[int, int | None], None] | None = None,
    ) -> tuple[int, dict[str, Any]]:
        """Run an already-validated request; returns (HTTP status, body). Failures come back as the envelope.
        `progress` hears a long op's rows done and total (`ServiceContext.progress`; a job's `GET /jobs/{id}`).

        The response is dumped in a worker thread with `offload` (a large request, so likely a large answer) and
        when it holds many items (`concurrency.holds_many`: a `list` of 100,000 memories from a small request)."""
        if self.services is None:
            raise RuntimeError("ReMeApp is not started: use `async with ReMeApp(...)` or `await app.start()`")
        caller = caller_now()
        trail = self.audit.new_trail(request_id, runner.name)
        self.audit.expect_flow(trail, runner.name, request, caller)
        tracked = self.audit.tracking
        if (info := current_request.get()) is not None:
            info.flow = runner.name
            info.workspace = getattr(request, "workspace_id", "") or self.config.default_workspace
        started = time.perf_counter()
        try:
            scope = self.request_scope(runner, request, caller)
            context = self._context(runner, request, request_id, scope, trail if tracked else None)
            context.progress = progress
            response = await runner.run(request, request_id=request_id, context=context)
        except ReMeError as error:
            if error.status >= 500:  # the client gets the message; the operator should see it too
                logger.warning("[%s] %s answered %d: %s", request_id, runner.name, error.status, error.message)
            self.metrics.flow_run(runner.name, error.status, time.perf_counter() - started)
            await self.audit.flow_done(runner.name, request, request_id, trail, error.code, caller)
            return error.status, error_envelope(error, request_id)
        self.metrics.flow_run(runner.name, 200, time.perf_counter() - started)
        try:
            await self.audit.flow_done(runner.name, request, request_id, trail, None, caller)
        except ReMeError as error:  # its changes are made, but not their history or audit record: not a success
            logger.warning("[%s] %s: its history or audit record failed: %s", request_id, runner.name, error.message)
            return error.status, error_envelope(error, request_id)
        large = offload or holds_many(response.answer, response.metadata)
        held = [response]  # the last reference: a large model is dumped, and freed, in the worker thread
        del response
        return 200, await off_loop_if(large, _dump_releasing, held, large)

    async def async_execute(self, name: str, **fields: Any) -> dict[str, Any]:
        """Run flow `name` with these request fields; returns the response dict (errors included)."""
        request_id = uuid.uuid4().hex[:16]
        try:
            runner = self.runner(name)
            request = runner.request_model.model_validate(fields)
        except NotFoundError as error:
            return error_envelope(error, request_id)
        except ValidationError as exc:
            invalid = RequestValidationError(
                "request validation failed", details={"errors": exc.errors(include_url=False)}
            )
            return error_envelope(invalid, request_id)
        return (await self.run_validated(runner, request, request_id))[1]

    def execute(self, name: str, **fields: Any) -> dict[str, Any]:
        """Synchronous wrapper for scripts; not usable inside a running event loop. Inside `with ReMeApp(...)` it
        runs on the block's app; otherwise the app is started and stopped around the call."""
        if self._sync_loop is not None:
            return self._sync_loop.run(self.async_execute(name, **fields))
        return asyncio.run(self._execute_once(name, fields))

    async def _execute_once(self, name: str, fields: dict[str, Any]) -> dict[str, Any]:
        started_here = not self._started
        if started_here:
            await self.start()
        try:
            return await self.async_execute(name, **fields)
        finally:
            if started_here:
                await self.stop()

    async def health(self) -> dict[str, Any]:
        """Every client's status. `healthy`; `degraded` when only an LLM is unreachable (retrieval and storage
        work); `down` when a store or an embedding model is (nothing works); `stopped` before start."""
        if self.services is None:
            return {"status": "stopped", "version": __version__}
        parts: dict[str, Any] = {}
        for kind, clients in (
            ("llm", self.services.llms),
            ("embedding_model", self.services.embedders),
            ("vector_store", self.services.stores),
        ):
            parts[kind] = {name: await client.health() for name, client in clients.items()}
        if self.state.shared:  # keys, audit, history and jobs in PostgreSQL: nothing is served without it
            parts["state"] = {"postgres": await self.state.health()}
        failing = ("down", "unreachable")
        essential_down = any(
            info.get("status") in failing
            for kind in ("embedding_model", "vector_store", "state")
            for info in parts.get(kind, {}).values()
        )
        llm_down = any(info.get("status") in failing for info in parts["llm"].values())
        status = "down" if essential_down else "degraded" if llm_down else "healthy"
        return {"status": status, "version": __version__, **parts, "flows": sorted(self.flows)}


def _dump_releasing(held: list[FlowResponse], large: bool = True) -> dict[str, Any]:
    """Dump the one response in `held` and drop it here: freeing a model of 100,000 messages takes tens of
    milliseconds, which should not be spent on the event loop (`run_validated` calls this inline for a small one).
    A `large` one is dumped in pieces (`json_pieces`), so that this worker thread lets the event loop run."""
    response = held.pop()
    return model_json_ready(response) if large else response.model_dump(mode="json")
