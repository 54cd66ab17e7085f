"""Build a TFLite Micro project on the host and run it, with the TFLM objects compiled once.

``build_project(folder, tflm_dir)`` runs the project's own ``Makefile`` twice: ``make lib``,
which compiles the TFLM sources the model needs (its op set) into an object folder shared by
every project built from the same TFLM tree (path and every file's size and time) with the
same compiler and flags, and archives them into ``libtflm.a`` for that op set; then ``make
TFLM_LIB=<archive>`` in the project, and runs ``main``. A project with another op set compiles
only the sources it adds (an int8-float-head model after an int8 one: the QUANTIZE and
DEQUANTIZE kernels); the same op set again reuses its archive. The cache lives in
``<fedprune cache>/tflm/`` (``$FEDPRUNE_CACHE_DIR`` or ``~/.cache/fedprune``) unless
``cache_dir`` says otherwise: ``objects-<key>/`` per tree, compiler and flags, ``<key>/`` per op
set besides.
"""

from __future__ import annotations

import dataclasses
import fcntl
import hashlib
import os
import shutil
import subprocess
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from edge_export.micro.host import MATCHED_LINE, WINDOW_LINE
from edge_export.micro.sources import CXX_FLAGS, INCLUDE_DIRS, LIBS, LINK_FLAGS
from edge_export.micro.sources import OPTIMIZATION_FLAGS as OPT_FLAGS

JOBS = 2
# what the generated Makefile reads from the environment too
MAKE_VARIABLES = (
    "TFLM_DIR", "TFLM_LIB", "BUILD_DIR", "OPTFLAGS", "CXXFLAGS", "CFLAGS", "LDFLAGS", "TARGET",
    "KERNELS", "CMSIS_DIR", "CMSIS_NN_DIR", "CMSIS_CORE_DIR", "CMSIS_KERNELS_DIR",
    "CROSS_COMPILE", "FLASH_ORIGIN", "FLASH_SIZE", "RAM_ORIGIN", "RAM_SIZE", "STACK_SIZE",
    "SEMIHOSTING", "QEMU", "QEMU_MACHINE",
)  # fmt: skip


class MicroBuildError(RuntimeError):
    """A make, compile or link step failed; the message ends with its output."""


@dataclasses.dataclass(frozen=True)
class HostRun:
    """What ``main`` printed, read back."""

    output: str
    returncode: int
    outputs: list[np.ndarray]  # the raw outputs of every window, in order (int or float32)
    predicted: list[int]
    matched: int | None
    total: int | None


@dataclasses.dataclass(frozen=True)
class BuildResult:
    run: HostRun
    library: Path  # the cached libtflm.a
    library_seconds: float  # make lib (nothing to do when cached)
    program_seconds: float  # compile and link main against it
    library_was_cached: bool  # every object was already in the cache


def default_cache_dir() -> Path:
    """``<fedprune cache>/tflm``."""
    from fedprune.data.cache import cache_dir

    return cache_dir() / "tflm"


def _scores(words: list[str]) -> np.ndarray:
    """A window's printed outputs: integers, or float32 probabilities (``%.9g``: exact)."""
    if all(word.lstrip("-").isdigit() for word in words):
        return np.array([int(word) for word in words])
    return np.array([float(word) for word in words], np.float32)


def read_host_run(output: str, returncode: int = 0) -> HostRun:
    """``main``'s printed lines as outputs per window, predicted classes and the match count."""
    outputs, predicted = [], []
    for line in output.splitlines():
        match = WINDOW_LINE.match(line)
        if match:
            outputs.append(_scores(match.group(2).split()))
            predicted.append(int(match.group(3)))
    matched = MATCHED_LINE.search(output)
    return HostRun(
        output=output,
        returncode=returncode,
        outputs=outputs,
        predicted=predicted,
        matched=int(matched.group(1)) if matched else None,
        total=int(matched.group(2)) if matched else None,
    )


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise MicroBuildError(f"{name} not found: install it to build TFLite Micro on the host")
    return path


def _run(command: Sequence[str], cwd: Path | None = None, env: dict | None = None) -> str:
    result = subprocess.run(
        list(command), cwd=cwd, env=env, capture_output=True, text=True, check=False
    )
    if result.returncode != 0:
        output = (result.stdout + result.stderr)[-8000:]
        raise MicroBuildError(f"{' '.join(command)} failed (exit {result.returncode}):\n{output}")
    return result.stdout


def _make_env() -> dict:
    """The environment for make, without variables the project's Makefile reads."""
    env = dict(os.environ)
    for name in MAKE_VARIABLES:
        env.pop(name, None)
    return env


def tree_fingerprint(tflm_dir: Path) -> str:
    """A hash of the tree's path and every file's relative path, size and modification time."""
    digest = hashlib.sha256(str(tflm_dir.resolve()).encode())
    for root, dirs, files in os.walk(tflm_dir):
        dirs.sort()
        for name in sorted(files):
            path = Path(root) / name
            stat = path.stat()
            digest.update(
                f"{path.relative_to(tflm_dir)}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode()
            )
    return digest.hexdigest()


