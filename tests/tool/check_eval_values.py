#!/usr/bin/env python3
"""`uma eval` prints the right numbers, not just numbers of the right shape.

1. fairchem through the command line: every fp64 one-system case of the
   parity fixtures for s1p1.safetensors (a molecule with charge/spin labels, fcc
   Cu, a slab, a triclinic cell, a crowded cluster, two dimers) is written as
   extended XYZ (task, charge, spin and pbc as frame labels) and evaluated by
   `uma eval FIXTURES/s1p1.safetensors --json --precision fp64`.  Energy
   (relative to max(1, |E|)), forces (eV/A) and stress (eV/A^3, periodic
   frames; null otherwise) agree with fairchem's within 1e-10; measured worst
   ~4e-15, 8e-15 and 6e-16.
2. The demo model on STRUCTURE (108-atom Cu), fp64, against the model itself
   by other routes: a rotated (cell too), translated and permuted copy has the
   same energy and rotated, permuted forces and stress (1e-10; measured 0,
   5e-15, 6e-17); central differences of the energy (h = 1e-4 A, or strain
   1e-4) give two force components and one stress component within 1e-7
   (measured <= 1.0e-9 eV/A and 6.6e-9 eV/A^3: the h^2 truncation; the
   components are 0.03, 0.008 eV/A and 0.33 eV/A^3).
3. The readable table (default precision, fp32) of the same run shows those
   numbers: energy within 2e-5 relative, forces 5e-5 eV/A, stress 2e-6 eV/A^3
   of the fp64 values (the parity test's fp32 bounds; measured 2.2e-6, 2.2e-6,
   1.2e-7).

usage: check_eval_values.py UMA FIXTURES_DIR DEMO_MODEL STRUCTURE.extxyz
($UMA_FIXTURES_DIR, when set, replaces FIXTURES_DIR, as for the parity test.)
"""
import json
import math
import os
import re
import subprocess
import sys
import tempfile

failures = []


def check(ok, message):
    if not ok:
        failures.append(message)


def frame(numbers, positions, cell, pbc, labels):
    """One extended XYZ frame; Z column; repr() keeps every bit of the doubles."""
    head = "Properties=Z:I:1:pos:R:3 " + " ".join(f"{k}={v}" for k, v in labels.items())
    if any(pbc):
        head = 'Lattice="' + " ".join(repr(float(x)) for row in cell for x in row) + '" ' + head
    head += ' pbc="' + " ".join("T" if p else "F" for p in pbc) + '"'
    rows = [f"{z} " + " ".join(repr(float(x)) for x in p) for z, p in zip(numbers, positions)]
    return f"{len(rows)}\n{head}\n" + "\n".join(rows) + "\n"


def uma_eval(uma, model, frames, folder, *extra):
    path = os.path.join(folder, "frames.extxyz")
    with open(path, "w") as f:
        f.write("".join(frames))
    p = subprocess.run([uma, "eval", model, path, *extra], capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"FAIL: uma eval {model}: rc {p.returncode}, stderr {p.stderr!r}")
    return p.stdout


def max_dev(a, b):
    return max(abs(x - y) for x, y in zip(a, b))


