"""Writes a full-size UMA-S-1.1-shaped model with seeded random weights.

The checkpoint is built with fairchem's own classes (through
tests/reference/make_fixtures.py) and converted with tools/convert_checkpoint.py,
so fairchem and lammps-uma load identical weights.

usage: make_model.py OUTDIR   ->  OUTDIR/uma-s-1p1-random.pt, .safetensors
"""
import copy
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "reference"))
sys.path.insert(0, os.path.join(HERE, "..", "tools"))

import make_fixtures  # noqa: E402
import convert_checkpoint  # noqa: E402

# The uma-s-1p1 backbone (uma_architecture.md section 1.1), 32 experts.
UMA_S_1P1 = copy.deepcopy(make_fixtures.MODEL_SPECS["s1p1"])
UMA_S_1P1["num_experts"] = 32
UMA_S_1P1["num_distance_basis"] = 64
UMA_S_1P1["sizes"] = {"sphere_channels": 128, "hidden_channels": 128, "edge_channels": 128, "num_layers": 4}


def main() -> int:
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    pt = os.path.join(out, "uma-s-1p1-random.pt")
    st = os.path.join(out, "uma-s-1p1-random.safetensors")
    if not os.path.exists(st):
        make_fixtures.build_checkpoint("uma-s-1p1-random", UMA_S_1P1, seed=2026, path=pt)
        convert_checkpoint.convert(pt, st)
    print(pt)
    print(st)
    return 0


if __name__ == "__main__":
    sys.exit(main())
