#!/usr/bin/env python3
"""Frames of equal atom counts at very different densities, in either order, through `uma test`
and `uma train`.

An equation-of-state pair: 32 copper atoms at the equilibrium lattice constant and the same
cell compressed to 80% (about twice the neighbours within the cutoff), labelled, written in
both orders.  Each frame's neighbour graph must be the whole one whichever frame came first:
- `uma test` prints the same MAEs for both files, and they are the mean of the MAEs it prints
  for each frame alone (equal atom counts: energy, force and stress MAEs average over frames),
  within 1.5 units of the printed last digit (three rounded numbers);
- `uma train --precision fp64 --steps 1 --max-atoms 64` (one batch of both frames, in the file's
  order) prints the same first-step losses for both files, to 1e-15 relative (the systems' sums run
  in the other order: float64 rounding of the last digit or two; the truncated graph of the dense
  frame changed them by 90%).
Before the trainer measured every frame's edges under the engine's capacity policy, the dense
frame added after the sparse one kept the sparse one's capacities and was evaluated on a
truncated neighbour list: `uma test` printed other MAEs for the two orders.

usage: check_frame_order.py UMA MODEL
"""
import os
import random
import re
import subprocess
import sys
import tempfile

failures = []


def check(ok, message):
    if not ok:
        failures.append(message)
    return ok


def frame(a0, seed):
    """32-atom fcc copper (2x2x2 cubic cells of lattice constant a0), rattled, with labels."""
    rng = random.Random(seed)
    basis = [(0, 0, 0), (0.5, 0.5, 0), (0.5, 0, 0.5), (0, 0.5, 0.5)]
    lines = []
    for i in range(2):
        for j in range(2):
            for k in range(2):
                for b in basis:
                    pos = [(c + d) * a0 + rng.uniform(-0.05, 0.05) for c, d in zip((i, j, k), b)]
                    forces = [rng.uniform(-0.5, 0.5) for _ in range(3)]
                    lines.append("Cu " + " ".join(f"{x:.10f}" for x in pos + forces))
    L = 2 * a0
    stress = [rng.uniform(-0.01, 0.01) for _ in range(6)]
    s = [stress[0], stress[5], stress[4], stress[5], stress[1], stress[3], stress[4], stress[3], stress[2]]
    head = (f'Lattice="{L} 0 0 0 {L} 0 0 0 {L}" Properties=species:S:1:pos:R:3:forces:R:3 '
            f'energy={-3.5 * 32 + rng.uniform(-1, 1):.10f} stress="{" ".join(f"{x:.10f}" for x in s)}" '
            f'task=omat pbc="T T T"')
    return f"32\n{head}\n" + "\n".join(lines) + "\n"


def run(*args):
    p = subprocess.run(list(args), capture_output=True, text=True)
    print("$", "uma", " ".join(args[1:]), f"(rc {p.returncode})")
    print(p.stdout.rstrip())
    if p.returncode != 0:
        print(p.stderr.rstrip())
    return p


def maes(text):
    m = re.search(r"^errors +energy MAE (\S+) eV/atom +forces MAE (\S+) eV/A +stress MAE (\S+) eV/A\^3$",
                  text, re.M)
    return m.groups() if m else None


def first_losses(text):
    """The 17-digit per-task losses of the first printed step."""
    m = re.search(r"^ +losses:(.*)$", text, re.M)
    return m.group(1).split() if m else None


def main():
    uma, model = sys.argv[1:3]
    sparse, dense = frame(3.615, 1), frame(0.8 * 3.615, 2)
    with tempfile.TemporaryDirectory() as d:
        files = {}
        for name, text in (("dense_last", sparse + dense), ("dense_first", dense + sparse),
                           ("sparse", sparse), ("dense", dense)):
            files[name] = os.path.join(d, name + ".extxyz")
            with open(files[name], "w") as f:
                f.write(text)

        # uma test: the same MAEs in both orders, the mean of each frame's own
        printed = {name: maes(run(uma, "test", model, path).stdout) for name, path in files.items()}
        if check(all(printed.values()), f"uma test printed no MAE line: {printed}"):
            check(printed["dense_last"] == printed["dense_first"],
                  f"uma test: the frames' order changed the MAEs: {printed['dense_last']} (dense frame last) "
                  f"vs {printed['dense_first']} (dense frame first)")
            for k, what in enumerate(("energy", "forces", "stress")):
                text = printed["dense_last"][k]
                decimals = len(text.split(".")[1]) if "." in text else 0
                mean = (float(printed["sparse"][k]) + float(printed["dense"][k])) / 2
                # each of the three numbers rounded to the printed digits: 1.5 units of the last one
                bound = 1.5 * 10.0 ** -decimals
                check(abs(float(text) - mean) <= bound,
                      f"uma test: the pair's {what} MAE {text} is not the mean {mean:.8g} of each frame's own "
                      f"({printed['sparse'][k]}, {printed['dense'][k]}; bound {bound:g})")
            print(f"  uma test: {printed['dense_last']} in both orders; frames alone "
                  f"{printed['sparse']} and {printed['dense']}")

        # uma train: one fp64 step on a batch of both frames, in either order
        train = ["--precision", "fp64", "--max-atoms", "64", "--steps", "1",
                 "--lr", "1e-3", "--ema", "0", "--seed", "0"]
        losses = {}
        for name in ("dense_last", "dense_first"):
            out = os.path.join(d, name + ".out.safetensors")
            losses[name] = first_losses(run(uma, "train", model, files[name], "--out", out, *train).stdout)
        a, b = losses["dense_last"], losses["dense_first"]
        if check(a is not None and b is not None and a[0::2] == b[0::2],
                 f"uma train printed no losses, or other tasks: {a} vs {b}"):
            # The batch holds both frames in the file's order, so sums over its systems run in the
            # other order: float64 rounding of the last digit or two (measured 2.3e-16 relative).
            worst = max(abs(float(x) - float(y)) / max(abs(float(x)), 1e-300) for x, y in zip(a[1::2], b[1::2]))
            check(worst <= 1e-15, f"uma train: the frames' order changed the fp64 losses by {worst:.2e} relative "
                                  f"(bound 1e-15): {a} (dense frame last) vs {b} (dense frame first)")
            print(f"  uma train fp64, one step on both frames: {a} (dense frame last), every loss within "
                  f"{worst:.1e} relative in the other order")

    if failures:
        for f in failures:
            print("FAIL:", f)
        sys.exit(1)
    print("PASS tool.frame_order")


if __name__ == "__main__":
    main()