def cache_keys(
    project: Path, tflm_dir: Path, variables: Sequence[str] = (), trees: Sequence[Path] = ()
) -> tuple[str, str]:
    """The cache keys of a project's TFLM build: (objects: trees, compiler and flags; archive:
    those and the op set's sources). ``variables``: make variables of the build
    (``TARGET=cortex-m4``, ``CMSIS_DIR=...``); ``trees``: source folders besides the TFLM tree."""
    make = _tool("make")
    config = _run([make, "-s", "-C", str(project), f"TFLM_DIR={tflm_dir}", *variables,
                   "tflm-config"], env=_make_env())  # fmt: skip
    flags, sources = (config.splitlines() + [""])[:2]
    compiler = flags.split()[0]
    version = _run([compiler, "--version"]).splitlines()[0]
    objects = hashlib.sha256()
    fingerprints = [tree_fingerprint(Path(tree)) for tree in (tflm_dir, *trees)]
    for part in (*fingerprints, version, flags):
        objects.update(part.encode() + b"\0")
    archive = objects.copy()
    archive.update(sources.encode() + b"\0")
    return objects.hexdigest()[:16], archive.hexdigest()[:16]


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``path`` (created if missing): one build per cache entry."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def tflm_library(
    project: Path,
    tflm_dir: Path,
    cache_dir: Path | None = None,
    jobs: int = JOBS,
    variables: Sequence[str] = (),
    trees: Sequence[Path] = (),
) -> tuple[Path, float, bool]:
    """The project's TFLM sources (and, for ``KERNELS=cmsis-nn``, CMSIS-NN's) compiled into the
    shared object folder (only what is not there yet) and archived as
    ``<cache>/<key>/libtflm.a``: (archive, seconds, whether that archive was there already).
    ``variables`` and ``trees`` as for :func:`cache_keys`."""
    tflm_dir = Path(tflm_dir).resolve()
    project = Path(project).resolve()
    cache = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    objects_key, archive_key = cache_keys(project, tflm_dir, variables, trees)
    objects = (cache / f"objects-{objects_key}").resolve()
    archive = (cache / archive_key / "libtflm.a").resolve()
    start = time.perf_counter()
    with _locked(objects.with_suffix(".lock")):
        cached = archive.exists()
        if not cached:
            # the object folder's own archive may hold another op set: make it anew
            (objects / "libtflm.a").unlink(missing_ok=True)
            make = [_tool("make"), "-C", str(project), f"TFLM_DIR={tflm_dir}"]
            _run([*make, *variables, f"BUILD_DIR={objects}", f"-j{jobs}", "lib"], env=_make_env())
            archive.parent.mkdir(parents=True, exist_ok=True)
            os.replace(objects / "libtflm.a", archive)  # complete, or not there at all
    return archive, time.perf_counter() - start, cached


def build_project(
    project: Path,
    tflm_dir: Path,
    cache_dir: Path | None = None,
    jobs: int = JOBS,
    timeout: float = 120,
) -> BuildResult:
    """Build ``project``'s ``main`` against the cached TFLM library of ``tflm_dir``, run it and
    read its output (a failing match is in the result, not an error)."""
    project = Path(project).resolve()
    library, library_seconds, cached = tflm_library(project, tflm_dir, cache_dir, jobs)
    make = [_tool("make"), "-C", str(project), f"TFLM_DIR={Path(tflm_dir).resolve()}"]
    start = time.perf_counter()
    _run([*make, f"-j{jobs}", f"TFLM_LIB={library}", "main"], env=_make_env())
    program_seconds = time.perf_counter() - start
    result = subprocess.run(
        [str(project / "main")], cwd=project, capture_output=True, text=True, timeout=timeout
    )
    return BuildResult(
        run=read_host_run(result.stdout + result.stderr, result.returncode),
        library=library,
        library_seconds=library_seconds,
        program_seconds=program_seconds,
        library_was_cached=cached,
    )


def compile_program(
    sources: Sequence[Path],
    include_dirs: Sequence[Path],
    tflm_dir: Path,
    library: Path,
    output: Path,
) -> Path:
    """Compile and link ``sources`` (with ``include_dirs``) against a TFLM ``library`` built by
    :func:`tflm_library`, with the same flags: a firmware of several projects' models."""
    tflm_dir = Path(tflm_dir).resolve()
    includes = [f"-I{d}" for d in include_dirs]
    includes += [f"-I{tflm_dir if d == '.' else tflm_dir / d}" for d in INCLUDE_DIRS]
    command = [_tool("g++"), *CXX_FLAGS, *OPT_FLAGS, *includes, *map(str, sources)]
    _run([*command, *LINK_FLAGS, "-o", str(output), str(library), *LIBS])
    return output
