"""What the checking stages run on: the structures (structures: bench/make_structures.py), the
full-size UMA-S-shaped model of random weights (model_init: `uma init`), the 108-atom Cu data
file of the ranks, devices, kokkos and pip_route stages (and its extended XYZ), and the fp64
LAMMPS input of the devices, kokkos and pip_route stages."""
import os
import random
import shutil

GPU_STRUCTURES = ("cu_1000", "cu_4000", "si_1000", "c33h68")
CPU_STRUCTURES = ("cu_108", "si_64", "c33h68")

NVE_INPUT = """# written by scripts/gpu_check.sh: one fp64 input, run on the device given
plugin          load ${plugin}
units           metal
atom_style      atomic
boundary        p p p
read_data       ${data}
pair_style      uma task omat precision fp64 device ${device}
pair_coeff      * * ${model} Cu
%s
thermo_style    custom step pe ke etotal press pxx pyy pzz pxy pxz pyz %s
thermo_modify   format float %%.17g
dump            f all custom 100 ${dumpfile} id fx fy fz
dump_modify     f format float %%.17g sort id
run             0
velocity        all create 300.0 4928459 loop geom
timestep        0.001
fix             1 all nve
thermo          10
run             100
"""


def st_structures(stage):
    check = stage.check
    shutil.rmtree(check.structs, ignore_errors=True)
    names = GPU_STRUCTURES if check.mode == "gpu" else CPU_STRUCTURES
    return stage.run([check.hpy, check.root + "/bench/make_structures.py", check.structs] + list(names))


def st_model_init(stage):
    check = stage.check
    try:
        os.remove(check.model)
    except FileNotFoundError:
        pass
    rc = stage.run([check.uma, "init", check.root + "/bench/uma-s-1p1-shape.json", check.model, "--seed", "2026"])
    return rc if rc != 0 else stage.run([check.uma, "info", check.model])


def cu108_atoms():
    """(the cell's edge, the atoms' positions): 3x3x3 fcc Cu cells (a = 3.615 A), every coordinate
    displaced by up to 0.12 A (seeded)."""
    a, n = 3.615, 3
    rng = random.Random(4242)
    basis = [(0, 0, 0), (0.5, 0.5, 0), (0.5, 0, 0.5), (0, 0.5, 0.5)]
    atoms = [[(i + b[0]) * a + rng.uniform(-0.12, 0.12), (j + b[1]) * a + rng.uniform(-0.12, 0.12),
              (k + b[2]) * a + rng.uniform(-0.12, 0.12)]
             for i in range(n) for j in range(n) for k in range(n) for b in basis]
    return n * a, atoms


def write_cu108(path):
    """cu108_atoms as a LAMMPS data file.  One data file for every run: create_atoms numbers atoms
    by the rank that creates them, so 1 and 2 ranks would give the same atoms other IDs."""
    edge, atoms = cu108_atoms()
    with open(path, "w") as f:
        f.write("fcc Cu for scripts/gpu_check.sh (ranks)\n\n%d atoms\n1 atom types\n\n" % len(atoms))
        for lo, hi in (("xlo", "xhi"), ("ylo", "yhi"), ("zlo", "zhi")):
            f.write("0 %.17g %s %s\n" % (edge, lo, hi))
        f.write("\nMasses\n\n1 63.546\n\nAtoms # atomic\n\n")
        for i, x in enumerate(atoms, 1):
            f.write("%d 1 %.17g %.17g %.17g\n" % (i, x[0], x[1], x[2]))


def write_cu108_extxyz(path):
    """The same atoms, in the same order, as extended XYZ (`uma eval`'s input)."""
    edge, atoms = cu108_atoms()
    with open(path, "w") as f:
        f.write('%d\nLattice="%.17g 0 0 0 %.17g 0 0 0 %.17g" Properties=species:S:1:pos:R:3 pbc="T T T"\n'
                % (len(atoms), edge, edge, edge))
        for x in atoms:
            f.write("Cu %.17g %.17g %.17g\n" % (x[0], x[1], x[2]))


def cu108(check, folder):
    """The ranks stage's data file, or a new one in FOLDER where that stage did not run."""
    data = check.ranks_dir + "/cu108.data"
    if not os.path.isfile(data):
        data = folder + "/cu108.data"
        write_cu108(data)
    return data


def write_nve_input(path, line="", thermo_columns="", plugin_load=True):
    """The fp64 input on the device of -var device: run 0 with the forces dumped, then 100 NVE
    steps with thermo every 10; LINE goes before the thermo settings, THERMO_COLUMNS after the
    thermo's own; without its `plugin load` where PLUGIN_LOAD is false (an lmp that finds the
    plugin itself)."""
    text = NVE_INPUT % (line, thermo_columns)
    with open(path, "w") as f:
        f.write(text if plugin_load else text.replace("plugin          load ${plugin}\n", ""))
