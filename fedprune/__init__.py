"""fedprune: clustered, pruned federated learning on TensorFlow Federated, for edge devices.

Importing fedprune before TensorFlow turns TensorFlow's oneDNN CPU kernels on
(``TF_ENABLE_ONEDNN_OPTS=1``) unless the variable is already set. TF 2.14 turns them on by
itself only on CPUs with AVX-512 VNNI / BF16 / AMX; elsewhere (most laptops, AVX2-only AMD
EPYC) it leaves them off, and then grouped convolutions have no gradient. With oneDNN on,
stacked fine-tuning uses its fastest formulation on every x86-64 CPU, and TFF rounds are
faster too (``make bench``, DEVELOPERS.md). The variable is inherited by the TFF worker
processes. An explicit ``TF_ENABLE_ONEDNN_OPTS=0`` is respected; where TensorFlow was imported
before fedprune, the variable can no longer act, and stacked training probes the kernels and
falls back to one convolution per client with a one-line note
(:mod:`fedprune.engine.stacked`).
"""

import os
import sys

if "tensorflow" not in sys.modules:
    os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "1")

__version__ = "0.1.0"
