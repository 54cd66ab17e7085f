"""A run from Python is as quiet as ``fedprune train`` unless ``verbose=True``
(:func:`fedprune.quiet.quiet_run`): TensorFlow's C++ log lines stay off stderr whether the run
imports TensorFlow or you did before importing fedprune; fedprune's own lines and progress
bars pass, at once; ``verbose=True`` lets TensorFlow's lines through where the run imports it.
A whole run from Python with TensorFlow imported first is in test_script_from_docs.py."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from fedprune import quiet

NATIVE = b"2026-12-02 14:47:07.731749: I tensorflow/core/grappler/devices.cc:66] GPUs: 0\n"
GUARD = (
    b"2026-12-02 14:47:07.1: I tensorflow/core/platform/cpu_feature_guard.cc:182] This binary is "
    b"optimized.\nTo enable the following instructions: AVX2, rebuild TensorFlow.\n"
)
ABSL = b"I0000 00:00:1700000000.123456  4242 grpc_server.cc:45] Server started\n"


def test_native_lines_are_dropped_and_everything_else_passes(capfd):
    with quiet.native_lines_filtered():
        os.write(2, NATIVE)
        os.write(2, b"fedprune: note: kept\n")
        os.write(2, GUARD)
        os.write(2, b"To enable this, not after a native line: kept\n")
        os.write(2, ABSL)
        os.write(2, b"\rrounds:  50%|#####     | 1/2")  # a progress bar, no newline
        os.write(2, b"\rrounds: 100%|##########| 2/2\n")
    err = capfd.readouterr().err
    assert err == (
        "fedprune: note: kept\nTo enable this, not after a native line: kept\n"
        "\rrounds:  50%|#####     | 1/2\rrounds: 100%|##########| 2/2\n"
    )


def test_a_failing_run_shows_the_native_lines_it_hid(capfd):
    with pytest.raises(RuntimeError), quiet.native_lines_filtered():
        os.write(2, NATIVE)
        raise RuntimeError("crash")
    assert capfd.readouterr().err == NATIVE.decode()


def test_an_error_fedprune_explains_shows_nothing_more(capfd):
    from fedprune.errors import ConfigError

    with pytest.raises(ConfigError), quiet.native_lines_filtered():
        os.write(2, NATIVE)
        raise ConfigError("clusters=9 is above the clients")
    assert capfd.readouterr().err == ""


def _stderr(code: str, **env: str) -> str:
    base = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    done = subprocess.run(
        [sys.executable, "-c", code],
        env={**base, "TF_ENABLE_ONEDNN_OPTS": "1", **env},  # TF then logs an INFO line
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stderr


IMPORT_IN_RUN = (
    "import fedprune\n"
    "from fedprune.quiet import quiet_run\n"
    "with quiet_run(verbose={verbose}):\n"
    "    import tensorflow\n"
)


@pytest.mark.slow
def test_a_run_that_imports_tensorflow_shows_its_lines_only_when_verbose():
    assert "oneDNN custom operations are on" in _stderr(IMPORT_IN_RUN.format(verbose=True))
    hidden = _stderr(IMPORT_IN_RUN.format(verbose=False))
    assert not [line for line in hidden.splitlines() if quiet.NATIVE_LINE.match(line.encode())]


@pytest.mark.slow
def test_tensorflow_imported_before_fedprune_is_filtered_during_a_run():
    code = (
        "import os, sys\n"
        "import tensorflow\n"
        "import fedprune\n"
        "from fedprune import quiet\n"
        "print('filtered' if quiet._tf_lines_reach_stderr() else 'not', file=sys.stderr)\n"
        f"with quiet.quiet_run(verbose=False):\n"
        f"    os.write(2, {NATIVE!r})\n"
        "print('after', file=sys.stderr)\n"
    )
    err = _stderr(code).splitlines()
    assert err[-2:] == ["filtered", "after"]  # the line written in the run was dropped
