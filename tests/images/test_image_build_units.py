"""The image builder without Debian's mirror: the cache key, the cache hit, errors, and a real
bootable disk (sfdisk, mkfs.ext4, grub-mkimage, qemu-img) made from a small folder."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from ironpool.cli.main import cli
from ironpool.images import bootdisk, build, debian
from ironpool.images.tools import ImageBuildError, run


def test_the_recipe_text_changes_with_what_goes_in() -> None:
    base = debian.RECIPES["debian-12"]
    text = build.recipe_text(base)
    assert build.recipe_text(base) == text  # stable
    for changed in (debian.Recipe(**{**base.__dict__, "packages": (*base.packages, "vim")}),
                    debian.Recipe(**{**base.__dict__, "mirror": "http://mirror.invalid/debian"}),
                    debian.Recipe(**{**base.__dict__, "files": {**base.files, "etc/motd": "hi"}})):
        assert build.recipe_text(changed) != text


def test_configure_quiets_the_guest_and_keeps_what_cloud_init_needs(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "etc/ssh").mkdir(parents=True)
    (root / "etc/ssh/ssh_host_rsa_key").write_text("stale")
    (root / "usr/share/doc/bash").mkdir(parents=True)
    (root / "usr/share/doc/bash/copyright").write_text("GPL")
    (root / "usr/share/doc/bash/README").write_text("docs")
    debian.configure(debian.RECIPES["debian-12"], root)
    for generator in debian.MASKED_GENERATORS:  # masked the way systemd.generator(7) says
        assert os.readlink(root / "etc/systemd/system-generators" / generator) == "/dev/null"
    assert os.readlink(root / "etc/systemd/system/systemd-binfmt.service") == "/dev/null"
    assert "blacklist ata_piix\n" in (root / "etc/modprobe.d/ironpool-guest.conf").read_text()
    cfg = yaml.safe_load((root / "etc/cloud/cloud.cfg.d/90-ironpool.cfg").read_text())
    assert cfg["datasource_list"] == ["NoCloud", "None"]
    # bookworm's config stage runs in the final stage's process: its modules first, in their order
    # (runcmd writes the script that scripts-user runs), and its own unit does not start.
    assert cfg["cloud_config_modules"] == []
    final = cfg["cloud_final_modules"]
    assert final[:len(debian.CONFIG_MODULES)] == list(debian.CONFIG_MODULES) and "grub-dpkg" not in final
    assert final.index("runcmd") < final.index("scripts-user") and final[-1] == "power-state-change"
    assert os.readlink(root / "etc/systemd/system/cloud-config.service") == "/dev/null"
    assert not (root / "etc/ssh/ssh_host_rsa_key").exists()  # each guest makes its own
    assert sorted(p.name for p in (root / "usr/share/doc/bash").iterdir()) == ["copyright"]
    assert (root / "etc/machine-id").read_text() == ""


def test_debian_13_gets_iproute2_and_no_vsock_ssh_generator(tmp_path: Path) -> None:
    """trixie's cloud-init renders the network only where `ip` is, and nothing there pulls iproute2
    in; its systemd adds an SSH generator that fails without a vsock device. debian-12's recipe is
    untouched by either. trixie keeps cloud-init's config stage."""
    trixie, bookworm = debian.RECIPES["debian-13"], debian.RECIPES["debian-12"]
    assert trixie.suite == "trixie" and "iproute2" in trixie.packages
    assert "iproute2" not in bookworm.packages
    debian.configure(trixie, tmp_path)
    assert os.readlink(tmp_path / "etc/systemd/system-generators/systemd-ssh-generator") == "/dev/null"
    assert "systemd-ssh-generator" not in bookworm.masked_generators
    # trixie's stages share one process already (its units only signal it): the config stage stays.
    cfg = yaml.safe_load((tmp_path / "etc/cloud/cloud.cfg.d/90-ironpool.cfg").read_text())
    assert cfg["cloud_config_modules"] == list(debian.CONFIG_MODULES)
    assert cfg["cloud_final_modules"] == list(debian.FINAL_MODULES)
    assert not (tmp_path / "etc/systemd/system/cloud-config.service").exists()


def _fake_build(images: Path, name: str, recipe: str) -> Path:
    builds = images / build.BUILDS
    builds.mkdir(parents=True, exist_ok=True)
    image = builds / f"{name}-1-abc.qcow2"
    image.write_bytes(b"qcow")
    image.with_suffix(".recipe").write_text(recipe)
    (images / f"{name}.qcow2").symlink_to(image.relative_to(images))
    return image


