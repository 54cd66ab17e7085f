"""Cross-build a TFLite Micro project for a Cortex-M core, run it under QEMU, measure it.

``measure_cortex_m(project, tflm_dir, cmsis_dir, "cortex-m4", "cmsis-nn")`` builds the
project's ``test.elf`` and ``firmware.elf`` with its own Makefile against a TFLM + CMSIS-NN
archive cached like the host's (:func:`edge_export.micro.build.tflm_library`: objects per
trees, compiler and flags, an archive per op set), runs ``test.elf`` on the target's QEMU board
with semihosting and ``-icount shift=0``, and reads back:

* the outputs of every test vector and ``matched K of N`` (as the host binary prints them);
* **instructions per inference**: ``main`` times each ``Invoke`` with SysTick, which under
  ``-icount shift=0`` advances a fixed number of instructions per tick; a calibration loop of
  a known instruction count gives that number. The mean over the test vectors. Instructions
  are not cycles: a Cortex-M4 takes 1-3 cycles for loads, branches and multiply-accumulates,
  and flash wait states add more; :func:`latency_ms` is a lower bound at one cycle each;
* **flash and RAM** of the deployment build (``firmware.elf``, no test vectors) from
  ``arm-none-eabi-size -A``: flash = code, read-only data and ``.data``'s initial values; RAM
  = ``.data`` + ``.bss`` (the tensor arena is in ``.bss``) + the reserved stack; each split
  into the model (the flatbuffer array in flash, the arena in RAM) and the runtime.
"""

from __future__ import annotations

import dataclasses
import re
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from edge_export.micro.build import (
    JOBS,
    HostRun,
    MicroBuildError,
    _make_env,
    _run,
    read_host_run,
    tflm_library,
)
from edge_export.micro.targets import (
    CMSIS_NN,
    CORTEX_M,
    ESTIMATE_CLOCK_MHZ,
    HOST,
    KERNELS,
    TARGETS,
)
from fedprune.errors import ConfigError

CROSS = "arm-none-eabi-"
QEMU = "qemu-system-arm"
CLOCK_LINE = re.compile(r"^clock: (\d+) instructions in (\d+) ticks$", re.M)
INVOKE_LINE = re.compile(r"^invoke: (\d+) ticks for (\d+) windows$", re.M)
CLASSES_LINE = re.compile(r"^test vectors per class:(.*)$", re.M)
_FLASH_SECTIONS = (".vectors", ".text", ".ARM.extab", ".ARM.exidx", ".init_array", ".data")
_RAM_SECTIONS = (".data", ".bss", ".stack")


def missing_tools() -> list[str]:
    """The cross toolchain and QEMU programs this machine lacks."""
    tools = [f"{CROSS}gcc", f"{CROSS}g++", f"{CROSS}size", f"{CROSS}nm", QEMU, "make"]
    return [tool for tool in tools if shutil.which(tool) is None]


@dataclasses.dataclass(frozen=True)
class Footprint:
    """Flash and RAM of one ELF image, in bytes."""

    flash: int  # code + read-only data + .data's initial values
    ram: int  # .data + .bss + stack
    model: int  # the flatbuffer array (in flash)
    arena: int  # the tensor arena (in RAM, in .bss)
    stack: int

    @property
    def runtime_flash(self) -> int:
        return self.flash - self.model

    @property
    def runtime_ram(self) -> int:
        return self.ram - self.arena


@dataclasses.dataclass(frozen=True)
class CortexMResult:
    target: str
    kernels: str
    run: HostRun  # test.elf's output under QEMU, read back
    instructions_per_inference: float
    firmware: Footprint  # the deployment build
    test: Footprint  # the test build (with test vectors and printf)
    class_counts: dict[str, int]  # what main printed per class
    build_dir: Path


def latency_ms(instructions: float, clock_mhz: float = ESTIMATE_CLOCK_MHZ) -> float:
    """Milliseconds at ``clock_mhz`` if every instruction took one cycle (a lower bound)."""
    return instructions / (clock_mhz * 1e3)


