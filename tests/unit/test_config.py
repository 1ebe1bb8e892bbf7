"""Config loading: overlay merge, dotted overrides with typed coercion, unknown keys, the environment."""

from __future__ import annotations

from pathlib import Path

import pytest

from reme_service.config.loader import coerce_value, load_config, parse_args, read_env
from reme_service.config.models import BASE_REQUEST_FIELDS
from reme_service.errors import ConfigError
from reme_service.schema.requests import FlowRequest


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


def test_environment_sets_any_key_below_the_command_line_and_above_files(tmp_path: Path) -> None:
    overlay = tmp_path / "site.yaml"
    overlay.write_text("http:\n  port: 7000\n  host: 0.0.0.0\nlog_level: debug\n")
    environ = {
        "REME_HTTP__PORT": "9000",
        "reme_vector_store__default__backend": "memory",
        "REME_VECTOR_STORE__DEFAULT__PARAMS__COLLECTION_PREFIX": "p_",
        "REME_LLM__DEFAULT__PARAMS": '{"temperature": 0.2}',
        "REME_TEST_STORE": "chroma",  # someone else's variable: not a config key, left alone
        "PATH": "/usr/bin",
    }
    cfg = load_config([f"config={overlay}", "log_level=warning"], environ=environ)
    assert cfg.http.port == 9000  # env over the file
    assert cfg.http.host == "0.0.0.0"  # the file where env says nothing
    assert cfg.log_level == "WARNING"  # the command line over everything
    assert cfg.vector_store["default"].backend == "memory"
    assert cfg.vector_store["default"].params == {"collection_prefix": "p_"}
    assert cfg.llm["default"].params == {"temperature": 0.2}
    assert load_config(["http.port=9100"], environ=environ).http.port == 9100
    assert load_config([], environ={}).http.port == 8002  # the default


def test_environment_key_errors_name_the_variable() -> None:
    with pytest.raises(ConfigError, match=r"REME_HTTP_PORT.*did you mean REME_HTTP__PORT"):
        load_config([], environ={"REME_HTTP_PORT": "9000"})
    with pytest.raises(ConfigError, match=r"config key 'http.prot'"):
        load_config([], environ={"REME_HTTP__PROT": "9000"})
    with pytest.raises(ConfigError, match=r"config key 'http.port'"):
        load_config([], environ={"REME_HTTP__PORT": "many"})
    with pytest.raises(ConfigError, match="empty level"):
        load_config([], environ={"REME_HTTP____PORT": "1"})


def test_the_environment_includes_a_dotenv_file(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text("REME_HTTP__PORT=9200\n")
    assert load_config([], environ=read_env(tmp_path, environ={})).http.port == 9200


def test_data_dir_is_absolute_once_resolved(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    cfg = load_config([], environ={})
    assert cfg.data_dir == str(tmp_path.resolve() / "reme_data")
    monkeypatch.chdir("/")
    assert cfg.data_dir == str(tmp_path.resolve() / "reme_data")  # resolved when read, not when used
    assert load_config([], environ={"REME_DATA_DIR": "~/x"}).data_dir == str(Path("~/x").expanduser())


def test_optional_with_must_name_another_field_of_the_flows_request(tmp_path: Path) -> None:
    """A typo in `optional_with` would make the field required unless a field nobody sends is sent: the start is
    refused, naming the flow, the field and the name. A base request field (`messages`) is a valid target."""
    overlay = tmp_path / "flows.yaml"
    schema = "    input_schema:\n      question:\n        required: true\n        optional_with: {}\n"
    overlay.write_text("flow:\n  my_flow:\n    flow_content: MergeMemoryOp()\n" + schema.format("mesages"))
    with pytest.raises(ConfigError) as info:
        load_config([f"config={overlay}"])
    message = str(info.value)
    assert "flow.my_flow" in message and "'question'" in message and "'mesages'" in message, message
    assert "messages" in message.replace("'mesages'", "")  # the valid names are listed
    with pytest.raises(ConfigError, match=r"flow\.retrieve_task_memory'.*'query' is optional_with itself"):
        load_config(["flow.retrieve_task_memory.input_schema.query.optional_with=query"])
    overlay.write_text("flow:\n  my_flow:\n    flow_content: MergeMemoryOp()\n" + schema.format("messages"))
    assert load_config([f"config={overlay}"]).flow["my_flow"].input_schema["question"].optional_with == "messages"


def test_the_base_request_fields_are_the_request_models_own() -> None:
    assert set(BASE_REQUEST_FIELDS) == set(FlowRequest.model_fields)
