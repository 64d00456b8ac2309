#!/usr/bin/env python3
"""The uncertainty gate of fix uma/train against fixed-interval labelling (a benchmark, not a test).

The protocol is examples/cu_otf_gated: 32 Cu atoms, pair_style uma starting from the shipped
random-weight model, Langevin MD at 300 K, 600 K and 900 K, then a vacancy at 900 K (STAGE steps
each), one optimizer step per MD step, EAM (Cu_u3.eam) as the reference.  The same input runs with
`label M` for several M and with `label auto THRESHOLD` for several thresholds; every run carries
the committee (fixed-interval runs only watch it), so that the uncertainty trace of each is logged.
Held-out frames: EAM alone through the same states with another thermostat and seed
(examples/cu_otf_gated/in.eam_heldout).  Recorded per run: reference calls, the held-out force MAE
at the end, the rank correlation of the estimate with the per-frame force error on the held-out
frames, and the uncertainty at every check.

The cost of the estimate (--cost): LAMMPS's loop time of MD alone against MD with a check on every
step (training and labelling off), and of training with and without the committee, side by side.

usage: bench/otf_gate.py ROOT [--stage 300] [--intervals 5,10,20,40,80,160,300]
                         [--thresholds 0.015,0.02,0.03,0.05,0.05:60,0.05:100] [--check 5] [--min-interval 20] [--reuse]
                         [--out doc/benchmark_results_otf_gate_cpu.json] [--plot doc/otf_gate.png]
       bench/otf_gate.py ROOT --cost [--out doc/benchmark_results_otf_gate_cost_cpu.json]
ROOT: the LAMMPS sid root (scripts/lammps_env.sh), with the plugin built (scripts/build.sh).
"""
import argparse
import json
import math
import os
import re
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLE = os.path.join(HERE, "..", "examples", "cu_otf_gated")
IN_SID = os.path.join(HERE, "..", "scripts", "in_sid.sh")
sys.path.insert(0, os.path.join(HERE, "..", "scripts"))
import root_layout  # noqa: E402  (the paths inside the LAMMPS root)

WORK = "/tmp/uma-otf-gate"   # inside the root
LMP = root_layout.LAMMPS + "/bin/lmp"
POTENTIALS = root_layout.LAMMPS + "/share/lammps/potentials"
MODEL = root_layout.PROJECT + "/potentials/uma-s-tiny-random.safetensors"


def in_root(root, cmd):
    p = subprocess.run([IN_SID, root, "bash", "-c", cmd], capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"failed in the root: {cmd}\n{p.stdout[-2000:]}\n{p.stderr[-2000:]}")


def thermo_rows(log):
    """All thermo rows (dicts) of every run in a LAMMPS log."""
    rows, header = [], None
    for line in log.splitlines():
        if line.lstrip().startswith("Step "):
            header = line.split()
            continue
        if header and line.startswith("Loop time"):
            header = None
            continue
        if header:
            v = line.split()
            if len(v) == len(header):
                try:
                    rows.append(dict(zip(header, map(float, v))))
                except ValueError:
                    pass
    return rows


def run(root, host, tag, label, gate, stage, reuse=False):
    log = f"log.{tag}"
    path = os.path.join(host, log)
    done = reuse and os.path.exists(path) and "Total wall time" in open(path).read()
    cmd = (f"cd {WORK} && LAMMPS_PLUGIN_PATH={root_layout.BUILD} LAMMPS_POTENTIALS={POTENTIALS} OMP_NUM_THREADS=2 "
           f"{LMP} -in in.cu_otf_gated -screen none -log {log} -var model {MODEL} -var stage {stage} -var thermo 5 "
           f"-var label '{label}' -var gate '{gate}'")
    t0 = time.time()
    if not done:
        in_root(root, cmd)
        shutil.copy(os.path.join(host, "calibration.txt"), os.path.join(host, f"calibration.{tag}.txt"))
    text = open(path).read()
    if done:
        h_, m_, s_ = re.search(r"Total wall time: (\d+):(\d+):(\d+)", text).groups()
        seconds = 3600 * int(h_) + 60 * int(m_) + int(s_)
    else:
        seconds = time.time() - t0
    rows = thermo_rows(text)
    last = rows[-1]
    gated = [int(m) for m in re.findall(r"(\d+) by the gate since the last print", text)]
    rhos = [float(m) for m in re.findall(r"held-out rank correlation of uncertainty and force MAE (\S+)", text)]
    print(f"  {tag:>12}: {int(last['f_learn[14]'])} reference calls, held-out force MAE {last['f_learn[11]']:.4f} eV/A, "
          f"rank correlation {last['f_learn[15]']:.3f}, {seconds:.0f} s", flush=True)
    return {"label": label, "gate": gate, "reference_calls": int(last["f_learn[14]"]),
            "heldout_force_mae": last["f_learn[11]"], "rank_correlation": last["f_learn[15]"],
            "rank_correlation_per_print": rhos, "gated_per_print": gated, "seconds": round(seconds, 1),
            "trace": [[int(r["Step"]), r["f_learn[13]"], int(r["f_learn[14]"]), r["Temp"]] for r in rows]}


