"""Writes the structures scripts/gpu_check.sh times, as extended XYZ.

Pure Python (no numpy, no ASE): it runs wherever python3 does.  Each crystal
is a supercell of the conventional cubic cell, every coordinate displaced by
a seeded uniform random amount in [-rattle, rattle] A.  The molecule is the
zig-zag n-alkane C33H68 (101 atoms, no cell, task omol, charge 0, spin 1).

usage: make_structures.py OUTDIR [NAME ...]
  names: cu_108 (3x3x3), cu_256 (4x4x4), cu_1000 (5x5x10), cu_4000 (10x10x10),
         cu_8000 (10x10x20),
         si_64 (2x2x2), si_1000 (5x5x5), c33h68 (the molecule); default: all of them.
Prints one line per file: path and number of atoms.
"""
import math
import os
import random
import sys

CU_A = 3.615   # fcc Cu, A
SI_A = 5.431   # diamond Si, A
RATTLE = 0.05  # A

FCC = [(0.0, 0.0, 0.0), (0.0, 0.5, 0.5), (0.5, 0.0, 0.5), (0.5, 0.5, 0.0)]
DIAMOND = FCC + [(x + 0.25, y + 0.25, z + 0.25) for (x, y, z) in FCC]

# name -> (symbol, lattice constant, basis in fractions of the cubic cell, repeats)
CRYSTALS = {
    "cu_108": ("Cu", CU_A, FCC, (3, 3, 3)),
    "cu_1000": ("Cu", CU_A, FCC, (5, 5, 10)),
    "cu_4000": ("Cu", CU_A, FCC, (10, 10, 10)),
    "cu_256": ("Cu", CU_A, FCC, (4, 4, 4)),
    "cu_8000": ("Cu", CU_A, FCC, (10, 10, 20)),
    "si_64": ("Si", SI_A, DIAMOND, (2, 2, 2)),
    "si_1000": ("Si", SI_A, DIAMOND, (5, 5, 5)),
}


def supercell(a, basis, reps, rng):
    nx, ny, nz = reps
    positions = []
    for i in range(nx):
        for j in range(ny):
            for k in range(nz):
                for (u, v, w) in basis:
                    positions.append(tuple(a * (c + f) + rng.uniform(-RATTLE, RATTLE)
                                           for c, f in ((i, u), (j, v), (k, w))))
    return positions, (a * nx, a * ny, a * nz)


def alkane(carbons=33):
    """Zig-zag n-alkane C_nH_(2n+2): C-C 1.54 A, C-H 1.09 A, tetrahedral angles.

    Returns (symbols, positions)."""
    half = math.radians(109.5) / 2
    symbols, positions, backbone = [], [], []
    for i in range(carbons):
        c = (i * 1.54 * math.sin(half), (i % 2) * 1.54 * math.cos(half), 0.0)
        symbols.append("C")
        positions.append(c)
        backbone.append(c)
        up = -1.0 if i % 2 == 0 else 1.0
        for z in (0.89, -0.89):
            symbols.append("H")
            positions.append((c[0], c[1] + up * 0.63, z))
    for c, direction in ((backbone[0], -1.0), (backbone[-1], 1.0)):  # chain-end hydrogens
        symbols.append("H")
        positions.append((c[0] + direction * 1.09, c[1], c[2]))
    return symbols, positions


def write_molecule(path, symbols, positions):
    with open(path, "w") as out:
        out.write("%d\n" % len(positions))
        out.write('Properties=species:S:1:pos:R:3 task=omol charge=0 spin=1 pbc="F F F"\n')
        for symbol, (x, y, z) in zip(symbols, positions):
            out.write("%-2s %16.8f %16.8f %16.8f\n" % (symbol, x, y, z))


def write_extxyz(path, symbol, positions, box):
    lx, ly, lz = box
    with open(path, "w") as out:
        out.write("%d\n" % len(positions))
        out.write('Lattice="%.6f 0.0 0.0 0.0 %.6f 0.0 0.0 0.0 %.6f" Properties=species:S:1:pos:R:3 '
                  'task=omat pbc="T T T"\n' % (lx, ly, lz))
        for (x, y, z) in positions:
            out.write("%-2s %16.8f %16.8f %16.8f\n" % (symbol, x, y, z))


def main(argv):
    if len(argv) < 2 or argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if len(argv) >= 2 else 2
    outdir = argv[1]
    names = argv[2:] or sorted(CRYSTALS) + ["c33h68"]
    unknown = [n for n in names if n not in CRYSTALS and n != "c33h68"]
    if unknown:
        print("make_structures.py: unknown structure(s) %s; known: %s" % (", ".join(unknown),
                                                                          ", ".join(sorted(CRYSTALS) + ["c33h68"])),
              file=sys.stderr)
        return 2
    os.makedirs(outdir, exist_ok=True)
    for n, name in enumerate(names):
        path = os.path.join(outdir, name + ".extxyz")
        if name == "c33h68":
            symbols, positions = alkane()
            write_molecule(path, symbols, positions)
            print("%s %d" % (path, len(positions)))
            continue
        symbol, a, basis, reps = CRYSTALS[name]
        rng = random.Random(20260704 + n)
        positions, box = supercell(a, basis, reps, rng)
        write_extxyz(path, symbol, positions, box)
        print("%s %d" % (path, len(positions)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
