"""The processors a TFLite Micro project builds for: the host, or a Cortex-M core.

A Cortex-M target names GCC's CPU flags (they go to the compiler *and* the linker: the link
picks newlib's multilib by them), the memory map its linker script uses and the QEMU board
that emulates it. The memory maps are those of the QEMU boards (Arm's MPS2/MPS3 FPGA images),
large enough for the test build with its test vectors; a real part's flash and RAM sizes
replace them (``FLASH_ORIGIN``, ``FLASH_SIZE``, ``RAM_ORIGIN``, ``RAM_SIZE`` make variables).

Interpretations: the Cortex-M33 and M55 boards (AN505, AN547) start in the Secure state, so
their images sit at the Secure aliases of the boards' memories. Kernels: ``cmsis-nn`` (Arm's
CMSIS-NN through TFLM's ``kernels/cmsis_nn/`` variants; the default for Cortex-M) or
``reference`` (TFLM's portable kernels; the only choice on the host).
"""

from __future__ import annotations

import dataclasses

HOST = "host"
CMSIS_NN = "cmsis-nn"
REFERENCE = "reference"
KERNELS = (CMSIS_NN, REFERENCE)


@dataclasses.dataclass(frozen=True)
class CortexM:
    """One Cortex-M core: GCC flags, the memory map, the QEMU board."""

    name: str  # the TARGET value: cortex-m4
    cpu_flags: tuple[str, ...]
    flash_origin: int
    flash_size: int
    ram_origin: int
    ram_size: int
    qemu_machine: str  # qemu-system-arm -machine
    board: str  # what the QEMU machine is, in words


CORTEX_M = {
    "cortex-m4": CortexM(
        "cortex-m4",
        ("-mcpu=cortex-m4", "-mthumb", "-mfloat-abi=hard", "-mfpu=fpv4-sp-d16"),
        0x00000000, 0x400000, 0x20000000, 0x400000,
        "mps2-an386", "Arm MPS2 AN386 (Cortex-M4F)",
    ),
    "cortex-m33": CortexM(
        "cortex-m33",
        ("-mcpu=cortex-m33", "-mthumb", "-mfloat-abi=hard", "-mfpu=fpv5-sp-d16"),
        0x10000000, 0x400000, 0x38000000, 0x200000,
        "mps2-an505", "Arm MPS2 AN505 (Cortex-M33)",
    ),
    "cortex-m55": CortexM(
        "cortex-m55",
        ("-mcpu=cortex-m55", "-mthumb", "-mfloat-abi=hard"),
        0x10000000, 0x80000, 0x30000000, 0x80000,
        "mps3-an547", "Arm MPS3 AN547 (Cortex-M55)",
    ),
}  # fmt: skip
TARGETS = (HOST, *CORTEX_M)

# the stack the linker script reserves: these programs use 1.3-1.6 KB (measured under QEMU),
# TFLM kernels' stack use grows with other models' shapes, so several times that
STACK_BYTES = 8192
# a Cortex-M clock to turn instructions into a latency estimate (a common Cortex-M4 part's)
ESTIMATE_CLOCK_MHZ = 80
