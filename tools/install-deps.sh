#!/usr/bin/env bash
# Installs the Debian packages cuff needs. Idempotent: installs only what is missing.
#   tools/install-deps.sh          build and run (libbluetooth-dev for the BlueZ target, libmosquitto-dev for --publish)
#   tools/install-deps.sh --test   also what the tests need (schema validator, tshark, rsvg-convert for the plot tests, PostgreSQL's server for the store tests, mosquitto and its clients for the MQTT tests, the VM test's qemu/kernel/BlueZ)
set -euo pipefail
pkgs=(libbluetooth-dev pkg-config libsqlite3-dev libmosquitto-dev)
if [ "${1:-}" = --test ]; then
  # postgresql: the tests run its binaries (/usr/lib/postgresql/N/bin) in a cluster of their own; openssl makes its test certificate.
  # dbus-daemon: the D-Bus tests run a private bus.
  # mosquitto, mosquitto-clients: the MQTT tests start a broker of their own and read it with mosquitto_sub.
  pkgs+=(python3 python3-jsonschema tshark librsvg2-bin postgresql openssl dbus-daemon mosquitto mosquitto-clients)
  if [ "${CUFF_VM_TEST:-1}" != 0 ]; then
    pkgs+=(qemu-system-x86 linux-image-amd64 busybox-static bluez bluez-test-tools python3-dbus python3-gi)
  fi
fi
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=; [ "$(id -u)" = 0 ] || SUDO=sudo
  echo "installing: ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi
# The validator needs jsonschema; Debian's python3-jsonschema provides it for /usr/bin/python3.
if [ "${1:-}" = --test ] && ! python3 -c 'import jsonschema' 2>/dev/null; then
  python3 -m pip install -q jsonschema || true
fi
