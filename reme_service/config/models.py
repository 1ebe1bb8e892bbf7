"""Typed configuration: the whole service is described by one `AppConfig`, validated once at start-up.

Every model forbids unknown keys, so a misspelt key fails the start with its name and the valid ones.
"""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, SecretStr, field_validator, model_validator


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


LOG_LEVELS = ("critical", "error", "warning", "info", "debug", "trace")

#: the fields every flow's request has besides its `input_schema` (`schema/requests.FlowRequest`; a test keeps the two
#: equal): an `optional_with` may name one of them
BASE_REQUEST_FIELDS = ("workspace_id", "query", "messages", "metadata")


class HttpConfig(_Strict):
    """The HTTP edge: what a client may hold open, send and ask at once (see `reme_service/server/guard.py` and
    `protocol.py`). Every limit answers in the error envelope."""

    host: str = "127.0.0.1"
    port: int = Field(default=8002, ge=0, le=65535)
    timeout_keep_alive: float = Field(default=5.0, gt=0, description="seconds an idle keep-alive connection stays open")
    header_timeout: float = Field(
        default=10.0, gt=0, description="seconds a connection has to send a complete request head, else it is closed"
    )
    body_timeout: float = Field(default=30.0, gt=0, description="seconds a request body may stall before a 408")
    body_min_rate: float | None = Field(
        default=8192.0,
        gt=0,
        description="bytes/s a request body must average after its first body_timeout seconds, else 408 (null: none); "
        "8 KiB/s evicts the ~1.2 KB/s trickles of a slow-body attack and still admits a 64 kbit/s client",
    )
    max_header_bytes: int = Field(default=64 * 1024, ge=1024, description="a larger request head gets 431")
    max_body_bytes: int = Field(default=32 * 1024 * 1024, ge=0, description="a larger request body gets 413")
    body_budget_bytes: int = Field(
        default=128 * 1024 * 1024,
        ge=0,
        description="request-body bytes buffered at once over every connection; past it a body gets 503",
    )
    offload_bytes: int = Field(
        default=256 * 1024, ge=0, description="a larger request body is parsed, validated and answered off the loop"
    )
    limit_concurrency: int | None = Field(
        default=256, ge=1, description="requests processed at once (idle connections do not count); beyond: 503"
    )
    max_connections: int | None = Field(
        default=1000, ge=1, description="open connections; past it the longest-idle one is closed for a new one"
    )
    retry_after: int = Field(default=1, ge=0, description="the Retry-After seconds sent with an overload 503")
    shutdown_timeout: float = Field(
        default=30.0, ge=0, description="on SIGTERM, seconds in-flight requests get to finish before they are cancelled"
    )
    workers: int = Field(
        default=1,
        ge=1,
        le=64,
        description="service processes sharing the port; more than 1 needs a shared store (pgvector, a Chroma "
        "server, Elasticsearch)",
    )
    cors_origins: list[str] = Field(
        default_factory=list,
        description="CORS is off unless origins are listed; a browser request from any other origin than the "
        "service's own is refused with 403 cross_origin (server/origin_guard.py)",
    )
    allowed_hosts: list[str] = Field(
        default_factory=list,
        description="more Host headers a service on loopback answers ('name', 'name:port' or 'name:*'), besides "
        "127.0.0.1, localhost, [::1] and 0.0.0.0 on any port; any other is 421 (DNS-rebinding protection). "
        "Shared with MCP's transports",
    )
    access_log: bool = False

    @field_validator("allowed_hosts")
    @classmethod
    def _host_patterns(cls, hosts: list[str]) -> list[str]:
        for host in hosts:
            if not host.strip() or "/" in host or any(c.isspace() for c in host.strip()):
                raise ValueError(f"{host!r} is not a host ('name', 'name:port' or 'name:*'; no scheme, no path)")
        return [host.strip().lower() for host in hosts]


