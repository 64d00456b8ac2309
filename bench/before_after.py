#!/usr/bin/env python3
"""Two builds of the uma tool side by side in one run (a change's before and after): inference
on bulk Cu (64 and 256 atoms, the full-size UMA-S-1.1-shaped random model, fp32) and one
training step on the K4L2 batches of bench/train_step.py (71 and 350 atoms, lean and reference
edge operators).  Rounds alternate the two builds, so machine drift hits both alike.  Prints
min/median/max seconds per evaluation or step of each, and the ratio of the medians
(after / before: below 1 is faster).

usage: before_after.py OUT_DIR BEFORE_UMA AFTER_UMA [--rounds R] [--repeats N] [--steps S] [--root SID_ROOT]
       OUT_DIR receives the inputs (model files, structures) and results.json.  With --root, the
       tools run inside that LAMMPS root (scripts/in_sid.sh) and OUT_DIR and the tools are paths
       inside it.  Needs the project's Python environment (fairchem-core, ase) for the K4L2 model.
"""
import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "tools"))


ROOT = ""  # --root


def host(path):
    return ROOT + path if ROOT else path


def tool(*cmd):
    return [os.path.join(HERE, "..", "scripts", "in_sid.sh"), ROOT, *cmd] if ROOT else list(cmd)


def inputs(out, uma):
    """The models and structures both builds run on (written once)."""
    from ase.build import bulk
    from ase.io import write
    import train_step  # puts tests/reference on the path: its make_fixtures builds the K4L2 checkpoint
    import convert_checkpoint
    import make_fixtures as mf

    files = {"full": os.path.join(out, "uma-s-1p1-random.safetensors"),
             "k4l2": os.path.join(out, "k4l2.safetensors")}
    if not os.path.exists(host(files["full"])):
        shape = os.path.join(out, "uma-s-1p1-shape.json")
        with open(os.path.join(HERE, "uma-s-1p1-shape.json")) as f, open(host(shape), "w") as g:
            g.write(f.read())
        subprocess.run(tool(uma, "init", shape, files["full"], "--seed", "2026"), check=True, capture_output=True)
    if not os.path.exists(host(files["k4l2"])):
        ckpt = host(os.path.join(out, "k4l2.pt"))
        mf.build_checkpoint("k4l2", mf.MODEL_SPECS["k4l2"], 99, ckpt)
        convert_checkpoint.convert(ckpt, host(files["k4l2"]), weights="raw", dtype="float32")
    for n, reps in ((64, (2, 2, 4)), (256, (4, 4, 4))):
        files[f"cu_{n}"] = os.path.join(out, f"cu_{n}.extxyz")
        a = bulk("Cu", "fcc", a=3.615, cubic=True).repeat(reps)
        a.rattle(0.05, seed=n)
        a.info["task"] = "omat"
        write(host(files[f"cu_{n}"]), a)
    for name, make in (("k4l2_batch", train_step.systems), ("large_batch", train_step.large_systems)):
        files[name] = os.path.join(out, f"{name}.extxyz")
        train_step.write_extxyz(host(files[name]), make())
    return files


def run_json(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode:
        sys.exit(f"{' '.join(cmd)} failed:\n{p.stderr[-2000:]}")
    return json.loads(p.stdout)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("before")
    p.add_argument("after")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--root", default="")
    a = p.parse_args()
    global ROOT
    ROOT = a.root
    os.makedirs(host(a.out), exist_ok=True)
    files = inputs(a.out, a.after)
    cases = [(f"inference Cu {n}, fp32", "bench", [files["full"], files[f"cu_{n}"], "--task", "omat",
                                                   "--repeats", str(a.repeats)]) for n in (64, 256)]
    for batch in ("k4l2_batch", "large_batch"):
        for ops in ("lean", "reference"):
            cases.append((f"training step {batch}, {ops}", "bench-train",
                          [files["k4l2"], files[batch], "--steps", str(a.steps), "--edge-ops", ops]))
    results = {}
    for label, sub, args in cases:
        times = {"before": [], "after": []}
        for _ in range(a.rounds):
            for which in ("before", "after"):
                r = run_json(tool(getattr(a, which), sub, *args))
                times[which].append(r["time_s"]["median"] if sub == "bench" else r["median_seconds"])
        med = {k: sorted(v)[len(v) // 2] for k, v in times.items()}
        results[label] = {"before_s": times["before"], "after_s": times["after"],
                          "after_over_before": med["after"] / med["before"]}
        print(f"{label:40s} before {min(times['before']):.3f}/{med['before']:.3f}/{max(times['before']):.3f} s  "
              f"after {min(times['after']):.3f}/{med['after']:.3f}/{max(times['after']):.3f} s  "
              f"after/before {med['after'] / med['before']:.3f}", flush=True)
    json.dump(results, open(host(os.path.join(a.out, "results.json")), "w"), indent=1)


if __name__ == "__main__":
    main()
