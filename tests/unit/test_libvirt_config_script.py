"""scripts/libvirt-config.sh, pointed at files of the test's own: on a host with systemd or a security
module it changes nothing and says what it would have needed; in a plain container it takes out the
override an earlier ironpool appended to qemu.conf and nothing else."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "libvirt-config.sh"
OLD_OVERRIDE = """# ironpool: containers without systemd or security modules
user = "root"
group = "root"
dynamic_ownership = 0
security_driver = "none"
"""
OWN_SETTINGS = '# the administrator\'s own\nvnc_listen = "0.0.0.0"\nuser = "qemu-admin"\n'


def run(tmp_path: Path, conf: str, **env: str) -> tuple[subprocess.CompletedProcess[str], Path]:
    qemu_conf = tmp_path / "qemu.conf"
    qemu_conf.write_text(conf)
    paths = {
        "QEMU_CONF": str(qemu_conf), "DEV_KVM": str(tmp_path / "no-kvm"),
        "SYSTEMD_DIR": str(tmp_path / "no-systemd"), "LSM_FILE": str(tmp_path / "no-lsm"),
        "SELINUX_DIR": str(tmp_path / "no-selinux"), "APPARMOR_FILE": str(tmp_path / "no-apparmor"),
        "PATH": "/usr/bin:/bin:/usr/sbin:/sbin",
    }
    proc = subprocess.run(["bash", str(SCRIPT)], env={**paths, **env}, capture_output=True, text=True,
                          timeout=30, check=False)
    return proc, qemu_conf


@pytest.mark.parametrize("host", ["systemd", "apparmor", "selinux"])
def test_a_real_host_keeps_its_qemu_conf_and_is_told_what_to_remove(tmp_path: Path, host: str) -> None:
    env: dict[str, str] = {}
    if host == "systemd":
        (tmp_path / "systemd").mkdir()
        env["SYSTEMD_DIR"] = str(tmp_path / "systemd")
    elif host == "apparmor":
        (tmp_path / "lsm").write_text("lockdown,capability,landlock,yama,apparmor")
        env["LSM_FILE"] = str(tmp_path / "lsm")
    else:
        (tmp_path / "selinux").mkdir()
        (tmp_path / "selinux" / "enforce").write_text("1")
        env["SELINUX_DIR"] = str(tmp_path / "selinux")
    before = OWN_SETTINGS + OLD_OVERRIDE
    proc, conf = run(tmp_path, before, **env)
    assert proc.returncode == 0, proc.stderr
    assert conf.read_text() == before
    assert "leaves this host's files alone" in proc.stdout and "restart libvirtd" in proc.stdout
    assert "nothing changed" in proc.stdout


def test_a_real_host_without_the_override_hears_nothing_is_needed(tmp_path: Path) -> None:
    (tmp_path / "systemd").mkdir()
    proc, conf = run(tmp_path, OWN_SETTINGS, SYSTEMD_DIR=str(tmp_path / "systemd"))
    assert proc.returncode == 0 and conf.read_text() == OWN_SETTINGS
    assert "override" not in proc.stdout and "nothing changed" in proc.stdout


def test_a_real_host_with_a_root_only_kvm_device_is_told_and_left_alone(tmp_path: Path) -> None:
    # /dev/null stands in for a character device whose group is not the KVM group.
    (tmp_path / "systemd").mkdir()
    before = Path("/dev/null").stat()
    proc, _ = run(tmp_path, "", SYSTEMD_DIR=str(tmp_path / "systemd"), DEV_KVM="/dev/null", KVM_GROUP="kvm")
    after = Path("/dev/null").stat()
    assert proc.returncode == 0
    assert (after.st_mode, after.st_gid) == (before.st_mode, before.st_gid)
    assert "/dev/null" in proc.stdout and "Left as it is" in proc.stdout


def test_a_container_loses_the_old_override_and_keeps_the_rest(tmp_path: Path) -> None:
    proc, conf = run(tmp_path, OWN_SETTINGS + OLD_OVERRIDE + "max_files = 4096\n")
    assert proc.returncode == 10, proc.stdout + proc.stderr  # libvirtd must restart to apply it
    assert conf.read_text() == OWN_SETTINGS + "max_files = 4096\n"
    assert "removed the override" in proc.stdout
    again, conf = run(tmp_path, conf.read_text())
    assert again.returncode == 0 and again.stdout == ""


def test_a_container_with_distribution_defaults_is_left_as_it_is(tmp_path: Path) -> None:
    proc, conf = run(tmp_path, "")
    assert proc.returncode == 0 and proc.stdout == "" and conf.read_text() == ""