def test_an_image_built_from_the_same_recipe_is_not_built_again(tmp_path: Path) -> None:
    recipe = build.recipe_text(debian.RECIPES["debian-12"])
    _fake_build(tmp_path, "debian-12", recipe)
    out = CliRunner().invoke(cli, ["image", "build", "debian-12", "--images", str(tmp_path),
                                   "--build-cache", str(tmp_path / "cache"), "-o", "json"])
    assert out.exit_code == 0, out.output
    result = json.loads(out.stdout)
    assert result["cached"] is True and result["path"] == str(tmp_path / "debian-12.qcow2")
    assert not (tmp_path / "cache").exists()  # nothing was started


def test_a_changed_recipe_builds_anew_and_a_failure_keeps_the_old_image(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    old = _fake_build(tmp_path, "debian-12", "an older recipe")

    def fail(*_a: object, **_k: object) -> None:
        raise ImageBuildError("mmdebstrap failed (exit 1): E: mirror unreachable")

    monkeypatch.setattr(debian, "make_root", fail)
    with pytest.raises(ImageBuildError, match="mirror unreachable"):
        build.build("debian-12", tmp_path, tmp_path / "cache")
    assert (tmp_path / "debian-12.qcow2").resolve() == old
    left = sorted(p.name for p in (tmp_path / build.BUILDS).iterdir())
    assert left == [old.name, old.with_suffix(".recipe").name]  # nothing half-made


def test_unknown_image_names_what_can_be_built(tmp_path: Path) -> None:
    out = CliRunner().invoke(cli, ["image", "build", "fedora-40", "--images", str(tmp_path)])
    assert out.exit_code != 0 and "fedora-40" in out.output and "debian-12" in out.output


def test_run_reports_the_tool_and_its_last_lines() -> None:
    with pytest.raises(ImageBuildError, match=r"listing failed \(exit 2\):\n.*nonexistent"):
        run(["ls", "/nonexistent"], "listing", lambda _l: None)
    with pytest.raises(ImageBuildError, match="sleeping: no result after 0s"):
        run(["sleep", "5"], "sleeping", lambda _l: None, timeout=0.2)


@pytest.mark.skipif(not all(shutil.which(t) for t in bootdisk.TOOLS), reason="needs fdisk, e2fsprogs, "
                    "grub-pc-bin, qemu-utils (make host)")
def test_boot_disk_has_grub_in_the_mbr_and_the_root_file_system_in_its_partition(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "etc").mkdir(parents=True)
    (root / "boot").mkdir()
    (root / "boot/vmlinuz-6").write_bytes(b"kernel")
    os.symlink("boot/vmlinuz-6", root / "vmlinuz")
    out = tmp_path / "disk.qcow2"
    bootdisk.make_bootdisk(root, out, 64 * 1024**2, "ro console=ttyS0", tmp_path, lambda _l: None)
    info = json.loads(subprocess.run(["qemu-img", "info", "--output=json", str(out)], capture_output=True,
                                     text=True, check=True).stdout)
    assert (info["format"], info["virtual-size"]) == ("qcow2", 64 * 1024**2)
    raw = tmp_path / "back.raw"
    subprocess.run(["qemu-img", "convert", "-O", "raw", str(out), str(raw)], check=True)
    head = raw.read_bytes()[: bootdisk.PARTITION_START]
    grub = (bootdisk.GRUB_DIR / "boot.img").read_bytes()
    assert head[:bootdisk.MBR_BOOT_CODE] == grub[:bootdisk.MBR_BOOT_CODE]
    assert head[510:512] == b"\x55\xaa"
    assert head[512:516] == (bootdisk.GRUB_DIR / "diskboot.img").read_bytes()[:4]  # GRUB's core image
    table = json.loads(subprocess.run(["sfdisk", "--json", str(raw)], capture_output=True, text=True,
                                      check=True).stdout)["partitiontable"]
    (part,) = table["partitions"]
    assert (part["start"], part.get("bootable"), part["type"]) == (2048, True, "83")
    fstab = (root / "etc/fstab").read_text()
    fs_uuid = fstab.split()[0].removeprefix("UUID=")
    blkid = subprocess.run(["blkid", "-p", "-O", str(bootdisk.PARTITION_START), "-o", "export", str(raw)],
                           capture_output=True, text=True, check=True).stdout
    assert f"UUID={fs_uuid}" in blkid and "TYPE=ext4" in blkid
    assert f"root=UUID={fs_uuid} ro console=ttyS0" in bootdisk.grub_config(fs_uuid, "ro console=ttyS0")
