"""One-shot federated clustering of your own table: Fed-HIRE and k-FED on UCI E. coli.

What a user with a table of objects spread over sites does:

1. read the table (``ecoli.data``: a sequence name, 7 numeric features and a localization
   site per line), here with numpy, not with fedprune's UCI reader, and z-score each feature;
2. spread the objects over 8 clients, each client holding mostly a few of the classes
   (per class, client shares drawn from a Dirichlet(0.5)), as sites would;
3. hand the arrays to fedprune (``fedprune.from_table``: objects, their client, and the
   classes for scoring only), cluster with Fed-HIRE and with k-FED into the 8 sites, and
   print each method's ARI, NMI and the bytes the clients uploaded.

Run ``python examples/fedhire_own_table.py --help``; ``--quick`` is the test suite's size.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import numpy as np


def read_ecoli(path: Path) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """(features (n, 7), class index (n,), class names in order of first appearance)."""
    rows = [line.split() for line in path.read_text().splitlines() if line.strip()]
    bad = [i for i, r in enumerate(rows) if len(r) != 9]
    if bad:
        raise SystemExit(f"{path}: line {bad[0] + 1} does not have 9 fields")
    names: list[str] = []
    for r in rows:
        if r[8] not in names:
            names.append(r[8])
    x = np.array([[float(v) for v in r[1:8]] for r in rows])
    y = np.array([names.index(r[8]) for r in rows])
    return x, y, names


def spread(y: np.ndarray, clients: int, alpha: float, seed: int) -> np.ndarray:
    """A client for every object: per class, the clients' shares ~ Dirichlet(alpha)."""
    rng = np.random.default_rng(seed)
    owner = np.empty(len(y), dtype=np.int64)
    for k in np.unique(y):
        members = rng.permutation(np.flatnonzero(y == k))
        shares = rng.dirichlet([alpha] * clients)
        cuts = (np.cumsum(shares)[:-1] * len(members)).astype(int)
        for client, part in enumerate(np.split(members, cuts)):
            owner[part] = client
    return owner


def default_table() -> Path:
    here = Path(__file__).resolve().parent
    root = Path(os.environ.get("FEDPRUNE_DATA_DIR", here.parent.parent / "shared" / "data"))
    return root / "uci_tabular" / "ecoli" / "ecoli.data"


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--table", type=Path, default=default_table(), help="ecoli.data")
    parser.add_argument("--out", type=Path, default=Path("runs/example-fedhire-own-table"))
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="k-FED only (tests)")
    args = parser.parse_args(argv)

    import fedprune as fp

    x, y, names = read_ecoli(args.table)
    x = (x - x.mean(axis=0)) / np.where(x.std(axis=0) > 0, x.std(axis=0), 1.0)
    owner = spread(y, args.clients, alpha=0.5, seed=args.seed)
    small = [c for c in range(args.clients) if np.sum(owner == c) < 2]
    keep = ~np.isin(owner, small)  # a client with fewer than 2 objects has nothing to cluster
    table = fp.from_table(x[keep], owner[keep], y[keep], name="ecoli")
    print(f"{len(x)} objects, {len(names)} classes, {len(np.unique(owner[keep]))} clients")
    outcome = {}
    for method in ("kfed",) if args.quick else ("fedhire", "kfed"):
        result = fp.build(method, table, k_star=len(names), seed=args.seed).run(
            args.out / method, progress=False
        )
        s = result.summary
        outcome[method] = {k: s[k] for k in ("ari", "nmi", "purity", "bytes_uploaded")}
    print(json.dumps(outcome, indent=2))
    return outcome


if __name__ == "__main__":
    main()
