"""reme_service: an async memory service for LLM agents, wire-compatible with ReMe 0.2.

`ReMeApp` and `AppConfig` are imported on first use (PEP 562), so `import reme_service.client` (an HTTP client
that needs neither) does not load the app, its ops, the openai SDK, numpy or the tokenizer.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from reme_service.errors import (
    ConfigError,
    EmbeddingError,
    FlowSyntaxError,
    InvalidRequestError,
    LLMError,
    LLMReplyError,
    NotFoundError,
    OpError,
    PathNotAllowedError,
    ProviderError,
    ReMeError,
    RequestValidationError,
    StoreError,
)
from reme_service.version import __version__

if TYPE_CHECKING:
    from reme_service.app import ReMeApp
    from reme_service.config.models import AppConfig


# name -> module that defines it; imported when the name is first read.
_LAZY = {"ReMeApp": "reme_service.app", "AppConfig": "reme_service.config.models"}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'reme_service' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later reads skip this function
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_LAZY])


__all__ = [
    "AppConfig",
    "ConfigError",
    "EmbeddingError",
    "FlowSyntaxError",
    "InvalidRequestError",
    "LLMError",
    "LLMReplyError",
    "NotFoundError",
    "OpError",
    "PathNotAllowedError",
    "ProviderError",
    "ReMeApp",
    "ReMeError",
    "RequestValidationError",
    "StoreError",
    "__version__",
]
