#!/usr/bin/env python3
"""pair_style uma/kk against pair_style uma (not a test).  Side by side in one
run, on LAMMPS's KOKKOS package with the OpenMP backend: Cu crystals of 108
and 1000 atoms, the shipped demo model (fp32), 1 and 2 threads, NVE.  Reports
steps/s (LAMMPS's Performance line) and the host copies of the last step:
the engine's counted host reads and uploads and the bytes they moved
(`compute pair`).  uma/kk works in place on the Kokkos views.

usage: bench/lammps_kokkos.py ROOT [--steps N] [--out FILE]   (scripts/bench.sh --lammps --kokkos)
"""
import argparse
import json
import os
import re
import time

from lammps_md import CU_NVE, DEMO, lammps

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("root")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--out", default=os.path.join(HERE, "..", "doc", "benchmark_results_kokkos_cpu.json"))
    a = ap.parse_args()
    workdir = "/tmp/uma-bench-kokkos"
    os.makedirs(os.path.join(a.root, workdir.lstrip("/")), exist_ok=True)
    results = {"date": time.strftime("%Y-%m-%d"), "steps": a.steps, "model": "uma-s-cu-eam-demo (fp32)", "runs": []}
    for atoms, (nx, ny, nz) in ((108, (3, 3, 3)), (1000, (5, 5, 10))):   # 4 atoms per fcc cell
        text = CU_NVE.format(nx=nx, ny=ny, nz=nz, model=DEMO, steps=a.steps, columns="c_pu[1] c_pu[2] c_pu[7] c_pu[8]")
        for threads in (1, 2):
            row = {"atoms": atoms, "threads": threads}
            for style, flags in (("uma", ""), ("uma/kk", f"-k on t {threads} -sf kk")):
                perf, log = lammps(a.root, workdir, f"in.{atoms}_{threads}_{style.replace('/', '')}", text,
                                   threads, flags=flags)
                if style == "uma/kk" and "pair uma/kk: in place on the Kokkos views" not in log:
                    raise SystemExit("-sf kk did not pick pair_style uma/kk in place")
                last = [l.split() for l in log.splitlines() if re.match(r"^\s*\d+\s+-?\d", l)][-1]
                if f"Created {atoms} atoms" not in log:
                    raise SystemExit(f"expected {atoms} atoms")
                row[style] = {"timesteps_per_s": perf["timesteps_per_s"], "host_reads_per_step": float(last[2]),
                              "uploads_per_step": float(last[3]), "bytes_read_per_step": float(last[4]),
                              "bytes_uploaded_per_step": float(last[5])}
            row["kk_over_uma"] = row["uma/kk"]["timesteps_per_s"] / row["uma"]["timesteps_per_s"]
            results["runs"].append(row)
            print(f"{atoms} atoms, {threads} thread(s): uma {row['uma']['timesteps_per_s']:.4g} steps/s, "
                  f"uma/kk {row['uma/kk']['timesteps_per_s']:.4g} steps/s ({row['kk_over_uma']:.2f}x); reads/uploads "
                  f"per step {row['uma']['host_reads_per_step']:g}/{row['uma']['uploads_per_step']:g} and "
                  f"{row['uma/kk']['host_reads_per_step']:g}/{row['uma/kk']['uploads_per_step']:g}; bytes read/uploaded "
                  f"{row['uma']['bytes_read_per_step']:g}/{row['uma']['bytes_uploaded_per_step']:g} and "
                  f"{row['uma/kk']['bytes_read_per_step']:g}/{row['uma/kk']['bytes_uploaded_per_step']:g}", flush=True)
    with open(a.out, "w") as f:
        json.dump(results, f, indent=1)
    print("wrote", a.out)


if __name__ == "__main__":
    main()