def response(trace, stage):
    """For each new state (steps stage, 2 stage, 3 stage): the uncertainty at the first check after it
    against the largest value of the 100 steps before, and the steps until it first exceeds that."""
    out = []
    for t in (stage, 2 * stage, 3 * stage):
        before = [u for s, u, _, _ in trace if t - 100 <= s < t and u > 0]
        after = [(s, u) for s, u, _, _ in trace if t < s <= t + 100]
        peak = max(before)
        first = next((s - t for s, u in after if u > peak), None)
        out.append({"step": t, "max_before": peak, "first_after": after[0][1],
                    "steps_to_exceed": first, "max_after": max(u for _, u in after)})
    return out


COST = """units metal
atom_style atomic
boundary p p p
lattice fcc 3.615
region box block 0 {n} 0 {n} 0 {n}
create_box 1 box
create_atoms 1 box
mass 1 63.546
pair_style uma task omat
pair_coeff * * {model} Cu
velocity all create 300.0 4928459 loop geom
timestep 0.002
fix nve all nve
{fix}
thermo {steps}
run 5
run {steps}
"""


def loop_time(text):
    return float(re.findall(r"Loop time of (\S+)", text)[-1])


def cost(root, host, steps=100):
    """Seconds per MD step of: MD alone; MD with a check every step (label auto with an unreachable
    threshold, no training); training every step without and with a committee (label once)."""
    fixes = {
        "md": "",
        "md+check": "fix t all uma/train 1000000 label auto 1e9 check 1 reference eam coeff 1 1 Cu_u3.eam",
        "md+train": "fix t all uma/train 1 label 1000000 reference eam coeff 1 1 Cu_u3.eam",
        "md+train+committee": "fix t all uma/train 1 label 1000000 committee 4 check 1000000 "
                              "reference eam coeff 1 1 Cu_u3.eam",
    }
    out = {}
    for n in (2, 3):
        atoms = 4 * n ** 3
        per = {}
        for tag, fix in fixes.items():
            with open(os.path.join(host, "in.cost"), "w") as f:
                f.write(COST.format(n=n, model=MODEL, fix=fix, steps=steps))
            in_root(root, f"cd {WORK} && LAMMPS_PLUGIN_PATH={root_layout.BUILD} LAMMPS_POTENTIALS={POTENTIALS} "
                          f"OMP_NUM_THREADS=2 {LMP} -in in.cost -screen none -log log.cost")
            per[tag] = loop_time(open(os.path.join(host, "log.cost")).read()) / steps
        row = {"atoms": atoms, "seconds_per_step": per,
               "check_in_md_steps": (per["md+check"] - per["md"]) / per["md"],
               "committee_training_fraction": (per["md+train+committee"] - per["md+train"]) / (per["md+train"] - per["md"])}
        out[str(atoms)] = row
        print(f"  {atoms} atoms: a check costs {row['check_in_md_steps']:.2f} MD steps; the committee adds "
              f"{100 * row['committee_training_fraction']:.1f}% to an optimizer step "
              f"({', '.join(f'{k} {1e3 * v:.1f} ms' for k, v in per.items())})", flush=True)
    return out


