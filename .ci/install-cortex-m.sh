#!/bin/sh
# Install what the Cortex-M tests need (tests/edge_export/test_cortex_m.py): Debian's Arm
# cross compiler, newlib and its C++ library for it (the C++ headers TFLM includes), and
# QEMU's Arm system emulator. As root with apt, it runs apt-get update once and installs the
# four packages; anywhere else it prints one line and
# exits 0 (the host builds still run; the Cortex-M tests skip, saying what is missing).
set -eu
PACKAGES="gcc-arm-none-eabi libnewlib-arm-none-eabi libstdc++-arm-none-eabi-newlib qemu-system-arm"
if command -v arm-none-eabi-gcc >/dev/null 2>&1 && command -v qemu-system-arm >/dev/null 2>&1 \
    && [ -e /usr/lib/arm-none-eabi/newlib/libc_nano.a ] \
    && [ -d /usr/include/newlib/c++ ]; then
    echo "cortex-m: toolchain and QEMU already installed"
    exit 0
fi
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "cortex-m: not root or no apt-get; Cortex-M tests will skip (install: $PACKAGES)"
    exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends $PACKAGES >/dev/null
echo "cortex-m: installed $PACKAGES"