def _check(target: str, kernels: str) -> None:
    if target not in CORTEX_M:
        raise MicroBuildError(f"target must be one of {', '.join(CORTEX_M)}, not {target!r}")
    if kernels not in KERNELS:
        raise MicroBuildError(f"kernels must be one of {', '.join(KERNELS)}, not {kernels!r}")


def make_variables(target: str, kernels: str, cmsis_dir: Path | None) -> list[str]:
    """The make variables of one Cortex-M build."""
    variables = [f"TARGET={target}", f"KERNELS={kernels}"]
    if kernels == CMSIS_NN:
        if cmsis_dir is None:
            raise MicroBuildError("CMSIS-NN kernels need the CMSIS folder (cmsis_dir)")
        variables.append(f"CMSIS_DIR={Path(cmsis_dir).resolve()}")
    return variables


def cross_build(
    project: Path,
    tflm_dir: Path,
    cmsis_dir: Path | None,
    target: str = "cortex-m4",
    kernels: str = CMSIS_NN,
    cache_dir: Path | None = None,
    jobs: int = JOBS,
) -> Path:
    """``test.elf`` and ``firmware.elf`` of ``project`` for ``target``; returns their folder."""
    _check(target, kernels)
    project = Path(project).resolve()
    variables = make_variables(target, kernels, cmsis_dir)
    trees = [Path(cmsis_dir).resolve()] if kernels == CMSIS_NN else []
    library, _, _ = tflm_library(project, tflm_dir, cache_dir, jobs, variables, trees)
    build_dir = project / "build" / f"{target}-{kernels}"
    tree = Path(tflm_dir).resolve()
    make = [shutil.which("make") or "make", "-C", str(project), f"TFLM_DIR={tree}"]
    _run([*make, *variables, f"-j{jobs}", f"TFLM_LIB={library}", "all"], env=_make_env())
    return build_dir


def run_qemu(elf: Path, target: str, timeout: float = 600) -> HostRun:
    """``elf`` on the target's QEMU board (semihosting, ``-icount shift=0``), read back."""
    command = [
        shutil.which(QEMU) or QEMU, "-machine", CORTEX_M[target].qemu_machine,
        "-display", "none", "-monitor", "none", "-serial", "null",
        "-semihosting-config", "enable=on,target=native", "-icount", "shift=0",
        "-kernel", str(elf),
    ]  # fmt: skip
    result = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    return read_host_run(result.stdout + result.stderr, result.returncode)


def instructions_per_inference(output: str) -> float:
    """The mean instructions of one ``Invoke`` from ``main``'s clock and invoke lines."""
    clock, invoke = CLOCK_LINE.search(output), INVOKE_LINE.search(output)
    if clock is None or invoke is None:
        raise MicroBuildError(f"no clock or invoke line in the program's output:\n{output[-2000:]}")
    instructions, ticks = int(clock.group(1)), int(clock.group(2))
    invoke_ticks, windows = int(invoke.group(1)), int(invoke.group(2))
    if ticks <= 0 or windows <= 0:
        raise MicroBuildError(f"cannot time: {clock.group(0)!r}, {invoke.group(0)!r}")
    return invoke_ticks * instructions / ticks / windows


def class_counts(output: str) -> dict[str, int]:
    """``main``'s ``test vectors per class:`` line as {label: count}."""
    line = CLASSES_LINE.search(output)
    if line is None:
        return {}
    pairs = (item.strip().rsplit(" ", 1) for item in line.group(1).split(",") if item.strip())
    return {label: int(count) for label, count in pairs}


def _symbol_bytes(elf: Path, pattern: str) -> int:
    """The total size of the symbols whose names match ``pattern`` (``nm -S``)."""
    listing = _run([f"{CROSS}nm", "-S", "-C", str(elf)])
    total = 0
    for line in listing.splitlines():
        parts = line.split(maxsplit=3)
        if len(parts) == 4 and re.fullmatch(pattern, parts[3]):
            total += int(parts[1], 16)
    return total


