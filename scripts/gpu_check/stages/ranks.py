"""The ranks stage: pair_style uma on 2 ranks against 1, fp64, both ranks on the one device:
energies, pressures, forces and positions of run 0 and 10 NVE steps must agree to 1e-10
(relative to each quantity's largest value), the 2-rank run must use the halo exchange, and the
PMPI probe preloaded into it must see more than 100 MPI calls per rank, none off LAMMPS's main
thread and none inside an autograd pass.  The transfer counts of `compute pair uma` are recorded
per step.  The tiny random model first; the charge-balanced one (a sum over the ranks in every
block) if it fits the time."""
import glob
import os
import shutil

from ..report.ranks import ranks_case, ranks_skip
from .inputs import write_cu108

INPUT = """# written by scripts/gpu_check.sh: pair_style uma on 1 and on 2 ranks, fp64, compared
plugin          load ${plugin}
units           metal
atom_style      atomic
boundary        p p p
read_data       ${data}
pair_style      uma task omat precision fp64 device ${device}
pair_coeff      * * ${model} Cu
compute         pu all pair uma
velocity        all create 300.0 4928459 loop geom
fix             1 all nve
thermo          1
thermo_style    custom step pe ke etotal press pxx pyy pzz pxy pxz pyz c_pu[1] c_pu[2] c_pu[5] c_pu[6]
thermo_modify   format float %.17g
dump            f all custom 10 ${dumpfile} id xu yu zu fx fy fz
dump_modify     f format float %.17g sort id
run             0
run             10
"""


def run_case(stage, name, model, reserve_1, reserve_2):
    """One model on 1 rank and on 2 (the probe preloaded), compared; RESERVE_1 and RESERVE_2:
    what `limited` keeps for each run."""
    check, d = stage.check, stage.check.ranks_dir
    lmp = [check.linst + "/bin/lmp", "-in", d + "/in.ranks", "-screen", "none", "-var", "plugin", check.plugin,
           "-var", "model", model, "-var", "device", check.device, "-var", "data", d + "/cu108.data"]
    stage.say("== %s (%s): 1 rank" % (name, os.path.basename(model)))
    rc1 = stage.limited(reserve_1, name + ": 1 rank",
                        check.mpirun + ["-np", "1", "-x", "OMP_NUM_THREADS=1"] + lmp +
                        ["-log", "%s/log.%s.1" % (d, name), "-var", "dumpfile", "%s/%s.1.dump" % (d, name)],
                        env=check.lammps_env())
    stage.say("== %s: 2 ranks, the PMPI probe preloaded" % name)
    for old in glob.glob("%s/probe.%s.*" % (d, name)):
        os.remove(old)
    rc2 = stage.limited(reserve_2, name + ": 2 ranks",
                        check.mpirun + ["-np", "2", "-x", "OMP_NUM_THREADS=1", "-x", "LD_PRELOAD=" + check.probe,
                                        "-x", "UMA_MPI_PROBE=%s/probe.%s" % (d, name)] + lmp +
                        ["-log", "%s/log.%s.2" % (d, name), "-var", "dumpfile", "%s/%s.2.dump" % (d, name)],
                        env=check.lammps_env())
    return stage.report(ranks_case, check.details + "/ranks.json", name, model, "1e-10",
                        rc1, "%s/log.%s.1" % (d, name), "%s/%s.1.dump" % (d, name),
                        rc2, "%s/log.%s.2" % (d, name), "%s/%s.2.dump" % (d, name), "%s/probe.%s" % (d, name))


def st_ranks(stage):
    check, d, rc = stage.check, stage.check.ranks_dir, 0
    stage.deadline(check.limits["ranks"])
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    with open(d + "/in.ranks", "w") as f:
        f.write(INPUT)
    write_cu108(d + "/cu108.data")
    t0 = stage.now()
    stage.plan(15)
    rc |= run_case(stage, "tiny", check.tiny_model, 5, 10)
    took = stage.now() - t0
    # the balanced model is about twice the tiny one's size
    if stage.left() > 2 * took + 5:
        stage.plan(20)
        rc |= run_case(stage, "balanced", check.balanced_model, 8, 12)
    else:
        stage.say("== balanced: not run: %d s left of the stage's limit, the tiny model's pair took %d s"
                  % (stage.left(), took))
        stage.report(ranks_skip, check.details + "/ranks.json", "balanced", check.balanced_model,
                     "not run: %d s left of the stage's limit of %d s, the tiny model's pair took %d s"
                     % (stage.left(), stage.limit, took))
    return 1 if rc else 0
