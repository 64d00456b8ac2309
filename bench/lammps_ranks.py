#!/usr/bin/env python3
"""Multi-rank MD benchmark of pair_style uma (not a test).  Side by side in one run:

(a) Cu crystals of 500, 2000 and 4000 atoms with the shipped demo model (fp32,
    2 blocks), one thread per rank: 1 rank against 2 ranks with the halo
    exchange and 2 ranks with the former deep ghost shell (pair_style uma ... ghosts deep):
    steps/s (LAMMPS's Performance line), ghost atoms in each rank's graph and
    bytes the halo exchange packs per step (both from `compute pair uma`), and
    the peak RSS of the largest rank.
(b) computed, not run: ghost-to-owned ratio and bytes communicated per step
    against atoms per rank (10^3 .. 10^6) for the full-size UMA-S-1.1 shape,
    with the ghost rules the style uses (halo: LAMMPS's cutoff + skin box;
    deep: atoms within (layers + 1) x cutoff of the owned atoms' box).

usage: bench/lammps_ranks.py ROOT [--steps N] [--out FILE]   (scripts/bench.sh --lammps --ranks)
"""
import argparse
import json
import math
import os
import re
import time

from lammps_md import CU_NVE, DEMO, lammps

HERE = os.path.dirname(os.path.abspath(__file__))
SHAPE = os.path.join(HERE, "uma-s-1p1-shape.json")

CELLS = {500: (5, 5, 5), 2000: (5, 10, 10), 4000: (10, 10, 10)}


def run(root, workdir, name, text, ranks, env=""):
    perf, log = lammps(root, workdir, name, text, 1, ranks, env)
    last = [l.split() for l in log.splitlines() if re.match(r"^\s*\d+\s+-?\d", l)][-1]
    return {"timesteps_per_s": perf["timesteps_per_s"], "ghosts_per_rank": float(last[2]) / ranks,
            "halo_bytes_per_step_per_rank": float(last[3]) / ranks,
            "peak_rss_mb_largest_rank": perf["peak_rss_mb"]}


def scaling_table():
    """Ghost atoms per owned atom and bytes communicated per step and rank, for
    cubic subdomains of fcc Cu in a 3-d decomposition (ghosts on all six sides)."""
    shape = json.load(open(SHAPE))
    bb = shape.get("backbone", shape)
    rc, layers = bb["cutoff"], bb["num_layers"]
    width = (bb["lmax"] + 1) ** 2 * bb["sphere_channels"]
    skin, density = 2.0, 4 / 3.615 ** 3
    rows = []
    for owned in (1e3, 1e4, 1e5, 1e6):
        side = (owned / density) ** (1 / 3)
        # halo: every LAMMPS ghost, a box of cutoff + skin around the subdomain
        halo_ghosts = density * ((side + 2 * (rc + skin)) ** 3 - side ** 3)
        # deep: LAMMPS ghosts out to (layers + 1) x cutoff + skin; the graph
        # takes those within (layers + 1) x cutoff of the owned atoms' box
        r = (layers + 1) * rc
        deep_graph = density * (6 * side ** 2 * r + 3 * math.pi * side * r ** 2 + 4 / 3 * math.pi * r ** 3)
        deep_lammps = density * ((side + 2 * (r + skin)) ** 3 - side ** 3)
        # per step: positions forward (3 doubles) and forces reverse (3) for
        # every LAMMPS ghost; the halo adds one row forward and one row back
        # per exchange (layers of them), float32 values (the default precision)
        deep_bytes = deep_lammps * 6 * 8
        halo_bytes = halo_ghosts * (6 * 8 + 2 * layers * width * 4)
        rows.append({"atoms_per_rank": int(owned), "halo_ghosts_per_owned": halo_ghosts / owned,
                     "deep_graph_ghosts_per_owned": deep_graph / owned,
                     "deep_lammps_ghosts_per_owned": deep_lammps / owned,
                     "halo_mb_per_step": halo_bytes / 1e6, "deep_mb_per_step": deep_bytes / 1e6})
    return {"model": f"UMA-S-1.1 shape: {layers} layers, cutoff {rc} A, {width} float32 values per row, skin {skin} A",
            "rows": rows}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("root")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--sizes", type=int, nargs="+", default=[500, 2000, 4000])
    ap.add_argument("--out", default=os.path.join(HERE, "..", "doc", "benchmark_results_ranks_cpu.json"))
    ap.add_argument("--scaling-only", action="store_true", help="recompute (b) into --out; run nothing")
    a = ap.parse_args()
    if a.scaling_only:
        results = json.load(open(a.out))
        results["scaling_computed"] = scaling_table()
        with open(a.out, "w") as f:
            json.dump(results, f, indent=1)
        print(json.dumps(results["scaling_computed"], indent=1))
        return
    workdir = "/tmp/uma-bench-ranks"
    os.makedirs(os.path.join(a.root, workdir.lstrip("/")), exist_ok=True)
    results = {"date": time.strftime("%Y-%m-%d"), "steps": a.steps, "model": "uma-s-cu-eam-demo (fp32)",
               "threads_per_rank": 1, "sizes": {}}
    for n in a.sizes:
        nx, ny, nz = CELLS[n]
        text = CU_NVE.format(nx=nx, ny=ny, nz=nz, model=DEMO, steps=a.steps, columns="c_pu[5] c_pu[6]")
        row = {"1 rank": run(a.root, workdir, f"in.{n}_1", text, 1),
               "2 ranks, halo exchange": run(a.root, workdir, f"in.{n}_2", text, 2),
               "2 ranks, deep shell": run(a.root, workdir, f"in.{n}_2deep",
                                          text.replace("pair_style uma task omat", "pair_style uma task omat ghosts deep"), 2)}
        one = row["1 rank"]["timesteps_per_s"]
        for k, v in row.items():
            v["speedup_over_1_rank"] = v["timesteps_per_s"] / one
            print(f"{n} atoms, {k}: {v['timesteps_per_s']:.4g} steps/s ({v['speedup_over_1_rank']:.2f}x), "
                  f"{v['ghosts_per_rank']:.0f} ghosts/rank, {v['halo_bytes_per_step_per_rank'] / 1e6:.2f} MB "
                  f"halo/step/rank, {v['peak_rss_mb_largest_rank']:.0f} MB", flush=True)
        results["sizes"][str(n)] = row
    results["scaling_computed"] = scaling_table()
    for r in results["scaling_computed"]["rows"]:
        print(f"{r['atoms_per_rank']:>8} atoms/rank: ghosts/owned halo {r['halo_ghosts_per_owned']:.2f}, "
              f"deep {r['deep_graph_ghosts_per_owned']:.2f} (graph) / {r['deep_lammps_ghosts_per_owned']:.2f} "
              f"(LAMMPS); MB/step halo {r['halo_mb_per_step']:.1f}, deep {r['deep_mb_per_step']:.1f}")
    with open(a.out, "w") as f:
        json.dump(results, f, indent=1)
    print("wrote", a.out)


if __name__ == "__main__":
    main()
