"""Build LLM and embedding clients from config; optional backends are imported only when chosen."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from reme_service.config.models import EmbeddingConfig, LLMConfig
from reme_service.errors import ConfigError
from reme_service.providers.embedding.base import EmbeddingClient
from reme_service.providers.llm.base import LLMClient


def _secret(value: Any) -> str | None:
    return value.get_secret_value() if value is not None else None


def resolve_llm_backend(cfg: LLMConfig, env: Mapping[str, str]) -> str:
    if cfg.backend != "auto":
        return cfg.backend
    configured = cfg.api_key or cfg.base_url or env.get("FLOW_LLM_API_KEY") or env.get("FLOW_LLM_BASE_URL")
    return "openai_compatible" if configured else "none"


def resolve_embedding_backend(cfg: EmbeddingConfig, env: Mapping[str, str]) -> str:
    if cfg.backend != "auto":
        return cfg.backend
    keys = (cfg.api_key, cfg.base_url, env.get("FLOW_EMBEDDING_API_KEY"), env.get("FLOW_EMBEDDING_BASE_URL"))
    return "openai_compatible" if any(keys) else "local"


def create_llm(name: str, cfg: LLMConfig, env: Mapping[str, str]) -> LLMClient:
    backend = resolve_llm_backend(cfg, env)
    if backend == "none":
        from reme_service.providers.llm.none import NoLLM

        return NoLLM()
    from reme_service.providers.llm.openai_compatible import OpenAICompatibleLLM

    return OpenAICompatibleLLM(
        model_name=cfg.model_name,
        api_key=_secret(cfg.api_key) or env.get("FLOW_LLM_API_KEY"),
        base_url=cfg.base_url or env.get("FLOW_LLM_BASE_URL") or None,
        params=dict(cfg.params),
        max_retries=cfg.max_retries,
        timeout=cfg.timeout,
    )


def create_embedder(name: str, cfg: EmbeddingConfig, env: Mapping[str, str]) -> EmbeddingClient:
    backend = resolve_embedding_backend(cfg, env)
    params = dict(cfg.params)
    try:
        if backend == "hash":
            from reme_service.providers.embedding.hash import HashEmbeddingClient

            return HashEmbeddingClient(**params)
        if backend == "local":
            from reme_service.providers.embedding.local import LocalEmbeddingClient

            return LocalEmbeddingClient(**params)
        from reme_service.providers.embedding.openai_compatible import OpenAICompatibleEmbedding

        return OpenAICompatibleEmbedding(
            model_name=cfg.model_name or "text-embedding-v4",
            api_key=_secret(cfg.api_key) or env.get("FLOW_EMBEDDING_API_KEY"),
            base_url=cfg.base_url or env.get("FLOW_EMBEDDING_BASE_URL") or None,
            **params,
        )
    except TypeError as exc:
        raise ConfigError(f"embedding_model.{name}.params: {exc}") from None
