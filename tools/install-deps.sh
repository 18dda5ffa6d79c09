#!/usr/bin/env bash
# Installs the Debian packages cuff's build and tests need (idempotent; skips when present).
set -euo pipefail
pkgs=(libbluetooth-dev pkg-config libsqlite3-dev python3-jsonschema tshark)
if [ "${CUFF_VM_TEST:-1}" != 0 ]; then
  pkgs+=(qemu-system-x86 linux-image-amd64 busybox-static bluez bluez-test-tools)
fi
missing=()
for p in "${pkgs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=; [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi
