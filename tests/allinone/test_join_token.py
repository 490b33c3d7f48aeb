"""Join tokens: the bootstrap tokens (and earlier identity tokens) they add to the token file, the CA
hash they pin, and the refusals of ``ironpool join`` / ``ironpool join-token create`` before anything
is made."""

from __future__ import annotations

import base64
import json
import shlex
from pathlib import Path

import pytest
from click.testing import CliRunner
from ironpool.allinone.datadir import ensure_admin_token
from ironpool.allinone.join_token import (
    BootstrapToken,
    JoinTokenError,
    add_bootstrap_token,
    add_identities,
    ca_cert_hash,
    check_ca_hash,
    decode_ca,
)
from ironpool.api.errors import Unauthorized
from ironpool.apiserver.auth.authentication import Authenticator
from ironpool.apiserver.serving.certs import CertificateAuthority
from ironpool.cli.main import cli


@pytest.fixture
def control(tmp_path: Path) -> Path:
    """A control plane's data dir as `ironpool up` leaves it: token file, CA, installation record."""
    root = tmp_path / "cp"
    root.mkdir()
    ensure_admin_token(root / "tokens.csv")
    CertificateAuthority.ensure(root / "pki")
    (root / "installation.json").write_text(json.dumps({"api": "https://10.0.0.1:6443"}))
    return root


def test_create_adds_a_bootstrap_token_and_prints_the_hash_pinned_join_command(control: Path) -> None:
    result = CliRunner().invoke(cli, ["join-token", "create", "--pool", "h1", "--data-dir", str(control)])
    assert result.exit_code == 0, result.output
    argv = shlex.split(result.stdout.strip().splitlines()[-1])
    assert argv[:3] == ["ironpool", "join", "https://10.0.0.1:6443"]
    opts = dict(zip(argv[3::2], argv[4::2], strict=True))
    assert opts["--pool"] == "h1" and "--ca-data" not in opts  # the command carries no CA, only its hash
    ca = CertificateAuthority.ensure(control / "pki").cert
    assert opts["--discovery-token-ca-cert-hash"] == ca_cert_hash(ca)
    token = BootstrapToken.match(opts["--token"])
    assert token is not None
    authn = Authenticator.from_file(control / "tokens.csv")
    user = authn.authenticate(f"Bearer {token}")
    assert user.name == f"system:bootstrap:{token.id}"
    assert user.groups == {"system:bootstrappers", "system:bootstrappers:ironpool:pool:h1"}
    assert authn.authenticate(f"Bearer {ensure_admin_token(control / 'tokens.csv')}").is_admin
    assert oct((control / "tokens.csv").stat().st_mode & 0o777) == "0o600"


def test_create_refuses_what_it_cannot_use(control: Path, tmp_path: Path) -> None:
    run = CliRunner().invoke
    bad_pool = run(cli, ["join-token", "create", "--pool", "H_1", "--data-dir", str(control)])
    assert bad_pool.exit_code == 2 and "--pool" in bad_pool.output
    plain = run(cli, ["join-token", "create", "--pool", "h1", "--data-dir", str(control),
                      "--server", "http://10.0.0.1:6443"])
    assert plain.exit_code == 2 and "https://" in plain.output
    empty = tmp_path / "empty"
    empty.mkdir()
    nothing = run(cli, ["join-token", "create", "--pool", "h1", "--data-dir", str(empty)])
    assert nothing.exit_code == 2 and "--server" in nothing.output
    assert len(Authenticator.from_file(control / "tokens.csv")._tokens) == 1  # nothing was added


