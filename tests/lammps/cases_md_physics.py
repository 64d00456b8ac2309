"""pair_style uma in MD: charge and spin, composition changes, NVE, NPT and minimize.

CASES: name -> case(host_dir, root_dir), run by run_case.py (each a ctest, lammps.pair_uma.NAME).
"""
import math
import os
import re

import numpy as np

from harness import (CU_BOX, DEMO_MODEL, HERE, MODEL, OUTPUT, PLUGIN, PRE, check, close, compare_to_reference,
                     dump_structure, lammps, read_dump, read_xyz, reference, thermo, write_molecule_data)


def case_molecule(h, r):
    """Shrink-wrapped (non-periodic) omol cation with charge 1 and spin 2, fp64, 1 and 2 ranks."""
    syms, pos = read_xyz(os.path.join(HERE, "..", "..", "examples", "structures", "ethanol_cation.extxyz"))
    order = ["C", "O", "H"]
    write_molecule_data(os.path.join(h, "mol.data"), syms, pos, order)
    base = PRE.format(plugin=PLUGIN) + "boundary s s s\nread_data mol.data\n" + \
        f"pair_style uma task omol charge 1 spin 2 precision fp64\npair_coeff * * {MODEL} C O H\n"
    ref = reference(h, r, syms, pos, np.zeros((3, 3)), (False,) * 3,
                    "--task omol --charge 1 --spin 2 --precision fp64")
    for np_ in (1, 2):
        tag = f"np{np_}"
        log = lammps(h, r, f"in.{tag}", base + OUTPUT.format(tag=tag), np_=np_)
        t, _ = thermo(log)
        _, _, d = read_dump(os.path.join(h, "dump." + tag))
        forces = np.stack([d["fx"], d["fy"], d["fz"]], 1)
        close(t["PotEng"], ref["energy"], 1e-10 * abs(ref["energy"]), f"[{tag}] energy")
        close(forces, np.array(ref["forces"]).reshape(-1, 3), 1e-9, f"[{tag}] forces")
        close(d["c_pe"], ref["atom_energies"], 1e-9, f"[{tag}] pe/atom")
        print(f"  molecule {tag}: matches the engine")
    # the charge and spin keywords reach the model
    log = lammps(h, r, "in.neutral", base.replace("charge 1 spin 2", "charge 0 spin 1") +
                 "thermo_style custom step pe\nrun 0\n")
    t, _ = thermo(log)
    check(abs(t["PotEng"] - ref["energy"]) > 1e-6, "charge/spin keywords had no effect on the energy")


def case_composition(h, r):
    """set type, delete_atoms and create_atoms during a run: the experts are merged again."""
    text = PRE.format(plugin=PLUGIN) + CU_BOX.format(ntypes=2) + f"""pair_style uma task omat precision fp64
pair_coeff * * {MODEL} Cu Ni
""" + OUTPUT.format(tag="a") + """set type 1 type/fraction 2 0.3 99
run 0
undump d
dump d all custom 1 dump.b id type x y z fx fy fz c_pe c_sa[*]
dump_modify d format float %.15g sort id
run 0
undump d
delete_atoms random count 7 no all NULL 1234
create_atoms 2 single 1.8075 0 0 units box
dump d all custom 1 dump.c id type x y z fx fy fz c_pe c_sa[*]
dump_modify d format float %.15g sort id
run 0
"""
    for np_ in (1, 2):
        log = lammps(h, r, f"in.np{np_}", text, np_=np_)
        check(log.count("experts merged again") >= 2,
              f"expected two re-merges to be reported on {np_} ranks")
        runs = log.split("Loop time")
        for tag, part in (("b", "\n".join(runs[:3])), ("c", log)):
            syms, pos, cell, _ = dump_structure(h, tag, {1: "Cu", 2: "Ni"})
            ref = reference(h, r, syms, pos, cell, (True,) * 3, "--task omat --precision fp64")
            compare_to_reference(h, tag, part, ref, 1e-9, 1e-10)
        print(f"  composition changes on {np_} ranks: re-merged, match the engine")


MD_BASE = """boundary p p p
lattice fcc 3.615
region box block 0 3 0 3 0 3
create_box 1 box
create_atoms 1 box
mass 1 63.546
pair_style uma task omat
pair_coeff * * {model} Cu
velocity all create 300 4928 loop geom
timestep 0.001
thermo 5
thermo_style custom step temp pe ke etotal press vol
thermo_modify format float %.10g
"""


