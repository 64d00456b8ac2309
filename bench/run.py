"""Side-by-side CPU benchmark: lammps-uma's engine vs fairchem-core's ASE calculator.

Same weights (a full-size UMA-S-1.1-shaped model with seeded random weights,
bench/make_model.py), same structures, one machine, one run.  Each measurement
runs in its own process (so peak memory is per case); fairchem and lammps-uma
alternate.  Writes a JSON file and prints a Markdown table.

usage: run.py [--sizes 64 256 1000] [--molecule] [--repeats 3] [--out results.json]
"""
import argparse
import json
import os
import subprocess
import sys

import numpy as np
from ase import Atoms
from ase.build import bulk
from ase.io import write

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import make_structures  # noqa: E402
ROOT = os.path.dirname(HERE)
CACHE = os.path.join(os.environ.get("UMA_CACHE", os.path.expanduser("~/.cache/lammps-uma")), "bench")
# Both engines get the same allocator settings (lammps-uma sets them itself;
# fairchem gets them through the environment).
ALLOC_ENV = {"MALLOC_MMAP_MAX_": "0", "MALLOC_TRIM_THRESHOLD_": str(2**36)}


def copper(n: int) -> Atoms:
    reps = {64: (2, 2, 4), 256: (4, 4, 4), 1000: (5, 5, 10), 2048: (8, 8, 8)}[n]
    atoms = bulk("Cu", "fcc", a=3.61, cubic=True).repeat(reps)
    atoms.positions += np.random.default_rng(n).uniform(-0.05, 0.05, atoms.positions.shape)
    return atoms


def alkane() -> Atoms:
    """C33H68, 101 atoms (bench/make_structures.py's molecule)."""
    symbols, positions = make_structures.alkane(33)
    atoms = Atoms(symbols, positions=positions)
    atoms.info.update(charge=0, spin=1)
    return atoms


def run(cmd, env_extra):
    env = dict(os.environ, **env_extra)
    out = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if out.returncode != 0:
        return {"error": (out.stderr or out.stdout).strip().splitlines()[-1:]}
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--sizes", type=int, nargs="*", default=[64, 256, 1000])
    p.add_argument("--molecule", action="store_true")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--out", default=os.path.join(CACHE, "results.json"))
    p.add_argument("--uma", default=os.path.join(ROOT, "build", "uma"))
    p.add_argument("--reference-ops", action="store_true",
                   help="also time lammps-uma with --edge-ops reference (the LibTorch composition)")
    a = p.parse_args()

    os.makedirs(CACHE, exist_ok=True)
    subprocess.run([sys.executable, os.path.join(HERE, "make_model.py"), CACHE], check=True,
                   capture_output=True)
    pt = os.path.join(CACHE, "uma-s-1p1-random.pt")
    st = os.path.join(CACHE, "uma-s-1p1-random.safetensors")

    cases = [(f"Cu bulk, {n} atoms", copper(n), "omat") for n in a.sizes]
    if a.molecule:
        cases.append(("C33H68 molecule, 101 atoms", alkane(), "omol"))
    results = []
    for name, atoms, task in cases:
        path = os.path.join(CACHE, name.split(",")[0].replace(" ", "_") + f"_{len(atoms)}.extxyz")
        write(path, atoms, format="extxyz")
        print(f"[bench] {name}", flush=True)
        fc = run([sys.executable, os.path.join(HERE, "fairchem_worker.py"), pt, path,
                  "--repeats", str(a.repeats), "--task", task], ALLOC_ENV)
        print(f"[bench]   fairchem: {json.dumps(fc.get('time_s', fc))}", flush=True)
        us = run([a.uma, "bench", st, path, "--repeats", str(a.repeats), "--task", task], {})
        print(f"[bench]   lammps-uma: {json.dumps(us.get('time_s', us))}", flush=True)
        ref = {}
        if a.reference_ops:
            ref = run([a.uma, "bench", st, path, "--repeats", str(a.repeats), "--task", task,
                       "--edge-ops", "reference"], {})
            print(f"[bench]   lammps-uma, reference ops: {json.dumps(ref.get('time_s', ref))}", flush=True)
        results.append({"case": name, "task": task, "fairchem": fc, "lammps_uma": us,
                        "lammps_uma_reference_ops": ref})
        with open(a.out, "w") as f:
            json.dump(results, f, indent=1)

    print("\n| case | edges | fairchem s (min/med/max) | lammps-uma s (min/med/max) | speed-up (median) "
          "| peak RSS fairchem / ours (GB) | model GFLOP/s | GEMM GFLOP/s | fraction of GEMM |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in results:
        fc, us = r["fairchem"], r["lammps_uma"]
        if "error" in fc or "error" in us:
            print(f"| {r['case']} | | {fc.get('error', '')} | {us.get('error', '')} | | | | | |")
            continue
        f, u = fc["time_s"], us["time_s"]
        print(f"| {r['case']} | {us['edges']} | {f['min']:.2f} / {f['median']:.2f} / {f['max']:.2f} | "
              f"{u['min']:.2f} / {u['median']:.2f} / {u['max']:.2f} | {f['median'] / u['median']:.2f}x | "
              f"{fc['peak_rss_mb'] / 1024:.1f} / {us['peak_rss_mb'] / 1024:.1f} | {us['model_gflops_per_s']:.0f} | "
              f"{us['gemm_gflops_per_s']:.0f} | {us['model_gflops_per_s'] / us['gemm_gflops_per_s']:.2f} |")
    print("\nEdge-sized storage allocated per evaluation (blocks of at least 32 values per edge slot), "
          "and all CPU storage:")
    print("\n| case | edge ops | s (median) | edge-sized MB | all MB |")
    print("|---|---|---|---|---|")
    for r in results:
        for label, key in (("lean", "lammps_uma"), ("reference", "lammps_uma_reference_ops")):
            us = r.get(key) or {}
            if "time_s" not in us:
                continue
            print(f"| {r['case']} | {label} | {us['time_s']['median']:.2f} | {us['edge_alloc_mb_per_eval']:.0f} | "
                  f"{us['alloc_mb_per_eval']:.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