class McpConfig(_Strict):
    """MCP beside HTTP (`mount`: the tools at `/mcp` and `/sse` of the HTTP port, one process owning the store), or
    alone with `backend=mcp` (stdio for hosts that spawn the server; sse / streamable-http on `host`:`port`)."""

    mount: bool = Field(default=True, description="serve MCP at /mcp (streamable HTTP) and /sse on the HTTP port")
    transport: Literal["stdio", "sse", "streamable-http", "http"] = "sse"
    host: str = "127.0.0.1"
    port: int = Field(default=8002, ge=0, le=65535)
    allowed_hosts: list[str] = Field(
        default_factory=list,
        description="more Host headers a loopback MCP server accepts (DNS-rebinding protection), e.g. 'myhost:*', "
        "besides http.allowed_hosts",
    )


class LLMConfig(_Strict):
    """`backend: auto` means `openai_compatible` when FLOW_LLM_API_KEY or FLOW_LLM_BASE_URL is set, else `none`."""

    backend: Literal["auto", "openai_compatible", "none"] = "auto"
    model_name: str = "qwen3-30b-a3b-instruct-2507"
    api_key: SecretStr | None = None
    base_url: str | None = None
    params: dict[str, Any] = Field(default_factory=dict, description="sent verbatim with each request")
    max_retries: int = Field(default=3, ge=0)
    timeout: float = Field(default=60.0, gt=0)


class EmbeddingConfig(_Strict):
    """`backend: auto` means `openai_compatible` when FLOW_EMBEDDING_API_KEY or FLOW_EMBEDDING_BASE_URL is set,
    else the offline `local` MiniLM model."""

    backend: Literal["auto", "openai_compatible", "local", "hash"] = "auto"
    model_name: str = ""
    api_key: SecretStr | None = None
    base_url: str | None = None
    params: dict[str, Any] = Field(default_factory=dict)


class VectorStoreConfig(_Strict):
    backend: str = "local"
    embedding_model: str = "default"
    params: dict[str, Any] = Field(default_factory=dict)
    max_memory_bytes: int | None = Field(
        default=1 << 20,  # storage.bounds.DEFAULT_MAX_MEMORY_BYTES (1 MiB)
        ge=1,
        description="the largest memory a write may hold (id, when_to_use and the rest as JSON); a write with a "
        "larger one is refused whole with 413 (storage/bounds.py); null = no limit",
    )


class InputField(_Strict):
    """One declared request field of a flow (ReMe's `input_schema` entry, plus the constraints we enforce)."""

    type: Literal["string", "integer", "number", "boolean", "array", "object", "any"] = "string"
    description: str = ""
    required: bool = False
    default: Any = None
    enum: list[Any] | None = None
    items: str | None = Field(default=None, description="named item schema for arrays, e.g. Trajectory")
    minimum: float | None = None
    maximum: float | None = None
    exclusive_minimum: float | None = None
    min_items: int | None = None
    max_length: int | None = Field(
        default=None, description="the longest string the op accepts (it refuses a longer one): stated in the OpenAPI"
    )
    workspace: bool = Field(
        default=False, description="the value names another workspace (e.g. copy's source): a key must cover it too"
    )
    optional_with: str | None = Field(
        default=None,
        description="a required field that may be left out when this other field is sent non-empty (then: default)",
    )
    lax: bool = Field(
        default=False,
        description="an integer or number field that also takes a numeric string or a whole float ('5', 5.0): for "
        "fields an LLM fills in a tool call; every other scalar field takes its JSON type only",
    )

    @model_validator(mode="after")
    def _optional_with_needs_required(self) -> InputField:
        if self.optional_with and not self.required:
            raise ValueError("optional_with is for a required field")
        return self


