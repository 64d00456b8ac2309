"""UMA-S in LAMMPS from Python: LAMMPS's own Python module, then ASE's LAMMPSlib calculator.

usage: python3 uma_from_python.py [--plugin umaplugin.so] [--model MODEL] [--json]

The plugin is loaded from --plugin, or found by LAMMPS through LAMMPS_PLUGIN_PATH.
Part 1 drives LAMMPS with commands and reads the energy (a compute) and the forces
(gather_atoms) of a rattled 108-atom Cu cell; part 2 evaluates the same structure
through ASE's LAMMPSlib calculator and relaxes it for a few BFGS steps.  --json
prints both parts' energies and forces as one JSON line at the end (the test reads it).
"""
import argparse
import json
import os

import numpy as np
from ase.build import bulk
from ase.calculators.lammpslib import LAMMPSlib
from ase.optimize import BFGS
from lammps import LMP_STYLE_GLOBAL, LMP_TYPE_SCALAR, lammps

HERE = os.path.dirname(os.path.abspath(__file__))


def structure():
    atoms = bulk("Cu", "fcc", a=3.615, cubic=True).repeat((3, 3, 3))
    atoms.rattle(stdev=0.05, seed=7)
    return atoms


def with_lammps_module(atoms, plugin, model):
    lmp = lammps(cmdargs=["-screen", "none", "-log", "none"])
    if plugin:
        lmp.command(f"plugin load {plugin}")
    lmp.commands_string(f"""
units metal
atom_style atomic
atom_modify map array sort 0 0
boundary p p p
region box block 0 {atoms.cell[0, 0]} 0 {atoms.cell[1, 1]} 0 {atoms.cell[2, 2]} units box
create_box 1 box
mass 1 63.546
""")
    for x, y, z in atoms.positions:
        lmp.command(f"create_atoms 1 single {x:.17g} {y:.17g} {z:.17g} units box remap yes")
    lmp.commands_string(f"""
pair_style uma task omat precision fp64
pair_coeff * * {model} Cu
run 0
""")
    energy = lmp.extract_compute("thermo_pe", LMP_STYLE_GLOBAL, LMP_TYPE_SCALAR)
    n = lmp.get_natoms()
    if n != len(atoms):
        raise SystemExit(f"LAMMPS holds {n} atoms, the structure {len(atoms)}")
    forces = np.array(lmp.gather_atoms("f", 1, 3)[:]).reshape(n, 3)   # ordered by atom ID
    lmp.close()
    return energy, forces


def with_ase(atoms, plugin, model):
    commands = [f"plugin load {plugin}"] if plugin else []
    commands += ["pair_style uma task omat precision fp64", f"pair_coeff * * {model} Cu"]
    atoms = atoms.copy()
    atoms.calc = LAMMPSlib(lmpcmds=commands, atom_types={"Cu": 1}, keep_alive=True)
    energy, forces = atoms.get_potential_energy(), atoms.get_forces()
    BFGS(atoms, logfile=None).run(fmax=0.05, steps=5)
    return energy, forces, atoms.get_potential_energy()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--plugin", default="")
    p.add_argument("--model", default=os.path.join(HERE, "..", "..", "potentials", "uma-s-cu-eam-demo.safetensors"))
    p.add_argument("--json", action="store_true")
    a = p.parse_args()
    atoms = structure()
    e1, f1 = with_lammps_module(atoms, a.plugin, a.model)
    print(f"lammps module: energy {e1:.10f} eV, largest force component {np.abs(f1).max():.6f} eV/A")
    e2, f2, e_relaxed = with_ase(atoms, a.plugin, a.model)
    print(f"ASE LAMMPSlib: energy {e2:.10f} eV, largest force component {np.abs(f2).max():.6f} eV/A")
    print(f"ASE BFGS, 5 steps: energy {e_relaxed:.10f} eV")
    if a.json:
        print(json.dumps({"module": {"energy": e1, "forces": f1.tolist()},
                          "ase": {"energy": e2, "forces": f2.tolist(), "relaxed_energy": e_relaxed},
                          "positions": atoms.positions.tolist(), "cell": atoms.cell[:].tolist()}))


if __name__ == "__main__":
    main()
