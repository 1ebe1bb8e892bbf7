"""The HTTP edge extends uvicorn's private httptools protocol, so the server starts only on the uvicorn minor it is
tested with: another version is a `ConfigError` naming the supported range, raised when the protocol is configured
(as `reme` starts), and the range agrees with the pin in pyproject.toml."""

from __future__ import annotations

import re
import socket
import tomllib
from pathlib import Path

import pytest
import uvicorn
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from reme_service.cli import main
from reme_service.errors import ConfigError
from reme_service.server.protocol import (
    SUPPORTED_UVICORN,
    SUPPORTED_UVICORN_SPEC,
    UVICORN_HOOKS,
    EdgeHttpProtocol,
    require_supported_uvicorn,
)

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"


def configure() -> type[EdgeHttpProtocol]:
    return EdgeHttpProtocol.configured(header_timeout=10.0, max_header_bytes=65536, max_connections=None, retry_after=1)


def test_the_installed_uvicorn_is_supported() -> None:
    require_supported_uvicorn()
    assert issubclass(configure(), EdgeHttpProtocol)


@pytest.mark.parametrize("version", ["0.54.0", "0.54.7", "0.54.1rc1", "0.54.0.dev0+local"])
def test_a_release_of_the_supported_minor_passes(version: str) -> None:
    require_supported_uvicorn(version)


@pytest.mark.parametrize("version", ["0.55.0", "0.53.9", "1.0.0", "0.5", "0", "unknown", ""])
def test_another_version_is_refused_naming_the_range(version: str) -> None:
    with pytest.raises(ConfigError) as raised:
        require_supported_uvicorn(version)
    assert f"uvicorn {version} is installed" in raised.value.message
    assert f"uvicorn[standard]{SUPPORTED_UVICORN_SPEC}" in raised.value.message


def test_configuring_the_protocol_checks_the_installed_version(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(uvicorn, "__version__", "0.55.0")
    with pytest.raises(ConfigError, match=re.escape(SUPPORTED_UVICORN_SPEC)):
        configure()


def test_a_protocol_without_a_hook_is_refused() -> None:
    lacking = type("Lacking", (), {name: lambda self: None for name in UVICORN_HOOKS if name != "on_body"})
    with pytest.raises(ConfigError, match="lacks on_body"):
        require_supported_uvicorn("0.54.0", base=lacking)


def test_every_hook_the_edge_overrides_is_checked() -> None:
    overridden = {
        name
        for name, value in vars(EdgeHttpProtocol).items()
        if callable(value) and not name.startswith("_") and hasattr(HttpToolsProtocol, name)
    }
    assert overridden == set(UVICORN_HOOKS)


def test_the_range_is_the_pyproject_pin() -> None:
    dependencies = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["project"]["dependencies"]
    pins = [dep.removeprefix("uvicorn[standard]") for dep in dependencies if dep.startswith("uvicorn")]
    assert pins == [SUPPORTED_UVICORN_SPEC]
    (low_major, low_minor), (high_major, high_minor) = SUPPORTED_UVICORN
    assert f">={low_major}.{low_minor},<{high_major}.{high_minor}" == SUPPORTED_UVICORN_SPEC


def test_reme_refuses_to_start_on_another_uvicorn_in_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    monkeypatch.setattr(uvicorn, "__version__", "0.55.0")
    with socket.socket() as taken:  # were the version not checked first, `reme` would stop here, saying so
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        code = main([f"data_dir={tmp_path}", "embedding_model.default.backend=hash", f"http.port={port}"])
    assert code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1  # nothing said "starting" before it
    assert lines[0].startswith("reme: uvicorn 0.55.0 is installed") and SUPPORTED_UVICORN_SPEC in lines[0]
