"""The lammps_md stage: NVE MD of bulk fcc Cu in LAMMPS with pair_style uma (1,000 atoms, 200 steps
on a GPU), eager, and on a GPU but with --quick its replayed twin (cuda_graph yes), whose thermo
must follow the eager run's within fp32's float-atomics bound.  0.1 fs steps: the random weights'
forces (a few eV/A) would carry atoms far from the crystal in 200 steps of 1 fs; the cost of a
step does not depend on it.  Reneighbouring every 10 steps and sorting the atoms every 50: the
replayed run must follow both (same layout, a new order, new ghosts).  Per-atom stresses dumped
every 50 steps (steps 0, 50, ...): those steps ask for per-atom virials and run eagerly; the
capture of the other steps must stay cached and replay right after them."""
import os
import re

from ..report.common import read_text
from ..report.lammps_log import lammps_figures
from ..report.replay import lammps_replay

INPUT = """# written by scripts/gpu_check.sh: NVE of bulk fcc Cu through pair_style uma
plugin          load ${plugin}
units           metal
atom_style      atomic
atom_modify     sort 50 2.0
boundary        p p p
lattice         fcc 3.615
region          box block 0 ${nx} 0 ${ny} 0 ${nz}
create_box      1 box
create_atoms    1 box
mass            1 63.546
pair_style      uma task omat device ${device} cuda_graph ${graph}
pair_coeff      * * ${model} Cu
velocity        all create 300.0 4928459 loop geom
neigh_modify    every 10 delay 0 check no
timestep        0.0001
fix             1 all nve
compute         sa all stress/atom NULL virial
dump            sa all custom 50 stress.${graph}.dump id c_sa[1] c_sa[2] c_sa[3]
thermo          20
thermo_style    custom step temp pe ke etotal press
run             ${steps}
"""


def md_runs(check):
    """(cells nx ny nz, steps, the cuda_graph settings run): the replayed twin CUDA only, and not in --quick."""
    if check.mode == "gpu":
        return (5, 5, 10), 200, ("no",) if check.quick else ("no", "yes")
    return (3, 3, 3), 10, ("no",)


def st_lammps_md(stage):
    check, rc = stage.check, 0
    stage.deadline(check.limits["lammps_md"])
    cells, steps, graphs = md_runs(check)
    if check.mode == "gpu" and check.quick:
        stage.say("--quick: the eager run only (no cuda_graph yes run, no replay check)")
    d = check.build + "/md"
    os.makedirs(d, exist_ok=True)
    with open(d + "/in.uma_nve", "w") as f:
        f.write(INPUT)
    stage.plan(40 * len(graphs))
    for graph in graphs:
        log = "log.graph.lammps" if graph == "yes" else "log.lammps"
        stage.say("== LAMMPS NVE, cuda_graph " + graph)
        if os.path.exists(os.path.join(d, log)):
            os.remove(os.path.join(d, log))
        r = stage.limited(40, "lmp NVE cuda_graph " + graph,
                          check.mpirun + ["-np", "1", check.linst + "/bin/lmp", "-in", "in.uma_nve", "-log", log,
                                          "-var", "plugin", check.plugin, "-var", "model", check.model,
                                          "-var", "device", check.device, "-var", "nx", str(cells[0]),
                                          "-var", "ny", str(cells[1]), "-var", "nz", str(cells[2]),
                                          "-var", "steps", str(steps), "-var", "graph", graph],
                          cwd=d, env=check.lammps_env())
        if graph == "no":
            stage.report(lammps_figures, os.path.join(d, log), check.details + "/lammps_md.json")
            performance = re.search(r"^Performance:", read_text(os.path.join(d, log)), re.M)
            if r != 0 or not performance:
                rc = 1
        else:   # the replayed run against the eager one, thermo within fp32's float-atomics bound
            rc |= stage.report(lammps_replay, d + "/log.lammps", os.path.join(d, log), r,
                               check.details + "/lammps_md_replay.json", "1e-5")
    return 1 if rc else 0