class FlowConfig(_Strict):
    flow_content: str
    description: str = ""
    input_schema: dict[str, InputField] = Field(default_factory=dict)
    stream: bool = False
    access: Literal["read", "write"] = Field(
        default="write", description="what an API key needs to call the flow: read keys may only call read flows"
    )
    read_when: dict[str, list[str]] = Field(
        default_factory=dict, description="a write flow is a read when request field F is one of these values"
    )
    background: bool = Field(
        default=False, description='HTTP requests may ask to run it as a job ("async": true → 202 and a job id)'
    )
    job_when: dict[str, list[str]] = Field(
        default_factory=dict,
        description='a background flow\'s HTTP request is a job even without "async" when field F is one of these',
    )

    @model_validator(mode="after")
    def _jobs_need_background(self) -> FlowConfig:
        if self.job_when and not self.background:
            raise ValueError("job_when needs background: true")
        return self

    @model_validator(mode="after")
    def _optional_with_names_another_field(self) -> FlowConfig:
        fields = {*BASE_REQUEST_FIELDS, *self.input_schema}
        problems = [
            problem
            for name, spec in self.input_schema.items()
            if spec.optional_with and (problem := _optional_with_problem(name, spec.optional_with, fields))
        ]
        if problems:
            raise ValueError("; ".join(problems))
        return self


def _optional_with_problem(name: str, other: str, fields: Collection[str]) -> str | None:
    """Why input field `name` cannot be `optional_with: other` in a request of `fields`; None when it can."""
    if other == name:
        return f"input field {name!r} is optional_with itself; name another field of the flow's request"
    if other not in fields:
        valid = ", ".join(sorted(fields))
        return f"input field {name!r} is optional_with {other!r}, not a field of the flow's request (fields: {valid})"
    return None


class RateLimitConfig(_Strict):
    """A token bucket per API key: `requests_per_second` on average, bursts of up to `burst`. Off when null."""

    requests_per_second: float | None = Field(default=None, gt=0)
    burst: int = Field(default=20, ge=1)


class AuditConfig(_Strict):
    """One JSON line per request that changes memories or files (docs/security.md, "Audit log")."""

    enabled: bool = True
    dir: str = Field(default="", description="empty = <data_dir>/audit; one <UTC date>.jsonl file a day")


class HistoryConfig(_Strict):
    """The history of every memory: one append-only JSONL file per workspace (docs/history.md)."""

    enabled: bool = True
    dir: str = Field(default="", description="empty = <data_dir>/history")


class LifecycleSettings(_Strict):
    """How personal memories age (docs/personal_memory.md, "Time validity"); every setting is off by default."""

    ttl_seconds: float | None = Field(
        default=None, gt=0, description="new personal memories expire this long after they are recorded; null = never"
    )
    decay_half_life_days: float | None = Field(
        default=None, gt=0, description="retrieval halves a memory's score every this many days of age; null = off"
    )
    decay_floor: float = Field(
        default=0.5, ge=0, le=1, description="the decay multiplier never goes below this (decay ranks, never filters)"
    )


class LifecycleConfig(LifecycleSettings):
    workspaces: dict[str, LifecycleSettings] = Field(
        default_factory=dict, description="per workspace id: the settings it overrides (the others are inherited)"
    )

    def for_workspace(self, workspace_id: str) -> LifecycleSettings:
        """The settings of `workspace_id`: its own overrides over the service-wide ones."""
        base = self.model_dump(exclude={"workspaces"})
        own = self.workspaces.get(workspace_id)
        return LifecycleSettings(**{**base, **(own.model_dump(exclude_unset=True) if own else {})})


class PerKeyConfig(_Strict):
    """What one API key may hold at once (`auth/shares.py`); every keyless (loopback, open mode) client counts as
    one key. Past a bound the request is 429 `rate_limited` with Retry-After; the other keys keep theirs."""

    requests: int = Field(
        default=64, ge=1, description="requests under way, uploads included (of http.limit_concurrency)"
    )
    long_polls: int = Field(default=16, ge=1, description="GET /jobs/{id}?wait= long polls open at once")
    streams: int = Field(default=16, ge=1, description="MCP SSE streams open at once (GET /sse)")
    events: int = Field(default=16, ge=1, description="GET /events streams open at once (of events.max_streams)")
    regex: int = Field(default=1, ge=1, description="regex-lane threads (grep, time parsing) one key uses at once")
    regex_waiting: int = Field(default=16, ge=0, description="regex calls of one key waiting for its lane share")
    jobs: int = Field(default=256, ge=1, description="queued jobs (of jobs.max_queued)")