def check_fixtures(uma, fixtures, folder):
    data = json.load(open(os.path.join(fixtures, "fixtures.json")))
    cases = [c for c in data["cases"] if c["model"] == "s1p1.safetensors" and c["dtype"] == "float64"
             and c.get("gamma", "zero") == "zero" and len(c["systems"]) == 1]
    names = [c["systems"][0]["name"] for c in cases]
    check(len(cases) >= 7 and "cu_bulk" in names and "molecule" in names, f"fixture cases found: {names}")
    frames = [frame(s["numbers"], s["positions"], s["cell"], s["pbc"],
                    {"task": s["task"], "charge": s["charge"], "spin": s["spin"]})
              for s in (c["systems"][0] for c in cases)]
    out = json.loads(uma_eval(uma, os.path.join(fixtures, "s1p1.safetensors"), frames, folder,
                              "--json", "--precision", "fp64"))
    check(len(out) == len(cases), f"{len(out)} results for {len(cases)} frames")
    for c, r in zip(cases, out):
        s = c["systems"][0]
        e_ref = c["energy"][0]
        de = abs(r["energy"] - e_ref) / max(1.0, abs(e_ref))
        df = max_dev(r["forces"], [x for row in c["forces"][0] for x in row])
        if any(s["pbc"]):
            ds = max_dev(r["stress"], c["stress"][0])
            check(ds <= 1e-10, f"fixture {s['name']}: stress differs from fairchem's by {ds:.2e} eV/A^3")
        else:
            ds = float("nan")
            check(r["stress"] == [None] * 9, f"fixture {s['name']}: a stress for a non-periodic frame")
        print(f"fairchem {s['name']:10s} ({s['task']}, charge {s['charge']}, spin {s['spin']}): "
              f"rel dE {de:.1e}, max |dF| {df:.1e}, max |dsigma| {ds:.1e}")
        check(de <= 1e-10, f"fixture {s['name']}: energy {r['energy']!r} vs fairchem {e_ref!r} (rel {de:.2e})")
        check(df <= 1e-10, f"fixture {s['name']}: forces differ from fairchem's by {df:.2e} eV/A")


def read_structure(path):
    lines = open(path).read().splitlines()
    n = int(lines[0])
    v = [float(x) for x in re.search(r'Lattice="([^"]+)"', lines[1]).group(1).split()]
    assert all(v[k] == 0 for k in (1, 2, 3, 5, 6, 7)), "check_eval_values.py needs an orthogonal cell"
    assert all(line.split()[0] == "Cu" for line in lines[2:2 + n]), "check_eval_values.py reads Cu only"
    numbers = [29] * n
    positions = [[float(x) for x in line.split()[1:4]] for line in lines[2:2 + n]]
    return numbers, positions, [v[0:3], v[3:6], v[6:9]]


def matvec(a, v):
    return [sum(a[i][k] * v[k] for k in range(3)) for i in range(3)]


def rotation(axis, angle):
    x, y, z = (c / math.sqrt(sum(d * d for d in axis)) for c in axis)
    c, s, k = math.cos(angle), math.sin(angle), 1 - math.cos(angle)
    return [[c + x * x * k, x * y * k - z * s, x * z * k + y * s],
            [y * x * k + z * s, c + y * y * k, y * z * k - x * s],
            [z * x * k - y * s, z * y * k + x * s, c + z * z * k]]


