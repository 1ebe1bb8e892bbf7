"""reme_service: an async memory service for LLM agents, wire-compatible with ReMe 0.2."""

from __future__ import annotations

__version__ = "0.1.0"

from reme_service.app import ReMeApp  # noqa: E402
from reme_service.config.models import AppConfig  # noqa: E402
from reme_service.errors import (  # noqa: E402
    ConfigError,
    EmbeddingError,
    FlowSyntaxError,
    InvalidRequestError,
    LLMError,
    NotFoundError,
    OpError,
    PathNotAllowedError,
    ProviderError,
    ReMeError,
    StoreError,
)

__all__ = [
    "AppConfig",
    "ConfigError",
    "EmbeddingError",
    "FlowSyntaxError",
    "InvalidRequestError",
    "LLMError",
    "NotFoundError",
    "OpError",
    "PathNotAllowedError",
    "ProviderError",
    "ReMeApp",
    "ReMeError",
    "StoreError",
    "__version__",
]
