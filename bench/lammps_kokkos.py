#!/usr/bin/env python3
"""pair_style uma/kk against pair_style uma (not a test).  Side by side in one
run, on LAMMPS's KOKKOS package with the OpenMP backend: Cu crystals of 108
and 1000 atoms, the shipped demo model (fp32), 1 and 2 threads, NVE.  Reports
steps/s (LAMMPS's Performance line) and the engine's counted host reads and
uploads per step (`compute pair`).

usage: bench/lammps_kokkos.py ROOT [--steps N] [--out FILE]   (scripts/bench.sh --lammps --kokkos)
"""
import argparse
import json
import os
import re
import time

from lammps_md import CU_NVE, lammps

HERE = os.path.dirname(os.path.abspath(__file__))
DEMO = "/src/uma-check/potentials/uma-s-cu-eam-demo.safetensors"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("root")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--out", default=os.path.join(HERE, "..", "doc", "benchmark_results_kokkos_cpu.json"))
    a = ap.parse_args()
    workdir = "/tmp/uma-bench-kokkos"
    os.makedirs(os.path.join(a.root, workdir.lstrip("/")), exist_ok=True)
    results = {"date": time.strftime("%Y-%m-%d"), "steps": a.steps, "model": "uma-s-cu-eam-demo (fp32)", "runs": []}
    for atoms, cells in ((108, 3), (1000, 5)):
        text = CU_NVE.format(nx=cells, ny=cells, nz=cells, model=DEMO, steps=a.steps, columns="c_pu[1] c_pu[2]")
        for threads in (1, 2):
            row = {"atoms": atoms, "threads": threads}
            for style, flags in (("uma", ""), ("uma/kk", f"-k on t {threads} -sf kk")):
                perf, log = lammps(a.root, workdir, f"in.{atoms}_{threads}_{style.replace('/', '')}", text,
                                   threads, flags=flags)
                if style == "uma/kk" and "pair uma/kk: model" not in log:
                    raise SystemExit("-sf kk did not pick pair_style uma/kk")
                last = [l.split() for l in log.splitlines() if re.match(r"^\s*\d+\s+-?\d", l)][-1]
                row[style] = {"timesteps_per_s": perf["timesteps_per_s"], "host_reads_per_step": float(last[2]),
                              "uploads_per_step": float(last[3])}
            row["kk_over_uma"] = row["uma/kk"]["timesteps_per_s"] / row["uma"]["timesteps_per_s"]
            results["runs"].append(row)
            print(f"{atoms} atoms, {threads} thread(s): uma {row['uma']['timesteps_per_s']:.4g} steps/s, "
                  f"uma/kk {row['uma/kk']['timesteps_per_s']:.4g} steps/s ({row['kk_over_uma']:.2f}x); reads/uploads "
                  f"per step {row['uma']['host_reads_per_step']:g}/{row['uma']['uploads_per_step']:g} and "
                  f"{row['uma/kk']['host_reads_per_step']:g}/{row['uma/kk']['uploads_per_step']:g}", flush=True)
    with open(a.out, "w") as f:
        json.dump(results, f, indent=1)
    print("wrote", a.out)


if __name__ == "__main__":
    main()
