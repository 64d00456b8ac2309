"""The largest stage, the largest system of the check: LAMMPS's own bench/in.eam geometry (fcc Cu,
20 x 20 x 20 cells: 32,000 atoms) with the full-size UMA-S-shaped model through pair_style uma
device cuda and a memory budget (UMA_GPU_LARGEST_GB, default 120 of the H200's 140 GB):
timesteps/s, the memory plan and the run's peak GPU memory from the pair style's log (the
prediction against the peak is a figure, not a check).  In the CPU proof: 4 x 4 x 4 cells (256
atoms) and a 1 GB budget, so that the recomputed path runs."""
import os
import re

from ..report.bench import largest_run
from ..report.common import read_text

INPUT = """# written by scripts/gpu_check.sh: bench/in.eam's geometry through pair_style uma with a memory budget
plugin          load ${plugin}
units           metal
atom_style      atomic
lattice         fcc 3.615
region          box block 0 ${n} 0 ${n} 0 ${n}
create_box      1 box
create_atoms    1 box
mass            1 63.546
velocity        all create 1600.0 376847 loop geom
pair_style      uma task omat device ${device} memory ${gb}
pair_coeff      * * ${model} Cu
neighbor        1.0 bin
neigh_modify    every 5 delay 0 check yes
timestep        0.0001
fix             1 all nve
thermo          1
run             ${steps}
"""
SHOWN = re.compile(r"^pair uma|^Loop time|^Performance|ERROR")


def largest_size(check):
    """(cells per side, memory budget in GB, steps)."""
    if check.mode == "gpu":
        return 20, check.env.get("UMA_GPU_LARGEST_GB") or "120", 3
    return 4, "1", 2


def st_largest(stage):
    check = stage.check
    stage.deadline(check.limits["largest"])
    n, gb, steps = largest_size(check)
    d = check.build + "/largest"
    os.makedirs(d, exist_ok=True)
    with open(d + "/in.largest", "w") as f:
        f.write(INPUT)
    stage.plan(10)
    if os.path.exists(d + "/log.lammps"):
        os.remove(d + "/log.lammps")
    r = stage.limited(10, "lmp in.eam geometry, %d atoms" % (4 * n * n * n),
                      check.mpirun + ["-np", "1", check.linst + "/bin/lmp", "-in", "in.largest", "-log", "log.lammps",
                                      "-screen", "none", "-var", "plugin", check.plugin, "-var", "model", check.model,
                                      "-var", "device", check.device, "-var", "n", str(n), "-var", "gb", gb,
                                      "-var", "steps", str(steps)], cwd=d, env=check.lammps_env())
    stage.say(*[line for line in read_text(d + "/log.lammps").splitlines() if SHOWN.search(line)])
    return stage.report(largest_run, d + "/log.lammps", r, check.details + "/largest.json", check.mode)
