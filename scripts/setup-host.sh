#!/usr/bin/env bash
# Prepare this host for ironpool: Debian packages, the libvirt-qemu user, and a running libvirtd.
# Idempotent: every step checks first, so running it again is cheap.
set -euo pipefail

PACKAGES=(
  libvirt-daemon libvirt-daemon-driver-qemu libvirt-clients qemu-system-x86 qemu-utils
  libvirt-dev pkg-config busybox-static dropbear-bin cpio openssh-server etcd-server etcd-client curl
  dnsmasq-base iptables
  mmdebstrap eatmydata fdisk grub-pc-bin  # ironpool image build debian-12
  ovmf  # UEFI machines: OVMF_CODE and the VARS template their NVRAM starts from
  skopeo docker-registry apache2-utils
  chromium chromium-driver libnss3-tools  # the web console's browser tests (selenium drives them
  # headless; pk12util puts a client certificate in its NSS database)
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

# docker-registry (the CNCF distribution registry) serves OCI images to tests and `ironpool up --registry`,
# each on a loopback port of their own: the package's own service, listening on every address, stays off.
if [ -d /run/systemd/system ] && systemctl is-enabled docker-registry >/dev/null 2>&1; then
  sudo_ systemctl disable --now docker-registry >/dev/null 2>&1 || true
fi

# libvirtd refuses to start without its service user and folders.
getent group libvirt-qemu >/dev/null || sudo_ groupadd -r libvirt-qemu
getent group kvm >/dev/null || sudo_ groupadd -r kvm
id libvirt-qemu >/dev/null 2>&1 || sudo_ useradd -r -g libvirt-qemu -G kvm -d /var/lib/libvirt -s /usr/sbin/nologin libvirt-qemu
sudo_ mkdir -p /var/log/libvirt /var/run/libvirt /var/lib/libvirt /var/lib/libvirt/images

# How libvirt runs QEMU: the distribution's defaults (see libvirt-config.sh); exit 10 means its
# configuration changed and a libvirtd this script started must start again to read it.
restart=0
sudo_ bash "$(dirname "$0")/libvirt-config.sh" || { rc=$?; [ "$rc" -eq 10 ] || exit "$rc"; restart=1; }

libvirt_up() { virsh -c qemu:///system version >/dev/null 2>&1; }
if [ -d /run/systemd/system ]; then
  libvirt_up || { echo "==> starting libvirtd"; sudo_ systemctl start libvirtd; }
else
  # No init system to ask: start the daemons ourselves (running domains survive a restart).
  if [ "$restart" -eq 1 ] && pgrep -x libvirtd >/dev/null; then
    echo "==> restarting libvirtd to apply its configuration"
    sudo_ pkill -x libvirtd
    for _ in $(seq 1 100); do pgrep -x libvirtd >/dev/null || break; sleep 0.1; done
  fi
  if ! libvirt_up; then
    echo "==> starting libvirtd"
    pgrep -x virtlogd >/dev/null || sudo_ virtlogd -d
    pgrep -x libvirtd >/dev/null || sudo_ libvirtd -d
  fi
fi
for _ in $(seq 1 100); do libvirt_up && break; sleep 0.1; done
libvirt_up || { echo "libvirtd did not come up; see /var/log/libvirt" >&2; exit 1; }
qemu_user=$(virsh -c qemu:///system capabilities | tr -d '\n' |
  sed -n "s|.*<model>dac</model>.*<baselabel type='qemu'>\([^<]*\)</baselabel>.*|\1|p")
qemu_uid=${qemu_user%%:*}
qemu_name=$(getent passwd "${qemu_uid#+}" | cut -d: -f1 || true)
echo "==> QEMU runs as ${qemu_name:-uid ${qemu_uid#+}} (libvirt's DAC label ${qemu_user:-unknown})"
echo "==> host ready: $(virsh -c qemu:///system version | grep -i 'running hypervisor' || true)"