class AuthConfig(_Strict):
    """API keys (see docs/security.md). `auto`: keys are required when the service listens on anything but
    loopback, or as soon as the key file holds a key (a revoked one too: revoking the last key does not open the
    service again); `required`: always; `off`: never (a warning when not on loopback)."""

    mode: Literal["auto", "required", "off"] = "auto"
    keys_file: str = Field(default="", description="empty = <data_dir>/auth/keys.json; share one between processes")
    reload_seconds: float = Field(default=1.0, gt=0, le=60, description="how often the key file is checked")
    rate_limit: RateLimitConfig = Field(default_factory=RateLimitConfig)
    per_key: PerKeyConfig = Field(default_factory=PerKeyConfig)


class JobsConfig(_Strict):
    """Flows run in the background (`"async": true` on flows declared `background`): docs/jobs.md."""

    workers: int = Field(default=4, ge=1, le=256, description="jobs running at once, over all workspaces")
    per_workspace: int = Field(default=1, ge=1, description="jobs of one workspace running at once")
    max_queued: int = Field(default=10_000, ge=1, description="jobs waiting at most; past it a submission gets 503")
    max_queued_mb: float = Field(
        default=1024.0, gt=0, description="MiB of waiting jobs' files at most; past it a submission gets 503"
    )
    keep_hours: float = Field(
        default=24.0, gt=0, description="finished jobs, and the Idempotency-Key of every job, are kept this long"
    )
    max_finished: int = Field(
        default=1_000, ge=1, description="finished jobs kept at most; past it the oldest are deleted before keep_hours"
    )
    max_finished_mb: float = Field(
        default=1024.0, gt=0, description="MiB of finished jobs' files kept at most; past it the oldest are deleted"
    )
    dir: str = Field(default="", description="empty = <data_dir>/jobs")


class WebhookConfig(_Strict):
    """An endpoint that receives change events as signed POSTs (docs/events.md)."""

    url: str
    secret: SecretStr = Field(
        description="the signing secret: whsec_<base64 key> (Standard Webhooks), or any string (its bytes are the key)"
    )
    workspaces: list[str] = Field(default_factory=lambda: ["*"], description="the workspaces it hears of; * = all")
    events: list[Literal["ADD", "UPDATE", "DELETE", "INVALIDATE", "JOB"]] = Field(
        default_factory=list, description="the event types it wants; empty = all"
    )


class EventsConfig(_Strict):
    """Change events: `GET /events` (server-sent events) and webhooks (docs/events.md)."""

    enabled: bool = True
    webhooks: list[WebhookConfig] = Field(default_factory=list)
    max_attempts: int = Field(default=6, ge=1, le=20, description="tries of one delivery before it is failed")
    backoff_seconds: float = Field(default=1.0, ge=0, description="the first retry's wait; doubled each time")
    timeout: float = Field(default=10.0, gt=0, description="seconds one delivery attempt may take")
    queue_size: int = Field(default=10_000, ge=1, description="deliveries waiting per webhook; past it, dropped")
    subscriber_queue: int = Field(default=1_000, ge=1, description="events a slow /events reader may fall behind")
    max_streams: int = Field(
        default=100, ge=1, description="open GET /events streams at most; one more is a 503 (they take no request slot)"
    )


