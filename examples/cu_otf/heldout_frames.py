#!/usr/bin/env python3
"""heldout.dump + heldout.thermo (from in.eam_heldout) -> heldout.extxyz.

Energy in eV, forces in eV/A and stress = -(virial pressure)/nktv2p in eV/A^3
(ASE's sign).  usage: heldout_frames.py [DIR]
"""
import os
import sys

NKTV2P = 1.6021765e6   # metal units: bar per eV/A^3

here = sys.argv[1] if len(sys.argv) > 1 else "."
thermo = {}
for line in open(os.path.join(here, "heldout.thermo")):
    if line.startswith("#"):
        continue
    v = line.split()
    thermo[int(v[0])] = [float(x) for x in v[1:]]
lines = open(os.path.join(here, "heldout.dump")).read().splitlines()
out = []
i = 0
while i < len(lines):
    step = int(lines[i + 1])
    n = int(lines[i + 3])
    lo_hi = [[float(x) for x in lines[i + 5 + k].split()[:2]] for k in range(3)]
    cell = [hi - lo for lo, hi in lo_hi]
    rows = [l.split() for l in lines[i + 9:i + 9 + n]]
    if step not in thermo:   # the dump's first snapshot has no printed energy
        i += 9 + n
        continue
    pe, pxx, pyy, pzz, pxy, pxz, pyz = thermo[step]
    s = [-p / NKTV2P for p in (pxx, pxy, pxz, pxy, pyy, pyz, pxz, pyz, pzz)]
    out.append(f"{n}")
    out.append(f'Lattice="{cell[0]} 0 0 0 {cell[1]} 0 0 0 {cell[2]}" Properties=species:S:1:pos:R:3:forces:R:3 '
               f'energy={pe!r} stress="{" ".join(repr(x) for x in s)}" task=omat pbc="T T T"')
    for r in rows:
        x = [float(r[2 + k]) - lo_hi[k][0] for k in range(3)]
        out.append("Cu " + " ".join(repr(v) for v in x) + " " + " ".join(r[5:8]))
    i += 9 + n
open(os.path.join(here, "heldout.extxyz"), "w").write("\n".join(out) + "\n")
print(f"wrote {sum(1 for l in out if l.startswith('Lattice'))} frames to heldout.extxyz")