def footprint(elf: Path, ident: str) -> Footprint:
    """Flash and RAM of ``elf`` (``arm-none-eabi-size -A``), the model array and the arena."""
    sections = {}
    for line in _run([f"{CROSS}size", "-A", str(elf)]).splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[0].startswith(".") and parts[1].isdigit():
            sections[parts[0]] = int(parts[1])
    return Footprint(
        flash=sum(sections.get(name, 0) for name in _FLASH_SECTIONS),
        ram=sum(sections.get(name, 0) for name in _RAM_SECTIONS),
        model=_symbol_bytes(elf, f"{ident}_model"),
        arena=_symbol_bytes(elf, r"(\(anonymous namespace\)::)?tensor_arena"),
        stack=sections.get(".stack", 0),
    )


def measure_cortex_m(
    project: Path,
    tflm_dir: Path,
    cmsis_dir: Path | None,
    ident: str,
    target: str = "cortex-m4",
    kernels: str = CMSIS_NN,
    cache_dir: Path | None = None,
    jobs: int = JOBS,
) -> CortexMResult:
    """Cross-build, run under QEMU and measure (see the module's docstring)."""
    build_dir = cross_build(project, tflm_dir, cmsis_dir, target, kernels, cache_dir, jobs)
    run = run_qemu(build_dir / "test.elf", target)
    if run.returncode != 0 and run.matched is None:
        raise MicroBuildError(f"test.elf failed under QEMU (exit {run.returncode}):\n{run.output}")
    return CortexMResult(
        target=target,
        kernels=kernels,
        run=run,
        instructions_per_inference=instructions_per_inference(run.output),
        firmware=footprint(build_dir / "firmware.elf", ident),
        test=footprint(build_dir / "test.elf", ident),
        class_counts=class_counts(run.output),
        build_dir=build_dir,
    )


def report_fields(results: Sequence[CortexMResult]) -> dict:
    """The report entry's ``cortex_m`` slot of one target's builds: ``{target: {flash_bytes,
    ram_bytes, ... of the CMSIS-NN firmware (else the first build's), instructions: {kernels:
    count}, matched: {kernels: K}, test_vectors}}``."""
    slot: dict = {}
    for r in results:
        record = slot.setdefault(r.target, {"instructions": {}, "matched": {}})
        record["instructions"][r.kernels] = round(r.instructions_per_inference)
        record["matched"][r.kernels] = r.run.matched
        record["test_vectors"] = r.run.total
        if "flash_bytes" not in record or r.kernels == CMSIS_NN:
            record.update(
                kernels=r.kernels,
                flash_bytes=r.firmware.flash,
                flash_model_bytes=r.firmware.model,
                ram_bytes=r.firmware.ram,
                ram_arena_bytes=r.firmware.arena,
                stack_bytes=r.firmware.stack,
            )
    return {"cortex_m": slot}


