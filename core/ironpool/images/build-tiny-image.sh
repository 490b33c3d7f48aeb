#!/usr/bin/env bash
# Build the tiny bootable image used by tests and the demo:
#   OUTDIR/tiny/kernel   vmlinuz of Debian's cloud kernel (virtio, serial built in)
#   OUTDIR/tiny/initrd   a busybox initramfs: /init (tiny/init beside this script) prints to the serial
#                        console, brings NICs up by DHCP and runs dropbear for root's Ignition SSH keys
#   OUTDIR/tiny/cmdline  the kernel command line
# The downloaded kernel package is cached in $IRONPOOL_CACHE (default /var/cache/ironpool), so a
# second build needs no network. Needs: apt-get, dpkg, cpio, gzip, busybox-static, dropbear-bin.
set -euo pipefail

OUTDIR=${1:?usage: build-tiny-image.sh OUTDIR}
CACHE=${IRONPOOL_CACHE:-/var/cache/ironpool}
NAME=tiny
BUSYBOX=/bin/busybox
DROPBEAR=/usr/sbin/dropbear
GUEST=$(cd "$(dirname "${BASH_SOURCE[0]}")/tiny" && pwd)

mkdir -p "$CACHE" "$OUTDIR"
OUTDIR=$(cd "$OUTDIR" && pwd)
DEST="$OUTDIR/$NAME"
# An image is rebuilt when this script or the guest's files change; concurrent builds take turns.
STAMP=$(cat "${BASH_SOURCE[0]}" "$GUEST"/* | sha256sum | cut -d' ' -f1)
exec 9>"$OUTDIR/.build-$NAME.lock"
flock 9
if [ -s "$DEST/kernel" ] && [ -s "$DEST/initrd" ] && [ "$(cat "$DEST/STAMP" 2>/dev/null)" = "$STAMP" ]; then
  echo "$DEST"
  exit 0
fi

if ! "$BUSYBOX" --list >/dev/null 2>&1 || ! { ldd "$BUSYBOX" 2>&1 || true; } | grep -q 'not a dynamic'; then
  echo "build-tiny-image: needs the static busybox from Debian's busybox-static package" >&2
  exit 1
fi
if [ ! -x "$DROPBEAR" ]; then
  echo "build-tiny-image: needs $DROPBEAR from Debian's dropbear-bin package" >&2
  exit 1
fi

# The newest cloud kernel: the meta-package depends on exactly one versioned image package.
kernel_deb=$(ls "$CACHE"/linux-image-*-cloud-amd64_*.deb 2>/dev/null | sort -V | tail -n1 || true)
if [ -z "$kernel_deb" ]; then
  pkg=$(apt-cache depends linux-image-cloud-amd64 2>/dev/null \
        | awk '/Depends: linux-image-[0-9].*-cloud-amd64$/ {print $2; exit}')
  if [ -z "$pkg" ]; then
    apt-get update -qq
    pkg=$(apt-cache depends linux-image-cloud-amd64 \
          | awk '/Depends: linux-image-[0-9].*-cloud-amd64$/ {print $2; exit}')
  fi
  [ -n "$pkg" ] || { echo "build-tiny-image: no linux-image-*-cloud-amd64 package found" >&2; exit 1; }
  # apt warns that _apt cannot write the cache dir and downloads as root instead; that is fine.
  (cd "$CACHE" && apt-get download -q "$pkg" 2>&1 >/dev/null | grep -v 'unsandboxed' >&2 || true)
  kernel_deb=$(ls "$CACHE"/"$pkg"_*.deb | tail -n1)
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
dpkg-deb -x "$kernel_deb" "$work/kpkg"
vmlinuz=$(ls "$work"/kpkg/boot/vmlinuz-* | head -n1)

root="$work/root"
mkdir -p "$root"/{bin,dev,proc,sys,tmp,run,etc/dropbear,var/log,root/.ssh}
chmod 0700 "$root/root" "$root/root/.ssh"
cp "$BUSYBOX" "$root/bin/busybox"
for applet in $("$BUSYBOX" --list); do
  [ "$applet" = busybox ] || ln -s busybox "$root/bin/$applet"
done
# dropbear and the shared libraries it links (kept at their paths, so the loader finds them).
cp "$DROPBEAR" "$root/bin/dropbear"
for lib in $(ldd "$DROPBEAR" | grep -o '/[^ ]*'); do
  mkdir -p "$root$(dirname "$lib")"
  cp -L "$lib" "$root$lib"
done
printf 'root:x:0:0:root:/root:/bin/sh\n' >"$root/etc/passwd"
printf 'root:x:0:\n' >"$root/etc/group"
printf '/bin/sh\n' >"$root/etc/shells"
install -m 0755 "$GUEST/init" "$root/init"
install -m 0755 "$GUEST/udhcpc.script" "$root/etc/udhcpc.script"
install -m 0644 "$GUEST/ignition-keys.awk" "$root/etc/ignition-keys.awk"
# The cloud kernel builds virtio and the ACPI button as modules; ship them, load order fixed here
# because the package carries no modules.dep (depmod runs at install time).
kdir=$(ls -d "$work"/kpkg/lib/modules/*/kernel | head -n1)
mkdir -p "$root/lib/modules"
for m in virtio/virtio virtio/virtio_ring virtio/virtio_pci_modern_dev virtio/virtio_pci_legacy_dev \
         virtio/virtio_pci block/virtio_blk acpi/button input/evdev firmware/qemu_fw_cfg; do
  cp "$kdir/drivers/$m.ko" "$root/lib/modules/"
done
for m in net/core/failover drivers/net/net_failover drivers/net/virtio_net fs/efivarfs/efivarfs; do
  cp "$kdir/$m.ko" "$root/lib/modules/"
done
# busybox acpid runs /etc/acpi/<event> on the ACPI power button: a clean, immediate power-off.
mkdir -p "$root/etc/acpi/PWRF"
printf '#!/bin/sh\necho "ironpool-tiny-image: power button, powering off"\npoweroff -f\n' \
  >"$root/etc/acpi/PWRF/00000080"
chmod 0755 "$root/etc/acpi/PWRF/00000080"

stage="$work/out"
mkdir -p "$stage"
cp "$vmlinuz" "$stage/kernel"
(cd "$root" && find . -print0 | cpio --null -o -H newc --quiet) | gzip -9 >"$stage/initrd"
# no_timer_check: early in boot the kernel busy-waits a few timer ticks and gives up on the IO-APIC
# timer ("MP-BIOS bug: 8254 timer not connected") if the PIT's interrupts did not arrive; an emulated
# vCPU on a crowded host can spin through that wait before QEMU's main loop raises them (the Debian
# images skip the check for the same reason).
echo "console=ttyS0 quiet panic=-1 no_timer_check" >"$stage/cmdline"
basename "$kernel_deb" >"$stage/SOURCE"
echo "$STAMP" >"$stage/STAMP"
# Replace the previous image in one step (running guests keep their open kernel/initrd files).
rm -rf "$DEST.old"
[ -d "$DEST" ] && mv "$DEST" "$DEST.old"
cp -a "$stage" "$DEST.new" && mv "$DEST.new" "$DEST"
rm -rf "$DEST.old"
echo "$DEST"
