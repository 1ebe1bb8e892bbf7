"""What ops may use: config, LLM and embedding clients, stores, prompts, file roots and the working-memory files —
owned by the app."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Protocol

from reme_service.concurrency import ThreadLane
from reme_service.config.models import AppConfig
from reme_service.errors import ConfigError
from reme_service.file_roots import FileRoots
from reme_service.prompts.loader import PromptLibrary
from reme_service.providers.embedding.base import EmbeddingClient
from reme_service.providers.llm.base import LLMClient
from reme_service.state.interfaces import HistoryStore, WorkingStore
from reme_service.state.working_folder import WorkingFolders
from reme_service.storage.guarded import GuardedStore


class ManagedClient(Protocol):
    """What the app starts and closes: every LLM, embedding and store client."""

    async def start(self) -> None: ...

    async def close(self) -> None: ...


@dataclass
class Services:
    config: AppConfig
    file_roots: FileRoots  # where vector_store dump/load may read and write (`file_roots.py`)
    history: HistoryStore | None = None  # every memory's history (`history/`); None when `history.enabled` is off
    #: strips a deleted workspace's background jobs of their requests and results, returns how many (the app's
    #: `jobs.queue.JobQueue.erase_workspace`; None where there are no jobs)
    erase_jobs: Callable[[str], Awaitable[int]] | None = None
    llms: dict[str, LLMClient] = field(default_factory=dict)
    embedders: dict[str, EmbeddingClient] = field(default_factory=dict)
    stores: dict[str, GuardedStore] = field(default_factory=dict)
    prompts: PromptLibrary = field(default_factory=PromptLibrary)
    #: client regexes (grep over working memory) run here, never in the default executor
    regex_lane: ThreadLane = field(default_factory=lambda: ThreadLane("reme-regex", 2))
    #: where working-memory files live (`state.layer.StateLayer.working`); None: folders under the configured
    #: `working_memory_root` (the files backend)
    working: WorkingStore | None = None

    def working_store(self) -> WorkingStore:
        """The working-memory files' store (`working`, or the folders under `config.working_memory_root`)."""
        if self.working is None:
            self.working = WorkingFolders(self.config.working_memory_root)
        return self.working

    def clients(self) -> list[ManagedClient]:
        """Every client, in start order: LLMs, embedders, the stores that use the embedders, then the regex lane."""
        return [*self.llms.values(), *self.embedders.values(), *self.stores.values(), self.regex_lane]

    def llm(self, name: str = "default") -> LLMClient:
        try:
            return self.llms[name]
        except KeyError:
            raise ConfigError(f"no llm named {name!r}; configured: {', '.join(self.llms)}") from None

    def embedder(self, name: str = "default") -> EmbeddingClient:
        try:
            return self.embedders[name]
        except KeyError:
            raise ConfigError(f"no embedding_model named {name!r}; configured: {', '.join(self.embedders)}") from None

    def store_embedder(self, store: str = "default") -> EmbeddingClient:
        """The embedder whose vectors the store named `store` holds (its `embedding_model`)."""
        try:
            config = self.config.vector_store[store]
        except KeyError:
            raise ConfigError(f"no vector_store named {store!r}; configured: {', '.join(self.stores)}") from None
        return self.embedder(config.embedding_model)

    def store(self, name: str = "default") -> GuardedStore:
        """The store named `name`, unbound: its writes are recorded for nobody (a request's ops use
        `ServiceContext.store`, bound to the request)."""
        try:
            return self.stores[name]
        except KeyError:
            raise ConfigError(f"no vector_store named {name!r}; configured: {', '.join(self.stores)}") from None
