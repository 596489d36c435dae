"""What Recast's commands say when the Ray cluster they join refuses them (issue 42): the address, this
process's authentication settings (never the token) and what to set.  The real refusal, by a head with
Ray's token authentication, is in ``tests/integration/jobs/test_readme_submit.py``."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import ray

from jobs.cli import auth_setting, join_ray
from pipeline.errors import ClusterUnreachable


@pytest.fixture()
def no_auth_env(monkeypatch, tmp_path):
    for name in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH", "RAY_ADDRESS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    return tmp_path


def refusing(exc: BaseException) -> SimpleNamespace:
    """A module whose ``init`` fails as ``ray.init`` does against a cluster that refuses the process."""

    def init(**_: object) -> None:
        raise exc

    return SimpleNamespace(init=init, exceptions=ray.exceptions)


@pytest.mark.parametrize(
    ("env", "token_file", "said"),
    [
        ({}, False, "RAY_AUTH_MODE unset (Ray then sends no token) and no token"),
        ({}, True, "RAY_AUTH_MODE unset (Ray then sends no token) and a token in ~/.ray/auth_token"),
        ({"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": "s3cr3t-value"}, False, "a token in RAY_AUTH_TOKEN"),
        ({"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": "/nowhere/t"}, False, "/nowhere/t (no such file)"),
    ],
)
def test_a_refused_join_names_the_address_the_settings_and_what_to_set(
    no_auth_env, monkeypatch, env, token_file, said
) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    if token_file:
        (no_auth_env / ".ray").mkdir()
        (no_auth_env / ".ray" / "auth_token").write_text("file-token-value")
    assert said in auth_setting()
    for exc in (
        ConnectionError("Failed to connect to Ray cluster at 10.0.0.5:6379"),
        ray.exceptions.AuthenticationError("no token"),
    ):
        with pytest.raises(ClusterUnreachable) as err:
            join_ray(refusing(exc), address="10.0.0.5:6379")
        text = str(err.value)
        assert "cannot join the Ray cluster at 10.0.0.5:6379" in text and said in text
        assert "set RAY_AUTH_MODE=token and give the cluster's token" in text
        assert "s3cr3t-value" not in text and "file-token-value" not in text


def test_other_failures_of_ray_init_are_not_taken_for_a_refusal(no_auth_env) -> None:
    with pytest.raises(ValueError, match="bad option"):
        join_ray(refusing(ValueError("bad option")))