def plot(results, stage, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4.2))
    fixed = sorted((r for r in results if not r["label"].startswith("auto")), key=lambda r: r["reference_calls"])
    gated = sorted((r for r in results if r["label"].startswith("auto")), key=lambda r: r["reference_calls"])
    a.plot([r["reference_calls"] for r in fixed], [r["heldout_force_mae"] for r in fixed], "o-", label="label M (fixed)")
    for r in fixed:
        a.annotate(f"M={r['label']}", (r["reference_calls"], r["heldout_force_mae"]), textcoords="offset points",
                   xytext=(4, 4), fontsize=8)
    a.plot([r["reference_calls"] for r in gated], [r["heldout_force_mae"] for r in gated], "s", label="label auto T")
    for r in gated:
        a.annotate(f"T={r['label'].split()[1]}, min {r['gate'].split()[3]}", (r["reference_calls"], r["heldout_force_mae"]),
                   textcoords="offset points", xytext=(4, -10), fontsize=8)
    a.set_xlabel("reference (EAM) calls")
    a.set_ylabel("held-out force MAE at the end (eV/A)")
    a.set_title("Cu 32 atoms, 300 -> 600 -> 900 K -> vacancy")
    a.legend()
    a.grid(alpha=0.3)
    show = gated[len(gated) // 2] if gated else fixed[0]
    steps = [s for s, _, _, _ in show["trace"]]
    b.plot(steps, [u for _, u, _, _ in show["trace"]], lw=0.8, label=f"uncertainty ({show['label']})")
    b2 = b.twinx()
    b2.plot(steps, [c for _, _, c, _ in show["trace"]], color="tab:red", lw=0.8, label="reference calls")
    b2.set_ylabel("reference calls", color="tab:red")
    for t, what in ((stage, "600 K"), (2 * stage, "900 K"), (3 * stage, "vacancy")):
        b.axvline(t, color="gray", ls="--", lw=0.8)
        b.text(t, b.get_ylim()[1] * 0.95, " " + what, fontsize=8, va="top")
    if show["label"].startswith("auto"):
        b.axhline(float(show["label"].split()[1]), color="k", lw=0.6, ls=":")
    b.set_xlabel("MD step")
    b.set_ylabel("committee uncertainty (eV, max over atoms)")
    b.set_title("the gate's estimate through the run")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("root")
    ap.add_argument("--stage", type=int, default=300)
    ap.add_argument("--intervals", default="5,10,20,40,80,160,300")
    ap.add_argument("--thresholds", default="0.015,0.02,0.03,0.05,0.05:60,0.05:100",
                    help="gated runs: THRESHOLD or THRESHOLD:MIN_INTERVAL, comma-separated")
    ap.add_argument("--check", type=int, default=5)
    ap.add_argument("--min-interval", type=int, default=20, help="min_interval of the gated runs (THRESHOLD:MIN overrides)")
    ap.add_argument("--reuse", action="store_true", help="take the runs whose complete logs are in the work folder")
    ap.add_argument("--cost", action="store_true", help="measure the cost of checks and of the committee only")
    ap.add_argument("--out", default=os.path.join(HERE, "..", "doc", "benchmark_results_otf_gate_cpu.json"))
    ap.add_argument("--plot", default=os.path.join(HERE, "..", "doc", "otf_gate.png"))
    a = ap.parse_args()
    root = os.path.abspath(a.root)
    host = root + WORK
    os.makedirs(host, exist_ok=True)
    for f in ("in.cu_otf_gated", "in.eam_heldout"):
        shutil.copy(os.path.join(EXAMPLE, f), host)
    shutil.copy(os.path.join(EXAMPLE, "..", "cu_otf", "heldout_frames.py"), host)
    if a.cost:
        out = a.out if "--out" in sys.argv else a.out.replace("otf_gate_cpu", "otf_gate_cost_cpu")
        json.dump({"model": "uma-s-tiny-random", "machine": "2-core CPU, OMP_NUM_THREADS=2", "per_size": cost(root, host)},
                  open(out, "w"), indent=1)
        print(f"wrote {out}")
        return
    in_root(root, f"cd {WORK} && LAMMPS_POTENTIALS={POTENTIALS} {LMP} -in in.eam_heldout -screen none -log log.eam "
                  f"&& python3 heldout_frames.py")
    print(f"held-out frames: {open(os.path.join(host, 'heldout.extxyz')).read().count('energy=')} (EAM, 4 states)")
    results = []
    for m in a.intervals.split(","):
        results.append(run(root, host, f"label{m}", m, f"committee 4 check {a.check}", a.stage, a.reuse))
    for entry in a.thresholds.split(","):
        t, mi = (entry.split(":") + [str(a.min_interval)])[:2]
        gate = f"check {a.check} min_interval {mi} max_interval 200"
        results.append(run(root, host, f"auto{t}_min{mi}", f"auto {t}", gate, a.stage, a.reuse))
    densest = min((r for r in results if not r["label"].startswith("auto")), key=lambda r: int(r["label"]))
    target = densest["heldout_force_mae"]
    within = [r for r in results if r["label"].startswith("auto") and r["heldout_force_mae"] <= target]
    best = min(within, key=lambda r: r["reference_calls"]) if within else None
    summary = {"target_mae": target, "target_calls": densest["reference_calls"],
               "gate_calls_at_target": best["reference_calls"] if best else None,
               "gate_at_target": best["label"] if best else None,
               "call_ratio": best["reference_calls"] / densest["reference_calls"] if best else None}
    # the fixed-interval curve at the gated runs' call counts (linear in log calls between its points)
    curve = sorted((r["reference_calls"], r["heldout_force_mae"]) for r in results if not r["label"].startswith("auto"))
    for r in results:
        r["response"] = response(r["trace"], a.stage)
        c = r["reference_calls"]
        if r["label"].startswith("auto") and curve[0][0] <= c <= curve[-1][0]:
            lo = max(p for p in curve if p[0] <= c)
            hi = min(p for p in curve if p[0] >= c)
            f = 0 if hi[0] == lo[0] else (math.log(c) - math.log(lo[0])) / (math.log(hi[0]) - math.log(lo[0]))
            r["fixed_mae_at_same_calls"] = lo[1] + f * (hi[1] - lo[1])
    json.dump({"protocol": {"atoms": 32, "stage_steps": a.stage, "check": a.check,
                            "states": ["300 K", "600 K", "900 K", "900 K + vacancy"], "reference": "eam Cu_u3.eam",
                            "heldout_frames": 41, "machine": "2-core CPU"},
               "summary": summary, "runs": results}, open(a.out, "w"), indent=1)
    plot(results, a.stage, a.plot)
    print(json.dumps(summary))
    print(f"wrote {a.out} and {a.plot}")


if __name__ == "__main__":
    main()
