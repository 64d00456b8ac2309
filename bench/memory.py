"""Peak memory and time of one evaluation (energy, forces, stress) against
the number of atoms, side by side in one run: fairchem-core with its
activation checkpointing on (its fastest CPU settings otherwise), lammps-uma
with stored activations, and lammps-uma recomputing the edge work in chunks.

Same weights (a full-size UMA-S-1.1-shaped model with seeded random weights,
bench/make_model.py), fp32, fcc Cu supercells, every case in its own process
(peak RSS is per case).  Before each case the peak is extrapolated from the
same engine's smaller sizes (linear in atoms); a case predicted above
--limit-gb is not run and is reported as such, so the machine never swaps.

usage: memory.py UMA_TOOL MODEL_DIR OUT.json [--sizes 256 1000 4000 8000]
                 [--repeats 1] [--chunk 16384] [--limit-gb 21] [--plot PNG]
"""
import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import make_structures  # noqa: E402

ALLOC_ENV = {"MALLOC_MMAP_MAX_": "0", "MALLOC_TRIM_THRESHOLD_": str(2**36)}
STRUCTURES = {256: "cu_256", 1000: "cu_1000", 4000: "cu_4000", 8000: "cu_8000"}
MEMORY_GB = 24.0   # the memory of the machine doc/benchmarks.md's figures were taken on


def structure(workdir, n):
    name = STRUCTURES[n]
    path = os.path.join(workdir, name + ".extxyz")
    if not os.path.exists(path):
        symbol, a, basis, reps = make_structures.CRYSTALS[name]
        import random
        positions, box = make_structures.supercell(a, basis, reps, random.Random(20261130 + n))
        make_structures.write_extxyz(path, symbol, positions, box)
    return path


def run_json(cmd, env=None):
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, **(env or {})})
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{p.stderr[-3000:]}")
    line = [l for l in p.stdout.splitlines() if l.startswith("{")][-1]
    out = json.loads(line)
    out["wall_s"] = wall
    return out


def predicted_peak_mb(done, n):
    """Linear extrapolation of peak RSS in atoms from this engine's runs: from
    one run, its baseline plus what it added, scaled with the atoms."""
    runs = sorted((r for r in done if "peak_rss_mb" in r), key=lambda r: r["atoms"])
    pts = [(r["atoms"], r["peak_rss_mb"]) for r in runs]
    if not pts:
        return None
    if len(pts) == 1:
        base = runs[0].get("baseline_rss_mb", 0.0)
        return base + (pts[0][1] - base) * n / pts[0][0]
    (n1, m1), (n2, m2) = pts[-2], pts[-1]
    slope = (m2 - m1) / (n2 - n1)
    return m2 + slope * (n - n2)


def largest_fitting(done, limit_mb):
    """Atoms at which the fitted line through the two largest runs reaches limit_mb."""
    pts = sorted((r["atoms"], r["peak_rss_mb"]) for r in done if "peak_rss_mb" in r)
    if len(pts) < 2:
        return None
    (n1, m1), (n2, m2) = pts[-2], pts[-1]
    slope = (m2 - m1) / (n2 - n1)
    return int(n2 + (limit_mb - m2) / slope) if slope > 0 else None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("uma")
    ap.add_argument("model_dir")
    ap.add_argument("out")
    ap.add_argument("--sizes", type=int, nargs="+", default=[256, 1000, 4000, 8000])
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--chunk", type=int, default=16384, help="edges per chunk of the recomputed path")
    ap.add_argument("--limit-gb", type=float, default=21.0)
    ap.add_argument("--plot")
    a = ap.parse_args()
    ckpt = os.path.join(a.model_dir, "uma-s-1p1-random.pt")
    model = os.path.join(a.model_dir, "uma-s-1p1-random.safetensors")
    workdir = os.path.join(a.model_dir, "memory")
    os.makedirs(workdir, exist_ok=True)
    engines = {
        "fairchem (checkpointed)": lambda s: [sys.executable, os.path.join(HERE, "fairchem_worker.py"), ckpt, s,
                                              "--repeats", str(a.repeats), "--checkpointing"],
        "lammps-uma stored": lambda s: [a.uma, "bench", model, s, "--repeats", str(a.repeats), "--memory", "1000"],
        "lammps-uma recomputed": lambda s: [a.uma, "bench", model, s, "--repeats", str(a.repeats),
                                            "--chunk", str(a.chunk)],
    }
    results = {name: [] for name in engines}
    limit_mb = a.limit_gb * 1024
    for n in a.sizes:
        path = structure(workdir, n)
        for name, cmd in engines.items():
            guess = predicted_peak_mb(results[name], n)
            if guess is not None and guess > limit_mb:
                results[name].append({"atoms": n, "skipped": f"predicted peak {guess / 1024:.1f} GB > {a.limit_gb} GB"})
                print(f"{name:24s} {n:6d} atoms: skipped (predicted {guess / 1024:.1f} GB)", flush=True)
                continue
            r = run_json(cmd(path), ALLOC_ENV)
            r["atoms"] = n
            results[name].append(r)
            t = r["time_s"]["median"]
            print(f"{name:24s} {n:6d} atoms: {t:8.2f} s/eval, peak {r['peak_rss_mb'] / 1024:6.2f} GB "
                  f"({r['peak_rss_mb'] / n:.2f} MB/atom)", flush=True)
    summary = {name: {"largest_atoms_in_%g_GB" % MEMORY_GB: largest_fitting(rs, MEMORY_GB * 1024)}
               for name, rs in results.items()}
    with open(a.out, "w") as f:
        json.dump({"results": results, "summary": summary, "chunk_edges": a.chunk,
                   "threads": os.cpu_count()}, f, indent=1)
    print_table(results, summary)
    if a.plot:
        plot(results, a.plot)


def print_table(results, summary):
    print("\n| engine | atoms | s / evaluation | peak RSS (GB) | MB / atom | baseline (GB) |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, rs in results.items():
        for r in rs:
            if "skipped" in r:
                print(f"| {name} | {r['atoms']} | - | {r['skipped']} | - | - |")
                continue
            base = r.get("baseline_rss_mb")
            print(f"| {name} | {r['atoms']} | {r['time_s']['median']:.2f} | {r['peak_rss_mb'] / 1024:.2f} | "
                  f"{r['peak_rss_mb'] / r['atoms']:.2f} | {'-' if base is None else f'{base / 1024:.2f}'} |")
    for name, s in summary.items():
        print(f"{name}: largest fitting {MEMORY_GB:g} GB (extrapolated from the two largest runs): "
              f"{s['largest_atoms_in_%g_GB' % MEMORY_GB]}")


def plot(results, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(6, 4))
    for name, rs in results.items():
        pts = [(r["atoms"], r["peak_rss_mb"] / 1024) for r in rs if "peak_rss_mb" in r]
        if pts:
            ax.plot(*zip(*pts), marker="o", label=name)
    ax.axhline(MEMORY_GB, color="grey", linestyle="--", linewidth=1, label=f"{MEMORY_GB:g} GB (the benchmark machine)")
    ax.set_xlabel("Cu atoms")
    ax.set_ylabel("peak resident memory (GB)")
    ax.set_title("One evaluation (E, F, stress), UMA-S-1.1 shape, fp32, CPU")
    ax.legend()
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


if __name__ == "__main__":
    main()