def check_demo(uma, model, structure, folder):
    numbers, pos, cell = read_structure(structure)
    n = len(numbers)
    omat = {"task": "omat"}
    frames = [frame(numbers, pos, cell, [True] * 3, omat)]
    rot, shift, perm = rotation((1, 2, 3), 0.7), [0.3, -1.1, 2.5], list(range(n))[::-1]  # new atom j = old perm[j]
    frames.append(frame([numbers[j] for j in perm], [[a + b for a, b in zip(matvec(rot, pos[j]), shift)] for j in perm],
                        [matvec(rot, r) for r in cell], [True] * 3, omat))
    h = 1e-4
    displaced = [(17, 1), (53, 2)]
    for atom, k in displaced:
        for sign in (1, -1):
            p = [list(q) for q in pos]
            p[atom][k] += sign * h
            frames.append(frame(numbers, p, cell, [True] * 3, omat))
    strained = [(0, 0)]   # r -> (1 + eps) r with only eps[a][b] = +-h
    for a, b in strained:
        for sign in (1, -1):
            eps = [[(i == j) + (sign * h if (i, j) == (a, b) else 0) for j in range(3)] for i in range(3)]
            frames.append(frame(numbers, [matvec(eps, q) for q in pos], [matvec(eps, r) for r in cell], [True] * 3, omat))
    out = json.loads(uma_eval(uma, model, frames, folder, "--json", "--precision", "fp64"))
    e0, f0, s0 = out[0]["energy"], out[0]["forces"], out[0]["stress"]
    sigma = [s0[0:3], s0[3:6], s0[6:9]]

    f_rot = [x for j in perm for x in matvec(rot, f0[3 * j:3 * j + 3])]
    s_rot = [sum(rot[i][a] * sigma[a][b] * rot[j][b] for a in range(3) for b in range(3))
             for i in range(3) for j in range(3)]
    de = abs(out[1]["energy"] - e0) / abs(e0)
    df, ds = max_dev(out[1]["forces"], f_rot), max_dev(out[1]["stress"], s_rot)
    print(f"demo, rotated+translated+permuted copy: rel dE {de:.1e}, max |dF| {df:.1e}, max |dsigma| {ds:.1e}")
    check(de <= 1e-10, f"rotated copy: energy {out[1]['energy']!r} vs {e0!r}")
    check(df <= 1e-10, f"rotated copy: forces off the rotated forces by {df:.2e} eV/A")
    check(ds <= 1e-10, f"rotated copy: stress off R sigma R^T by {ds:.2e} eV/A^3")

    volume = cell[0][0] * cell[1][1] * cell[2][2]
    for m, (atom, k) in enumerate(displaced):
        fd = -(out[2 + 2 * m]["energy"] - out[3 + 2 * m]["energy"]) / (2 * h)
        f = f0[3 * atom + k]
        print(f"demo, force atom {atom} component {k}: {f:.10f}, central difference {fd:.10f}")
        check(abs(f - fd) <= 1e-7, f"force atom {atom} component {k}: {f!r} vs central difference {fd!r}")
    base = 2 + 2 * len(displaced)
    for m, (a, b) in enumerate(strained):
        fd = (out[base + 2 * m]["energy"] - out[base + 1 + 2 * m]["energy"]) / (2 * h) / volume
        print(f"demo, stress {a}{b}: {sigma[a][b]:.10f}, central difference {fd:.10f}")
        check(abs(sigma[a][b] - fd) <= 1e-7, f"stress {a}{b}: {sigma[a][b]!r} vs central difference {fd!r}")

    p = subprocess.run([uma, "eval", model, structure, "--task", "omat"], capture_output=True, text=True)
    table = p.stdout
    check(p.returncode == 0 and re.search(r"108 atoms, task omat.*energy +-?[0-9]+\.[0-9]+ eV.*stress", table, re.S),
          f"table: rc {p.returncode}, output {table[:300]!r} ... {p.stderr!r}")
    if p.returncode != 0:
        return
    energy = float(re.search(r"energy +(\S+) eV", table).group(1))
    forces = [float(x) for line in re.search(r"forces \(eV/A\)\n(.*?)\nstress", table, re.S).group(1).splitlines()
              for x in line.split()[1:]]
    stress = [float(x) for x in table.split("dE/d strain)")[1].split()[:9]]
    de, df, ds = abs(energy - e0) / abs(e0), max_dev(forces, f0), max_dev(stress, s0)
    print(f"demo, table (fp32) vs fp64: rel dE {de:.1e}, max |dF| {df:.1e}, max |dsigma| {ds:.1e}")
    check(len(forces) == 3 * n, f"table: {len(forces)} force components for {n} atoms")
    check(de <= 2e-5 and df <= 5e-5 and ds <= 2e-6, "table numbers are not the evaluated ones")


def main():
    if len(sys.argv) != 5:
        print(__doc__.strip())
        return 2
    uma, fixtures, model, structure = sys.argv[1:5]
    fixtures = os.environ.get("UMA_FIXTURES_DIR") or fixtures
    with tempfile.TemporaryDirectory() as folder:
        check_fixtures(uma, fixtures, folder)
        check_demo(uma, model, structure, folder)
    for f in failures:
        print("FAIL:", f)
    print("FAIL" if failures else "PASS tool.eval_bulk")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
