"""Config loading: overlay merge, dotted overrides with typed coercion, unknown keys, the environment."""

from __future__ import annotations

from pathlib import Path

import pytest

from reme_service.config.loader import coerce_value, load_config, parse_args, read_env
from reme_service.errors import ConfigError


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("true", True),
        ("False", False),
        ("null", None),
        ("None", None),
        ("8002", 8002),
        ("-3", -3),
        ("0.6", 0.6),
        ("1e-3", 0.001),
        ('{"a": 1}', {"a": 1}),
        ("{'temperature': 0.6}", {"temperature": 0.6}),
        ("[1, 2]", [1, 2]),
        ("qwen-plus", "qwen-plus"),
        ("./data/x", "./data/x"),
    ],
)
def test_coerce_value(text: str, expected: object) -> None:
    assert coerce_value(text) == expected


def test_defaults_are_the_embedded_offline_service() -> None:
    cfg = load_config([])
    assert cfg.http.port == 8002 and cfg.http.host == "127.0.0.1"
    assert cfg.vector_store["default"].backend == "local"
    assert cfg.llm["default"].backend == "auto"
    assert {"retrieve_task_memory", "retrieve_task_memory_simple", "vector_store"} <= set(cfg.flow)


def test_dotted_overrides_are_typed() -> None:
    cfg = load_config(["http.port=9001", "llm.default.model_name=qwen-plus", "llm.default.params.temperature=0.1"])
    assert cfg.http.port == 9001
    assert cfg.llm["default"].model_name == "qwen-plus"
    assert cfg.llm["default"].params == {"temperature": 0.1}


def test_overrides_whose_key_ends_in_c_are_not_config_selectors() -> None:
    configs, overrides = parse_args(["metadata.topic=x", "--http.port=1"])
    assert configs == []
    assert overrides == [("metadata.topic", "x"), ("http.port", 1)]


def test_user_yaml_overlays_the_default(tmp_path: Path) -> None:
    overlay = tmp_path / "mine.yaml"
    overlay.write_text("http:\n  port: 7000\nflow:\n  my_flow:\n    flow_content: MergeMemoryOp()\n")
    cfg = load_config([f"config={overlay}"])
    assert cfg.http.port == 7000
    assert cfg.http.host == "127.0.0.1"  # not replaced wholesale
    assert "retrieve_task_memory" in cfg.flow and "my_flow" in cfg.flow


def test_unknown_key_names_it_and_the_valid_keys() -> None:
    with pytest.raises(ConfigError) as info:
        load_config(["http.prot=1"])
    message = str(info.value)
    assert "http.prot" in message and "port" in message and "host" in message


def test_wrong_type_is_reported() -> None:
    with pytest.raises(ConfigError, match="http.port"):
        load_config(["http.port=abc"])


def test_missing_config_file() -> None:
    with pytest.raises(ConfigError, match="not found"):
        load_config(["config=/nonexistent/file.yaml"])


def test_argument_without_equals_is_rejected() -> None:
    with pytest.raises(ConfigError, match="key=value"):
        load_config(["http.port"])


def test_env_file_never_overrides_the_real_environment(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text('FLOW_LLM_API_KEY="from-file"\nFLOW_LLM_BASE_URL=http://file\n')
    env = read_env(tmp_path, environ={"FLOW_LLM_API_KEY": "real"})
    assert env["FLOW_LLM_API_KEY"] == "real"
    assert env["FLOW_LLM_BASE_URL"] == "http://file"


def test_env_file_is_found_in_a_parent(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text("FLOW_EMBEDDING_BASE_URL=http://parent\n")
    child = tmp_path / "a" / "b"
    child.mkdir(parents=True)
    assert read_env(child, environ={})["FLOW_EMBEDDING_BASE_URL"] == "http://parent"
