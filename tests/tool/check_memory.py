#!/usr/bin/env python3
"""`uma eval --memory GB` through the command line: a budget too small for the
stored activations recomputes the edge work in chunks (stderr says so) with the
same energy, forces, stress and virials in fp64; an impossible budget is
refused with exit code 1 and a message; no budget keeps the stored path.

usage: check_memory.py UMA MODEL STRUCTURE.extxyz
"""
import json
import subprocess
import sys


def run(*args):
    return subprocess.run(list(args), capture_output=True, text=True)


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
            scale = max(1e-12, max(abs(v) for v in fx))
            dev = max(abs(p - q) for p, q in zip(fx, fy)) / scale
            print(f"{key}: max relative deviation {dev:.2e}")
            if dev > 1e-11:
                failures.append(f"{key} differs by {dev:.2e} (relative) between the stored and recomputed paths")
    for f in failures:
        print("FAIL:", f)
    print("FAIL" if failures else "PASS tool.eval_memory")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
