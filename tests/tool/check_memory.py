#!/usr/bin/env python3
"""`uma eval --memory GB` through the command line: a budget too small for the
stored activations recomputes the edge work in chunks (stderr says so) with the
same energy, forces, stress and virials in fp64; an impossible budget is
refused with exit code 1 and a message; no budget keeps the stored path.

Memory is measured, not taken from the log: on a 432-atom cell (STRUCTURE
repeated 2 x 2 x 1), each process's peak resident memory (ru_maxrss) minus
that of the same command on a two-atom cell (LibTorch, the model, thread
pools) is the evaluation's.  With the allocator returning freed memory
(UMA_KEEP_MEMORY=0) the recomputed evaluation stays within its 0.1 GB
budget; with the default (freed memory kept for the next step) it stays far
below the stored path's, whose growth is at least 0.6 x its predicted peak
(the prediction is an upper bound).

usage: check_memory.py UMA MODEL STRUCTURE.extxyz
"""
import json
import os
import re
import subprocess
import sys
import tempfile


class Result:
    def __init__(self, returncode, stdout, stderr, maxrss_bytes):
        self.returncode, self.stdout, self.stderr, self.maxrss = returncode, stdout, stderr, maxrss_bytes


def run(*args, env=None):
    """Runs a command; its own peak RSS from wait4 (bytes)."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen(list(args), stdout=out, stderr=err, text=True,
                                env=None if env is None else {**os.environ, **env})
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        return Result(proc.returncode, out.read(), err.read(), usage.ru_maxrss * 1024)


def write_cells(structure, folder):
    """STRUCTURE (one frame, orthogonal cell) repeated 2 x 2 x 1, and a dimer in the same cell."""
    lines = open(structure).read().splitlines()
    n = int(lines[0])
    lattice = [float(x) for x in re.search(r'Lattice="([^"]+)"', lines[1]).group(1).split()]
    a, b = lattice[0], lattice[4]
    assert lattice[1:4] + lattice[5:8] == [0.0] * 6, "check_memory.py needs an orthogonal cell"
    header = lines[1].replace(re.search(r'Lattice="([^"]+)"', lines[1]).group(1),
                              f"{2 * a} 0.0 0.0 0.0 {2 * b} 0.0 0.0 0.0 {lattice[8]}")
    atoms = [line.split() for line in lines[2:2 + n]]
    big = [f"{z} {float(x) + i * a:.8f} {float(y) + j * b:.8f} {w}"
           for i in (0, 1) for j in (0, 1) for z, x, y, w in atoms]
    paths = (os.path.join(folder, "big.extxyz"), os.path.join(folder, "dimer.extxyz"))
    with open(paths[0], "w") as f:
        f.write(f"{len(big)}\n{header}\n" + "\n".join(big) + "\n")
    with open(paths[1], "w") as f:
        f.write(f"2\n{lines[1]}\n{atoms[0][0]} 0 0 0\n{atoms[0][0]} 1.8 1.8 0\n")
    return paths


def predicted_gb(stderr):
    m = re.search(r"predicted peak ([0-9.]+) GB", stderr)
    return float(m.group(1)) if m else None


def check_measured_memory(uma, model, structure, failures):
    with tempfile.TemporaryDirectory() as folder:
        big, dimer = write_cells(structure, folder)
        base = [uma, "eval", model, "--task", "omat", "--precision", "fp64", "--json"]
        budget = 0.1e9
        for keep in ("0", "1"):
            env = {"UMA_KEEP_MEMORY": keep}
            rows = {}
            for name, path, extra in (("baseline", dimer, ["--memory", "0.1"]), ("recomputed", big, ["--memory", "0.1"]),
                                      ("stored", big, [])):
                r = run(*base[:3], path, *base[3:], *extra, env=env)
                if r.returncode != 0:
                    failures.append(f"UMA_KEEP_MEMORY={keep} {name}: rc {r.returncode}, stderr {r.stderr!r}")
                    return
                rows[name] = r
            grow = {k: rows[k].maxrss - rows["baseline"].maxrss for k in ("recomputed", "stored")}
            stored_predicted = predicted_gb(rows["stored"].stderr) * 1e9
            print(f"UMA_KEEP_MEMORY={keep}: peak RSS above the two-atom run: recomputed {grow['recomputed'] / 1e6:.0f} MB "
                  f"(budget {budget / 1e6:.0f} MB), stored {grow['stored'] / 1e6:.0f} MB "
                  f"(predicted {stored_predicted / 1e6:.0f} MB)")
            if "recomputed edge work in chunks" not in rows["recomputed"].stderr:
                failures.append(f"UMA_KEEP_MEMORY={keep}: the 432-atom cell did not recompute at 0.1 GB")
            if keep == "0" and grow["recomputed"] > budget:
                failures.append(f"recomputed evaluation grew the process by {grow['recomputed'] / 1e6:.0f} MB, "
                                f"over its {budget / 1e6:.0f} MB budget")
            if grow["recomputed"] > grow["stored"] / 5:
                failures.append(f"UMA_KEEP_MEMORY={keep}: recomputed growth {grow['recomputed'] / 1e6:.0f} MB is not "
                                f"far below the stored path's {grow['stored'] / 1e6:.0f} MB")
            if grow["stored"] < 0.6 * stored_predicted:
                failures.append(f"UMA_KEEP_MEMORY={keep}: stored growth {grow['stored'] / 1e6:.0f} MB is below 0.6 x "
                                f"its predicted {stored_predicted / 1e6:.0f} MB: the measurement misses it")


def main():
    uma, model, structure = sys.argv[1:4]
    base = [uma, "eval", model, structure, "--task", "omat", "--precision", "fp64", "--json"]
    stored = run(*base)
    tight = run(*base, "--memory", "0.02")
    hopeless = run(*base, "--memory", "1e-7")
    failures = []
    if stored.returncode != 0 or "memory plan: stored activations" not in stored.stderr:
        failures.append(f"default budget: rc {stored.returncode}, stderr {stored.stderr!r}")
    if tight.returncode != 0 or "memory plan: recomputed edge work in chunks of" not in tight.stderr:
        failures.append(f"--memory 0.02: rc {tight.returncode}, stderr {tight.stderr!r}")
    if hopeless.returncode != 1 or "uma: error: the evaluation of" not in hopeless.stderr \
            or "raise the budget" not in hopeless.stderr:
        failures.append(f"--memory 1e-7: rc {hopeless.returncode}, stderr {hopeless.stderr!r}")
    if not failures:
        a, b = json.loads(stored.stdout)[0], json.loads(tight.stdout)[0]
        for key in ("energy", "forces", "stress", "virial", "atom_energies", "atom_virials"):
            x, y = a[key], b[key]
            flat = lambda v: [w for row in v for w in (row if isinstance(row, list) else [row])] \
                if isinstance(v, list) else [v]
            fx, fy = flat(x), flat(y)
            if len(fx) != len(fy) or not fx:
                failures.append(f"{key}: {len(fx)} values on the stored path, {len(fy)} recomputed")
                continue
            scale = max(1e-12, max(abs(v) for v in fx))
            dev = max(abs(p - q) for p, q in zip(fx, fy)) / scale
            print(f"{key}: max relative deviation {dev:.2e}")
            if dev > 1e-11:
                failures.append(f"{key} differs by {dev:.2e} (relative) between the stored and recomputed paths")
    check_measured_memory(uma, model, structure, failures)
    for f in failures:
        print("FAIL:", f)
    print("FAIL" if failures else "PASS tool.eval_memory")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
