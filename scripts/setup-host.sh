#!/usr/bin/env bash
# Prepare this host for ironpool: Debian packages, the libvirt-qemu user, and a running libvirtd.
# Idempotent: every step checks first, so running it again is cheap.
set -euo pipefail

PACKAGES=(
  libvirt-daemon libvirt-daemon-driver-qemu libvirt-clients qemu-system-x86 qemu-utils
  libvirt-dev pkg-config busybox-static dropbear-bin cpio openssh-server etcd-server curl
  dnsmasq-base iptables
)

sudo_() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "==> installing Debian packages: ${missing[*]}"
  sudo_ apt-get update -qq
  sudo_ env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# libvirtd refuses to start without its service user and folders.
getent group libvirt-qemu >/dev/null || sudo_ groupadd -r libvirt-qemu
getent group kvm >/dev/null || sudo_ groupadd -r kvm
id libvirt-qemu >/dev/null 2>&1 || sudo_ useradd -r -g libvirt-qemu -G kvm -d /var/lib/libvirt -s /usr/sbin/nologin libvirt-qemu
sudo_ mkdir -p /var/log/libvirt /var/run/libvirt /var/lib/libvirt /var/lib/libvirt/images

# No systemd and no SELinux/AppArmor here: run QEMU as root without relabelling.
conf=/etc/libvirt/qemu.conf
if ! grep -q '^# ironpool' "$conf" 2>/dev/null; then
  sudo_ tee -a "$conf" >/dev/null <<'CONF'
# ironpool: containers without systemd or security modules
user = "root"
group = "root"
dynamic_ownership = 0
security_driver = "none"
CONF
fi

if ! virsh -c qemu:///system version >/dev/null 2>&1; then
  echo "==> starting libvirtd"
  pgrep -x virtlogd >/dev/null || sudo_ virtlogd -d
  pgrep -x libvirtd >/dev/null || sudo_ libvirtd -d
  for _ in $(seq 1 100); do
    virsh -c qemu:///system version >/dev/null 2>&1 && break
    sleep 0.1
  done
  virsh -c qemu:///system version >/dev/null || { echo "libvirtd did not come up; see /var/log/libvirt" >&2; exit 1; }
fi
echo "==> host ready: $(virsh -c qemu:///system version | grep -i 'running hypervisor' || true)"
