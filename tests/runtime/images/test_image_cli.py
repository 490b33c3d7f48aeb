"""``ironpool image push|pull|ls`` against a real registry that wants a password."""

from __future__ import annotations

import base64
import json
import subprocess
from pathlib import Path

from click.testing import CliRunner
from ironpool.cli.image_cmd import image

from tests.helpers.registry import Registry


def test_push_pull_and_list_with_credentials(auth_registry: Registry, tmp_path: Path) -> None:
    disk = tmp_path / "d.qcow2"
    subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", str(disk), "32M"], check=True)
    ref = f"{auth_registry.address}/cli/disk:1"
    runner = CliRunner()
    denied = runner.invoke(image, ["push", ref, str(disk)])
    assert denied.exit_code == 1 and "authentication required" in denied.output
    login_args = ["--username", auth_registry.user, "--password-stdin"]
    pushed = runner.invoke(image, ["push", ref, str(disk), *login_args], input=auth_registry.password + "\n")
    assert pushed.exit_code == 0, pushed.output
    digest = pushed.stdout.strip().splitlines()[-1]
    assert digest.startswith("sha256:")

    cache = tmp_path / "cache"
    refused = runner.invoke(image, ["pull", ref, "--image-cache", str(cache)])
    assert refused.exit_code == 1 and f"image {ref}: " in refused.output and "unauthorized" in refused.output
    auth = tmp_path / "auth.json"
    login = base64.b64encode(f"{auth_registry.user}:{auth_registry.password}".encode()).decode()
    auth.write_text(json.dumps({"auths": {auth_registry.address: {"auth": login}}}))
    pulled = runner.invoke(image, ["pull", ref, "--image-cache", str(cache), "--authfile", str(auth)])
    assert pulled.exit_code == 0, pulled.output
    assert pulled.stdout.strip().splitlines()[-1] == f"{ref}@{digest}"

    listed = runner.invoke(image, ["ls", "--image-cache", str(cache), "-o", "json"])
    doc = json.loads(listed.stdout)
    assert [(i["ref"], i["digest"], i["users"]) for i in doc["images"]] == [(ref, digest, [])]
    table = runner.invoke(image, ["ls", "--image-cache", str(cache)]).stdout
    assert ref in table and digest[7:19] in table
    assert runner.invoke(image, ["ls", "--image-cache", str(tmp_path / "none")]).exit_code == 1