class StateConfig(_Strict):
    """Where keys, audit, history, jobs, events, rate limits and working-memory files live (docs/scaling.md).
    `files`: under data_dir, one machine; `postgres`: tables in PostgreSQL, shared by every node; `auto`: postgres
    when the default vector store is pgvector (its DSN), else files."""

    backend: Literal["auto", "files", "postgres"] = "auto"
    dsn: str = Field(default="", description="the PostgreSQL of the state; empty = the pgvector store's")
    table_prefix: str = Field(default="reme_state_", pattern=r"^[a-z_][a-z0-9_]{0,30}$")
    reload_seconds: float = Field(default=1.0, gt=0, le=2, description="polling fallback of key changes")


class AppConfig(_Strict):
    backend: Literal["http", "mcp"] = "http"
    language: Literal["", "en", "zh"] = ""
    log_level: str = Field(default="INFO", description="critical, error, warning, info, debug or trace")
    log_format: Literal["text", "json"] = Field(default="text", description="json: one JSON object per log line")
    data_dir: str = Field(
        default="./reme_data",
        description="where the local store, keys, audit log and working memory live; a relative path is resolved "
        "once, against the working directory the service starts in",
    )
    file_roots: list[str] = Field(
        default_factory=list,
        description="directories that dump/load paths may resolve into; empty = the working directory and data_dir",
    )
    default_workspace: str = Field(default="default", description="used when a request's workspace_id is empty")
    working_memory_dir: str = Field(
        default="",
        description="root of every working-memory file (request store_dir is relative to it); "
        "empty = <data_dir>/working_memory",
    )
    enabled_flows: list[str] = Field(default_factory=list)
    disabled_flows: list[str] = Field(default_factory=list)
    thread_pool_max_workers: int = 16
    http: HttpConfig = Field(default_factory=HttpConfig)
    mcp: McpConfig = Field(default_factory=McpConfig)
    auth: AuthConfig = Field(default_factory=AuthConfig)
    audit: AuditConfig = Field(default_factory=AuditConfig)
    jobs: JobsConfig = Field(default_factory=JobsConfig)
    events: EventsConfig = Field(default_factory=EventsConfig)
    history: HistoryConfig = Field(default_factory=HistoryConfig)
    state: StateConfig = Field(default_factory=StateConfig)
    lifecycle: LifecycleConfig = Field(default_factory=LifecycleConfig)
    llm: dict[str, LLMConfig] = Field(default_factory=lambda: {"default": LLMConfig()})
    embedding_model: dict[str, EmbeddingConfig] = Field(default_factory=lambda: {"default": EmbeddingConfig()})
    vector_store: dict[str, VectorStoreConfig] = Field(default_factory=lambda: {"default": VectorStoreConfig()})
    flow: dict[str, FlowConfig] = Field(default_factory=dict)
    metadata: dict[str, Any] = Field(default_factory=dict)

    _working_memory_root: Path = PrivateAttr(default_factory=Path)

    @field_validator("data_dir")
    @classmethod
    def _absolute_data_dir(cls, value: str) -> str:
        return str(Path(value).expanduser().resolve())

    @field_validator("log_level")
    @classmethod
    def _known_level(cls, value: str) -> str:
        if value.lower() not in LOG_LEVELS:
            raise ValueError(f"log_level {value!r} is not one of {', '.join(LOG_LEVELS)}")
        return value.upper()

    @model_validator(mode="after")
    def _resolve_working_memory_root(self) -> AppConfig:
        # Resolved once, when the config is built (relative paths against the working directory of that moment).
        self._set_working_memory_root()
        return self

    def _set_working_memory_root(self) -> None:
        folder = self.working_memory_dir or str(Path(self.data_dir) / "working_memory")
        self._working_memory_root = Path(folder).expanduser().resolve()

    @property
    def working_memory_root(self) -> Path:
        """The absolute, symlink-free root that confines all working-memory files."""
        if not self._working_memory_root.is_absolute():  # built without validation (model_construct)
            self._set_working_memory_root()
        return self._working_memory_root
