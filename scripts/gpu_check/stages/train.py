"""The train stage: fix uma/train on the device, 1 rank, the tiny model.  `run 0` with the pair
style comes before the fix line: the pair style evaluates (and sets up the device) before the
trainer exists, the order that once broke deterministic mode on a GPU.  Then 20 NVE steps: EAM
labels every 4 steps, an optimizer step every 2, a print every 2 of them.  Checks: the run ends,
at least 5 loss lines, the last loss below the first, 0 host reads per optimizer step (1 rank),
and no MPI call off the main thread or inside autograd (the PMPI probe)."""
import glob
import os
import shutil

from ..report.train import train_check

INPUT = """# written by scripts/gpu_check.sh: fix uma/train on the device; the pair style runs before the fix exists
plugin          load ${plugin}
units           metal
atom_style      atomic
boundary        p p p
lattice         fcc 3.615
region          box block 0 2 0 2 0 2
create_box      1 box
create_atoms    1 box
mass            1 63.546
pair_style      uma task omat device ${device}
pair_coeff      * * ${model} Cu
run             0
fix             learn all uma/train 2 label 4 lr 3e-3 print 2 reference eam coeff 1 1 Cu_u3.eam
velocity        all create 500.0 4242 loop geom
fix             1 all nve
thermo          5
run             20
"""


def st_train(stage):
    check = stage.check
    stage.deadline(check.limits["train"])
    d = check.build + "/train"
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    if not os.path.isfile(check.lsrc + "/potentials/Cu_u3.eam"):
        stage.say("no %s/potentials/Cu_u3.eam" % check.lsrc)
        return 1
    with open(d + "/in.train", "w") as f:
        f.write(INPUT)
    for old in glob.glob(d + "/probe.*"):
        os.remove(old)
    stage.plan(10)
    rc = stage.limited(10, "lmp fix uma/train",
                       check.mpirun + ["-np", "1", "-x", "LAMMPS_POTENTIALS", "-x", "LD_PRELOAD=" + check.probe,
                                       "-x", "UMA_MPI_PROBE=%s/probe" % d, check.linst + "/bin/lmp", "-in", "in.train",
                                       "-log", "log.train", "-screen", "none", "-var", "plugin", check.plugin,
                                       "-var", "model", check.tiny_model, "-var", "device", check.device],
                       cwd=d, env=check.lammps_env(LAMMPS_POTENTIALS=check.lsrc + "/potentials"))
    return stage.report(train_check, check.details + "/train.json", d + "/log.train", rc, 1, d + "/probe")
