#!/usr/bin/env python3
"""`uma eval --cuda-graph` on a trajectory, on the device of $UMA_TEST_DEVICE.

The trajectory: 8 frames of STRUCTURE, each with its atoms moved by up to
0.02 A (a smooth pattern that differs per frame) and the cell of frames 5-7
stretched 0.1% along x, as an NPT run would.

- On a CUDA device (scripts/gpu_check.sh): the frames evaluated with
  `--cuda-graph` equal the eager ones, in fp64, within 1e-10 relative to each
  quantity's largest value (only reordered float atomics differ; consecutive
  eager frames' forces differ by more than 1e-4, so stale outputs of a replay
  would fail), and stderr
  says the frames' one key was captured once and frames 2-7 replayed
  ("1 captured, 6 frames replayed of 8"), with no failed capture.
- Elsewhere (the CPU in CI): the option is refused with exit code 1 and a
  message that says why, and no frame is printed.

usage: check_eval_replay.py UMA MODEL STRUCTURE.extxyz
"""
import json
import math
import os
import subprocess
import sys
import tempfile

FRAMES = 8


def read_first_frame(path):
    lines = open(path).read().splitlines()
    n = int(lines[0])
    return lines[1], [line.split() for line in lines[2:2 + n]]


def trajectory(head, rows):
    """Moved copies of one frame (species and three position columns)."""
    lattice = head.split('Lattice="')[1].split('"')[0]
    cell = [float(x) for x in lattice.split()]
    rest = head.split('"', 2)[2]
    out = []
    for k in range(FRAMES):
        stretched = [c * (1.001 if (i == 0 and k >= 5) else 1.0) for i, c in enumerate(cell)]
        text = [str(len(rows)), 'Lattice="' + " ".join(repr(c) for c in stretched) + '"' + rest]
        for i, r in enumerate(rows):
            pos = [float(r[1 + d]) + 0.02 * math.sin(0.7 * (3 * i + d) + k) for d in range(3)]
            text.append(r[0] + " " + " ".join(repr(x) for x in pos))
        out.append("\n".join(text) + "\n")
    return "".join(out)


def run(uma, model, path, device, *extra):
    cmd = [uma, "eval", model, path, "--json", "--precision", "fp64", "--device", device, *extra]
    return subprocess.run(cmd, capture_output=True, text=True)


def worst(a, b):
    """Largest |a - b| relative to the largest |b| (flat lists)."""
    scale = max(max(abs(x) for x in b), 1e-300)
    return max(abs(x - y) for x, y in zip(a, b)) / scale


def main():
    if len(sys.argv) != 4:
        print(__doc__.strip())
        return 2
    uma, model, structure = sys.argv[1:]
    device = os.environ.get("UMA_TEST_DEVICE", "cpu")
    head, rows = read_first_frame(structure)
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "trajectory.extxyz")
        with open(path, "w") as f:
            f.write(trajectory(head, rows))
        graph = run(uma, model, path, device, "--cuda-graph")
        if not device.startswith("cuda"):
            want = "CUDA-graph replay needs a CUDA device; the model runs on " + device
            print(graph.stderr[-2000:])
            ok = graph.returncode == 1 and want in graph.stderr and graph.stdout.strip() == ""
            print(f"{device}: exit code {graph.returncode} (expected 1), refusal "
                  f"{'found' if want in graph.stderr else 'NOT found'}: {want!r}")
            print("PASS" if ok else "FAIL")
            return 0 if ok else 1
        eager = run(uma, model, path, device)
        for name, p in (("--cuda-graph", graph), ("eager", eager)):
            if p.returncode != 0:
                print(f"FAIL: uma eval {name}: exit code {p.returncode}\n{p.stderr[-3000:]}")
                return 1
    got, want = json.loads(graph.stdout), json.loads(eager.stdout)
    failures = []
    if len(got) != FRAMES or len(want) != FRAMES:
        failures.append(f"{len(got)} and {len(want)} frames for {FRAMES}")
    for k in range(1, len(want)):   # stale outputs of a replay would show: every frame differs
        d = worst(want[k]["forces"], want[k - 1]["forces"])
        if not d > 1e-4:
            failures.append(f"eager frames {k - 1} and {k}: forces differ by only {d:.2e} relative")
    for k, (g, w) in enumerate(zip(got, want)):
        for q in ("forces", "stress", "virial", "atom_energies"):
            d = worst(g[q], w[q])
            print(f"frame {k} {q}: worst relative deviation {d:.2e}")
            if not d <= 1e-10:
                failures.append(f"frame {k} {q}: {d:.2e} > 1e-10")
        d = abs(g["energy"] - w["energy"]) / max(1.0, abs(w["energy"]))
        if not d <= 1e-10:
            failures.append(f"frame {k} energy: {d:.2e} > 1e-10")
    summary = f"uma: CUDA graphs: 1 captured, {FRAMES - 2} frames replayed of {FRAMES}"
    print(graph.stderr[-1000:])
    if summary not in graph.stderr:
        failures.append(f"stderr lacks {summary!r}")
    if "a capture failed" in graph.stderr:
        failures.append("a capture failed")
    for f in failures:
        print("FAIL:", f)
    print("PASS" if not failures else "FAIL")
    return 0 if not failures else 1


if __name__ == "__main__":
    sys.exit(main())
