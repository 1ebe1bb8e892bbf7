"""The context every service op runs with: the engine's `FlowContext` plus the app's services, the request's
workspace (validated) and the prompt language."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from pydantic import BaseModel

from reme_service.audit.trail import AuditTrail
from reme_service.auth.caller import ALL_WORKSPACES, Caller
from reme_service.auth.policy import RequestScope
from reme_service.file_roots import FileRoots
from reme_service.flow.context import FlowContext
from reme_service.schema.memory import BaseMemory
from reme_service.schema.workspace_ids import WorkspaceId
from reme_service.services import Services
from reme_service.state.interfaces import WorkingFiles
from reme_service.storage.guarded import GuardedStore
from reme_service.storage.writer import Writer


class ServiceContext(FlowContext):
    """One request's context for the memory ops. `scope` is the request's resolved `auth.policy.RequestScope`: its
    caller, its workspace (validated; empty in the request means the configured `default_workspace`) and the scope
    it needs, as the app resolved them when the request entered. `language` is the prompt language (`""` = English,
    `"zh"`); `trail` the request's audit trail (None when nothing is tracked)."""

    def __init__(
        self,
        *,
        flow_name: str,
        request_id: str,
        request: BaseModel,
        services: Services,
        scope: RequestScope,
        language: str = "",
        trail: AuditTrail | None = None,
    ) -> None:
        super().__init__(flow_name=flow_name, request_id=request_id, request=request)
        self.services = services
        self.scope = scope
        self.language = language
        self.trail = trail
        #: who this request's store writes are recorded for (None: not recorded)
        self.writer = Writer(trail, scope.caller.key_id) if trail is not None else None
        #: where a long op reports how far it is, `(done, total)` rows (None: nobody asked; a job sets it)
        self.progress: Callable[[int, int | None], None] | None = None
        # memory object id -> (the memory, its fields when dumped, the dump): `publish_memories`' reuse
        self._dumps: dict[int, tuple[BaseMemory, dict[str, Any], dict[str, Any]]] = {}

    @property
    def workspace_id(self) -> WorkspaceId:
        return self.scope.workspace_id

    @property
    def caller(self) -> Caller:
        return self.scope.caller

    def store(self, name: str = "default") -> GuardedStore:
        """The store named `name`, bound to this request: its writes are recorded to the request's audit trail."""
        return self.services.store(name).bound(self.writer)

    @property
    def working_files(self) -> WorkingFiles:
        """The working-memory files this request reaches (`state.interfaces.WorkingFiles`; their methods block):
        the whole root for a trusted caller (no API keys, stdio, the Python API); for a caller with a key, the
        workspace's own folder under it (`workspaces/<workspace id>`), so a key reaches no other workspace's
        files."""
        return self.services.working_store().files(None if self.caller.key_id is None else self.workspace_id)

    @property
    def library_roots(self) -> FileRoots:
        """Where this request's `vector_store` `dump` and `load` may go: the configured roots for a trusted caller
        and for a key of every workspace (`*`, an operator's: it may read and write them all anyway, and loads the
        libraries an operator put in the root); for any other key, each writable root narrowed to the workspace's
        own folder (`FileRoots.for_workspace`), so it reaches no other workspace's library files."""
        roots = self.services.file_roots
        if self.caller.key_id is None or ALL_WORKSPACES in self.caller.workspaces:
            return roots
        return roots.for_workspace(self.workspace_id)

    def publish_memories(self, memories: Sequence[BaseMemory]) -> None:
        """`response.metadata["memory_list"]`: the memories' JSON dumps. A retrieval flow publishes the same memories
        after each step (recall, rerank, rewrite); a memory already dumped by this request, whose fields are still
        the same objects, is not dumped again (a field assigned since is; replace nested values, do not edit them in
        place after publishing)."""
        dumps = self._dumps
        published: list[dict[str, Any]] = []
        for memory in memories:
            known = dumps.get(id(memory))
            if known is not None and known[0] is memory and known[1] == memory.__dict__:
                published.append(known[2])
                continue
            dump = memory.model_dump(mode="json")
            dumps[id(memory)] = (memory, dict(memory.__dict__), dump)
            published.append(dump)
        self.response.metadata["memory_list"] = published

    def without_llm(self, op_name: str) -> None:
        """Record in `metadata.no_llm_ops` that an op ran its deterministic no-LLM path."""
        self.note("no_llm_ops", op_name)


class ServiceContextFactory:
    """Builds a `ServiceContext` per request from its `RequestScope`, resolved and checked before
    (`auth.policy.resolve_flow`, by `ReMeApp`): the context only carries it."""

    def __init__(self, services: Services) -> None:
        self._services = services

    def __call__(
        self, flow_name: str, request_id: str, request: BaseModel, scope: RequestScope, trail: AuditTrail | None
    ) -> ServiceContext:
        return ServiceContext(
            flow_name=flow_name,
            request_id=request_id,
            request=request,
            services=self._services,
            scope=scope,
            language=self._services.config.language,
            trail=trail,
        )
