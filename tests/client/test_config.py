"""ClientConfig: file, environment and argument precedence; save(); clear errors."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
from ironpool.client.config import ClientConfig, ConfigError, default_config_path


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    for var in ("IRONPOOL_SERVER", "IRONPOOL_TOKEN", "IRONPOOL_NAMESPACE"):
        monkeypatch.delenv(var, raising=False)
    path = tmp_path / "cfg" / "config.yaml"
    monkeypatch.setenv("IRONPOOL_CONFIG", str(path))
    return path


def test_nothing_configured_says_what_to_do() -> None:
    config = ClientConfig.load()
    assert config.server == "" and config.namespace == "default"
    with pytest.raises(ConfigError, match="no server configured: set IRONPOOL_SERVER or run `ironpool up`"):
        config.require_server()


def test_save_then_load_round_trip_with_private_mode(clean_env: Path) -> None:
    saved = ClientConfig(server="https://h:6443", token="s3cret", ca_file="/ca.pem", namespace="dev")
    path = saved.save()
    assert path == clean_env == default_config_path()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert ClientConfig.load() == saved


def test_environment_overrides_file_and_arguments_override_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ClientConfig(server="http://file:1", token="file-token").save()
    monkeypatch.setenv("IRONPOOL_SERVER", "http://env:2")
    monkeypatch.setenv("IRONPOOL_TOKEN", "env-token")
    config = ClientConfig.load()
    assert (config.server, config.token) == ("http://env:2", "env-token")
    config = ClientConfig.load(server="http://arg:3", namespace="ns1")
    assert (config.server, config.token, config.namespace) == ("http://arg:3", "env-token", "ns1")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("server: [1, 2", "not valid YAML"),
        ("- a\n- b\n", "must be a mapping"),
        ("server: http://x\ntokn: y\n", "unknown key\\(s\\) tokn"),
        ("server: 5\n", "server must be a string"),
        ("server: http://x\ninsecure: maybe\n", "insecure must be true or false"),
    ],
)
def test_malformed_files_name_the_problem(clean_env: Path, text: str, message: str) -> None:
    clean_env.parent.mkdir(parents=True)
    clean_env.write_text(text)
    with pytest.raises(ConfigError, match=message):
        ClientConfig.load()


def test_server_must_be_a_url() -> None:
    with pytest.raises(ConfigError, match="must be an http:// or https:// URL"):
        ClientConfig(server="localhost:8080").require_server()