def case_md(h, r):
    """NVE drift over two runs, the same trajectory on 2 ranks, NPT, minimize."""
    nve = PRE.format(plugin=PLUGIN) + MD_BASE.format(model=MODEL) + "fix 1 all nve\nrun {n}\nrun {n}\n"
    log = lammps(h, r, "in.nve1", nve.format(n=50))
    _, rows = thermo(log)
    first = thermo(log.split("Loop time")[0])[1][0]
    drift = abs(rows[-1]["TotEng"] - first["TotEng"]) / 108
    spread = max(abs(x["TotEng"] - first["TotEng"]) for x in rows) / 108
    check(spread < 1e-4, f"NVE energy not conserved: {spread:.2e} eV/atom")
    print(f"  NVE 100 steps (two runs) on 1 rank: |dE| {drift:.2e} eV/atom, max {spread:.2e}")
    # on 2 ranks, reneighbor every step: atoms migrate, ghost sets change
    log2 = lammps(h, r, "in.nve2", nve.replace("fix 1 all nve", "neigh_modify every 1 delay 0 check no\nfix 1 all nve")
                  .format(n=10), np_=2)
    rows1 = {int(x["Step"]): x for x in thermo(log.split("Loop time")[0])[1]}
    for x in thermo(log2)[1]:
        for col in ("PotEng", "TotEng", "Press"):
            ref = rows1[int(x["Step"])][col]
            close(x[col], ref, 2e-5 * max(1.0, abs(ref)), f"2-rank MD step {int(x['Step'])} {col}")
    builds = re.findall(r"Neighbor list builds = (\d+)", log2)
    check(builds and int(builds[-1]) >= 10, "the 2-rank run did not reneighbor every step")
    print("  NVE on 2 ranks, reneighboring every step, follows the 1-rank trajectory (20 steps, two runs)")

    # NPT with the copper demo model: the barostat holds the target pressure.  32 atoms
    # (2x2x2 cells; the barostat does not need more, and costs a third of 108's time).
    # Measured: mean 9990 bar over steps 200-400, standard deviation 1214 bar (108 atoms: 10000).
    log = lammps(h, r, "in.npt", PRE.format(plugin=PLUGIN) +
                 MD_BASE.format(model=DEMO_MODEL).replace("block 0 3 0 3 0 3", "block 0 2 0 2 0 2") +
                 "thermo 1\nfix 1 all npt temp 300 300 0.1 iso 10000 10000 0.2\nrun 400\n")
    _, rows = thermo(log)
    press = [x["Press"] for x in rows if 200 <= int(x["Step"]) <= 400]
    vols = [x["Volume"] for x in rows]
    mean = sum(press) / len(press)
    check(len(press) == 201 and all(math.isfinite(v) for v in vols) and abs(mean - 10000) < 500,
          f"NPT: mean pressure {mean:.0f} bar over steps 200-400, target 10000 +- 500")
    print(f"  NPT (demo model, 32 atoms, 10000 bar): mean pressure {mean:.0f} bar over steps 200-400 "
          f"(standard deviation {float(np.std(press)):.0f} bar); "
          f"volume {vols[0]:.2f} -> {vols[-1]:.2f} A^3")

    # minimize with the copper demo model (trained on EAM): a rattled crystal relaxes
    # back onto the perfect lattice, whose forces vanish by symmetry; the final
    # energy equals a plain evaluation of the perfect lattice.
    demo = (MD_BASE.format(model=DEMO_MODEL).replace("velocity all create 300 4928 loop geom\n", "")
            .replace("pair_style uma task omat", "pair_style uma task omat precision fp64"))
    perfect = lammps(h, r, "in.perfect", PRE.format(plugin=PLUGIN) + demo +
                     "thermo_modify format float %.12g\nrun 0\n")
    e_perfect = thermo(perfect)[0]["PotEng"]
    log = lammps(h, r, "in.min", PRE.format(plugin=PLUGIN) + demo +
                 "thermo_modify format float %.12g\ndisplace_atoms all random 0.1 0.1 0.1 9 units box\n"
                 "min_modify line quadratic\nminimize 0 1e-4 500 5000\n")
    m = re.search(r"Energy initial, next-to-last, final =\s*\n\s*(\S+)\s+(\S+)\s+(\S+)", log)
    f = re.search(r"Force two-norm initial, final = (\S+) (\S+)", log)
    check(m is not None and f is not None, "minimize printed no energies or forces")
    e0, e1, fnorm = float(m.group(1)), float(m.group(3)), float(f.group(2))
    check("Stopping criterion = force tolerance" in log and fnorm < 1e-4,
          f"minimize did not reach the force tolerance 1e-4 eV/A (final force norm {fnorm:.2e})")
    check(abs(e1 - e_perfect) < 1e-4,
          f"minimized energy {e1:.8f} eV is not the perfect lattice's {e_perfect:.8f} eV")
    print(f"  minimize (demo model): {e0:.6f} -> {e1:.8f} eV, force norm {fnorm:.1e} eV/A; "
          f"perfect lattice {e_perfect:.8f} eV")


CASES = {
    "molecule": case_molecule,
    "composition": case_composition,
    "md": case_md,
}