def test_the_ca_is_pinned_by_its_public_key_hash(control: Path) -> None:
    pem = (control / "pki" / "ca.crt").read_bytes()
    other = CertificateAuthority.ensure(control / "other")
    check_ca_hash(pem, ca_cert_hash(CertificateAuthority.ensure(control / "pki").cert))
    with pytest.raises(JoinTokenError, match="not the control plane's CA"):
        check_ca_hash(pem, ca_cert_hash(other.cert))
    with pytest.raises(JoinTokenError, match="--ca-cert-hash"):
        check_ca_hash(pem, "md5:abc")
    with pytest.raises(JoinTokenError, match="--ca-data"):
        decode_ca("not base64!")
    with pytest.raises(JoinTokenError, match="--ca-data: not a PEM certificate"):
        decode_ca(base64.b64encode(b"hello").decode())


def test_join_refuses_bad_arguments_before_making_anything(control: Path, tmp_path: Path) -> None:
    token = add_identities(control / "tokens.csv", "h1")
    boot = add_bootstrap_token(control / "tokens.csv", "h1")
    ca = str(control / "pki" / "ca.crt")
    data_dir = tmp_path / "host"
    base = ["join", "https://127.0.0.1:1", "--pool", "h1", "--data-dir", str(data_dir)]
    cases = {
        "exactly one of --ca-data and --ca-file": [*base, "--token", str(token)],
        "--discovery-token-ca-cert-hash: required": [*base, "--token", str(boot)],
        "--discovery-token-ca-cert-hash: expected sha256:": [*base, "--token", str(boot),
                                                             "--discovery-token-ca-cert-hash", "sha256:12"],
        "--token: expected": [*base, "--token", "abc", "--ca-file", ca],
        "not an https:// URL": ["join", "http://127.0.0.1:1", "--pool", "h1", "--token", str(token),
                                "--ca-file", ca],
        "not a DNS label": ["join", "https://127.0.0.1:1", "--pool", "Bad", "--token", str(token),
                            "--ca-file", ca],
    }
    for message, argv in cases.items():
        result = CliRunner().invoke(cli, argv)
        assert result.exit_code == 2 and message in result.output, (message, result.output)
    assert not data_dir.exists()


def test_join_says_when_the_control_plane_cannot_be_reached(control: Path, tmp_path: Path) -> None:
    from tests.helpers.net import free_port

    token = add_identities(control / "tokens.csv", "h1")
    data_dir = tmp_path / "host"
    result = CliRunner().invoke(cli, ["join", f"https://127.0.0.1:{free_port()}", "--pool", "h1",
                                      "--token", str(token), "--ca-file", str(control / "pki" / "ca.crt"),
                                      "--data-dir", str(data_dir), "--no-tiny-image"])
    assert result.exit_code == 1
    assert "cannot reach the control plane at https://127.0.0.1:" in result.output, result.output


def test_list_and_delete_revoke_a_pools_identities(control: Path) -> None:
    run = CliRunner().invoke
    tokens = control / "tokens.csv"
    h1, h2 = add_identities(tokens, "h1"), add_identities(tokens, "h2")
    boot = add_bootstrap_token(tokens, "h1")
    listed = run(cli, ["join-token", "list", "--data-dir", str(control)])
    assert listed.exit_code == 0 and h1.machine not in listed.output and boot.secret not in listed.output
    assert [line.split() for line in listed.output.splitlines()[1:]] == [["h1", "3"], ["h2", "2"]]

    deleted = run(cli, ["join-token", "delete", "--pool", "h1", "--data-dir", str(control)])
    assert deleted.exit_code == 0 and "3 tokens removed" in deleted.output
    authn = Authenticator.from_file(tokens)
    for gone in (h1.machine, h1.volume, str(boot)):
        with pytest.raises(Unauthorized):
            authn.authenticate(f"Bearer {gone}")
    assert authn.authenticate(f"Bearer {h2.volume}").name.endswith("volumepool:h2")
    assert authn.authenticate(f"Bearer {ensure_admin_token(tokens)}").is_admin
    again = run(cli, ["join-token", "delete", "--pool", "h1", "--data-dir", str(control)])
    assert again.exit_code == 1 and "no identity of pool h1" in again.output