@dataclasses.dataclass(frozen=True)
class MicroTarget:
    """What ``edge-export --micro`` builds each project for: ``target`` is the Makefile's
    default; with ``tflm_dir`` every project is also built and measured (a Cortex-M target:
    with CMSIS-NN and reference kernels, under QEMU; ``cmsis_dir`` holds CMSIS-NN)."""

    target: str = HOST
    tflm_dir: Path | None = None
    cmsis_dir: Path | None = None
    cache_dir: Path | None = None

    def check(self) -> None:
        """One :class:`ConfigError` naming the option, before any work."""
        if self.target not in TARGETS:
            raise ConfigError(f"--target must be one of {', '.join(TARGETS)}")
        if self.tflm_dir is None:
            if self.cmsis_dir is not None:
                raise ConfigError("--cmsis-dir needs --tflm-dir (the builds it is for)")
            return
        if not (Path(self.tflm_dir) / "tensorflow/lite/micro/micro_interpreter.h").is_file():
            raise ConfigError(f"--tflm-dir {self.tflm_dir} is not a TensorFlow Lite Micro tree")
        if self.target == HOST:
            return
        if (
            self.cmsis_dir is None
            or not (Path(self.cmsis_dir) / "cmsis_nn/Include/arm_nnfunctions.h").is_file()
        ):
            raise ConfigError(
                "--target cortex-m* with --tflm-dir needs --cmsis-dir: a folder with "
                "kernels/, cmsis_nn/ and cmsis/ (see docs/edge-export.md)"
            )
        missing = missing_tools()
        if missing:
            raise ConfigError(
                f"--target {self.target} with --tflm-dir needs {', '.join(missing)} "
                "(Debian: gcc-arm-none-eabi libnewlib-arm-none-eabi qemu-system-arm)"
            )

    def measure(self, project: Path, ident: str) -> dict:
        """The report fields of ``project``'s builds (none without ``tflm_dir``)."""
        if self.tflm_dir is None:
            return {}
        if self.target == HOST:
            from edge_export.micro.build import build_project

            run = build_project(project, self.tflm_dir, self.cache_dir).run
            return {"micro_host_matched": run.matched, "micro_host_test_vectors": run.total}
        results = [
            measure_cortex_m(
                project,
                self.tflm_dir,
                self.cmsis_dir,
                ident,
                self.target,
                kernels,
                self.cache_dir,
            )  # fmt: skip
            for kernels in KERNELS
        ]
        return report_fields(results)


def cortex_m_markdown(entries: Sequence[dict]) -> str:
    """What the budget's Cortex-M columns mean, per format and target: the largest firmware's
    flash and RAM split into model and runtime, the median instructions per inference per
    kernel set and what they give at :data:`ESTIMATE_CLOCK_MHZ`, the test vectors matched."""
    builds = [(e["format"], t, b) for e in entries for t, b in e.get("cortex_m", {}).items()]
    if not builds:
        return ""
    lines = [
        "\n| format | target | matched (per kernels) | flash KB: model + runtime "
        "| RAM KB: arena + runtime (with stack) | M instructions per inference (median) "
        f"| ms at {ESTIMATE_CLOCK_MHZ} MHz, 1 cycle per instruction |\n",
        "|---|---|---|---|---|---|---|\n",
    ]
    for key in dict.fromkeys((fmt, t) for fmt, t, _ in builds):
        group = [b for fmt, t, b in builds if (fmt, t) == key]
        flash = max(group, key=lambda b: b["flash_bytes"])
        ram = max(group, key=lambda b: b["ram_bytes"])
        kernels = list(dict.fromkeys(k for b in group for k in b["instructions"]))
        median = {k: float(np.median([b["instructions"][k] for b in group])) for k in kernels}
        matched = ", ".join(
            f"{k}: {sum(b['matched'].get(k) or 0 for b in group)}/"
            f"{sum(b['test_vectors'] or 0 for b in group)}"
            for k in kernels
        )
        lines.append(
            f"| {key[0]} | {key[1]} | {matched} "
            f"| {flash['flash_bytes'] / 1024:.1f}: {flash['flash_model_bytes'] / 1024:.1f} + "
            f"{(flash['flash_bytes'] - flash['flash_model_bytes']) / 1024:.1f} "
            f"| {ram['ram_bytes'] / 1024:.1f}: {ram['ram_arena_bytes'] / 1024:.1f} + "
            f"{(ram['ram_bytes'] - ram['ram_arena_bytes']) / 1024:.1f} "
            f"| {', '.join(f'{k}: {n / 1e6:.2f}' for k, n in median.items())} "
            f"| {', '.join(f'{k}: {latency_ms(n):.1f}' for k, n in median.items())} |\n"
        )
    lines.append(
        "\nCortex-M: flash and RAM are the deployment build's (firmware.elf: no test vectors; "
        "arm-none-eabi-size), with CMSIS-NN kernels. Instructions are counted by QEMU (-icount "
        "shift=0); they are not cycles: loads, branches and multiply-accumulates take 1-3 "
        "cycles on a Cortex-M4 and flash wait states add more, so the ms column is a lower "
        "bound.\n"
    )
    return "".join(lines)
