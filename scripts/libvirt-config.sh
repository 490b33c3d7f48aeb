#!/usr/bin/env bash
# How this host's libvirt runs QEMU, checked for ironpool; called by setup-host.sh.
#
# ironpool works with the distribution's defaults: QEMU runs as libvirt-qemu, libvirt's dynamic
# ownership hands it each disk, kernel, initrd and seed file, and the runtimes keep those files in
# folders that user can pass through (they refuse to start otherwise, naming the folder). So
# qemu.conf is never changed to run QEMU as root or to switch labelling off.
#
# Two things a plain container lacks, and only there (no systemd, no AppArmor/SELinux) this script
# mends them, saying so:
#   - udev: /dev/kvm stays root-only; udev gives it to group kvm (0660) on a host, and so does this;
#   - an override that an earlier ironpool appended to qemu.conf (QEMU as root, no relabelling) is
#     taken out again (libvirtd must be restarted: the caller does, as it started it).
# On a host with systemd or a security module nothing is changed: the script says what it would
# have done, if anything.
#
# Paths come from the environment so tests can point it at files of their own:
#   QEMU_CONF (/etc/libvirt/qemu.conf), DEV_KVM (/dev/kvm), SYSTEMD_DIR (/run/systemd/system),
#   LSM_FILE (/sys/kernel/security/lsm), SELINUX_DIR (/sys/fs/selinux), APPARMOR_FILE
#   (/sys/module/apparmor/parameters/enabled), KVM_GROUP (kvm).
# Exit status: 0, or 10 when qemu.conf changed (libvirtd must restart to apply it).
set -euo pipefail

QEMU_CONF=${QEMU_CONF:-/etc/libvirt/qemu.conf}
DEV_KVM=${DEV_KVM:-/dev/kvm}
SYSTEMD_DIR=${SYSTEMD_DIR:-/run/systemd/system}
LSM_FILE=${LSM_FILE:-/sys/kernel/security/lsm}
SELINUX_DIR=${SELINUX_DIR:-/sys/fs/selinux}
APPARMOR_FILE=${APPARMOR_FILE:-/sys/module/apparmor/parameters/enabled}
KVM_GROUP=${KVM_GROUP:-kvm}
MARKER='# ironpool: containers without systemd or security modules'

security_module() {
  local lsm=""
  [ -r "$LSM_FILE" ] && lsm=$(tr ',' ' ' <"$LSM_FILE")
  for m in $lsm; do
    case "$m" in apparmor|selinux|smack|tomoyo) echo "$m"; return 0;; esac
  done
  if [ -e "$SELINUX_DIR/enforce" ]; then echo selinux; return 0; fi
  if [ -r "$APPARMOR_FILE" ] && grep -qi '^y' "$APPARMOR_FILE"; then echo apparmor; return 0; fi
  return 1
}

why_host=""
if [ -d "$SYSTEMD_DIR" ]; then
  why_host="it runs systemd"
elif module=$(security_module); then
  why_host="it has the $module security module"
fi

changed=0
if [ -f "$QEMU_CONF" ] && grep -qxF "$MARKER" "$QEMU_CONF"; then
  if [ -n "$why_host" ]; then
    echo "==> $QEMU_CONF holds an override an earlier ironpool added (QEMU as root, no relabelling)."
    echo "    ironpool no longer needs it and leaves this host's files alone ($why_host): delete the"
    echo "    lines from '$MARKER' to 'security_driver = \"none\"' and restart libvirtd."
  else
    # The block is the marker and the four settings after it, exactly as earlier versions wrote it.
    tmp=$(mktemp "$QEMU_CONF.XXXXXX")
    awk -v marker="$MARKER" '
      $0 == marker { skip = 4; next }
      skip > 0 && /^(user|group|dynamic_ownership|security_driver) = / { skip--; next }
      { skip = 0; print }
    ' "$QEMU_CONF" >"$tmp"
    chmod --reference="$QEMU_CONF" "$tmp"
    mv "$tmp" "$QEMU_CONF"
    echo "==> removed the override an earlier ironpool added to $QEMU_CONF: QEMU runs as libvirt-qemu"
    echo "    with dynamic ownership again, the distribution's defaults"
    changed=1
  fi
fi

if [ -c "$DEV_KVM" ] && getent group "$KVM_GROUP" >/dev/null; then
  kvm_group=$(stat -c %G "$DEV_KVM")
  kvm_mode=$(stat -c %a "$DEV_KVM")
  if [ "$kvm_group" != "$KVM_GROUP" ] || [ $((8#$kvm_mode & 8#060)) -ne $((8#060)) ]; then
    if [ -n "$why_host" ]; then
      echo "==> $DEV_KVM is $kvm_group, mode $kvm_mode: QEMU's user (group $KVM_GROUP) cannot use KVM and"
      echo "    guests run emulated. Left as it is ($why_host); udev normally gives it to group $KVM_GROUP."
    else
      chgrp "$KVM_GROUP" "$DEV_KVM"
      chmod 0660 "$DEV_KVM"
      echo "==> $DEV_KVM given to group $KVM_GROUP (0660), as udev does on a host: this container has no udev"
    fi
  fi
fi

if [ -n "$why_host" ]; then
  echo "==> libvirt: this host's own configuration is used, nothing changed ($why_host)"
fi
[ "$changed" -eq 0 ] || exit 10
