"""The kokkos stage: pair_style uma/kk under LAMMPS's KOKKOS package on CUDA (the user's KOKKOS
CUDA LAMMPS and the plugin built against it, prebuilt by the kokkos_build stage of --prebuild):
-k on g 1 -sf kk against pair_style uma device cuda on the same fp64 input (the devices stage's:
run 0, then 100 NVE steps, fix nve becoming Kokkos's nve/kk) on 1 and 2 ranks, with the per-step
transfers of `compute pair uma`; then the steps/s of both on 1,000 Cu atoms with the full-size
model (fp32, 100 NVE steps).  Where uma/kk fails on 1 rank and compute-sanitizer is there, LAMMPS
with -k on g 1 and an empty input runs again under it, to show which kernel touched what."""
import os
import re
import shutil

from ..report.common import read_text
from ..report.devices import kokkos_check, kokkos_speed
from ..runner import STDOUT
from .inputs import cu108, write_nve_input

# newton on: uma/kk stays in place on several ranks (Kokkos's GPU default is off)
KOKKOS_FLAGS = ["-k", "on", "g", "1", "-sf", "kk", "-pk", "kokkos", "newton", "on", "neigh", "half"]
SPEED_INPUT = """# written by scripts/gpu_check.sh: NVE of 1,000 fcc Cu atoms, full-size model, fp32
plugin          load ${plugin}
units           metal
atom_style      atomic
boundary        p p p
lattice         fcc 3.615
region          box block 0 5 0 5 0 10
create_box      1 box
create_atoms    1 box
mass            1 63.546
pair_style      uma task omat device cuda
pair_coeff      * * ${model} Cu
velocity        all create 300.0 4928459 loop geom
neigh_modify    every 10 delay 0 check no
timestep        0.0001
fix             1 all nve
thermo          50
run             10
run             100
"""


def kk_run(stage, reserve, label, nranks, infile, log, *args):
    """The KOKKOS CUDA lmp on NRANKS ranks with the uma/kk plugin."""
    check = stage.check
    stage.say("== " + label)
    env = check.with_env(LD_LIBRARY_PATH="%s:%s" % (check.kk_libs, check.env.get("LD_LIBRARY_PATH", "")))
    lmp = [check.kk + "/lammps/bin/lmp", "-in", infile, "-screen", "none", "-log", log, "-var", "plugin",
           check.kk + "/umaplugin.so"]
    return stage.limited(reserve, label, check.mpirun + ["-np", str(nranks)] + lmp + list(args), env=env)


def sanitize(stage, d):
    """LAMMPS with -k on g 1 and an empty input (no plugin) under compute-sanitizer."""
    check = stage.check
    stage.say("== uma/kk failed on 1 rank: LAMMPS with -k on g 1 and an empty input under compute-sanitizer "
              "(kokkos/sanitizer.txt)")
    env = check.with_env(LD_LIBRARY_PATH="%s:%s" % (check.kk_libs, check.env.get("LD_LIBRARY_PATH", "")))
    rc = stage.limited(10, "compute-sanitizer lmp -k on g 1",
                       check.mpirun + ["-np", "1", "compute-sanitizer", "--print-limit", "4",
                                       check.kk + "/lammps/bin/lmp", "-k", "on", "g", "1", "-sf", "kk", "-in",
                                       "/dev/null"],
                       stdout=d + "/sanitizer.txt", stderr=STDOUT, env=env)
    stage.say("(exit %d)" % rc)
    stage.say(*[line for line in read_text(d + "/sanitizer.txt").splitlines() if not re.match(r"^\s*$", line)][:60])


def st_kokkos(stage):
    check = stage.check
    stage.deadline(check.limits["kokkos"])
    d = check.build + "/kokkos"
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    data = cu108(check, d)
    write_nve_input(d + "/in.kokkos", "compute         pu all pair uma", "c_pu[1] c_pu[2] c_pu[7] c_pu[8]")
    tiny = ["-var", "device", "cuda", "-var", "model", check.tiny_model, "-var", "data", data]
    stage.plan(90)
    rc_ref = kk_run(stage, 60, "uma device cuda, fp64", 1, d + "/in.kokkos", d + "/log.reference",
                    *tiny, "-var", "dumpfile", d + "/reference.dump")
    rc1 = kk_run(stage, 40, "uma/kk, 1 rank, fp64", 1, d + "/in.kokkos", d + "/log.kk1", *KOKKOS_FLAGS,
                 *tiny, "-var", "dumpfile", d + "/kk1.dump")
    rc2 = kk_run(stage, 20, "uma/kk, 2 ranks, fp64", 2, d + "/in.kokkos", d + "/log.kk2", *KOKKOS_FLAGS,
                 *tiny, "-var", "dumpfile", d + "/kk2.dump")
    if rc1 != 0 and check.which("compute-sanitizer"):
        sanitize(stage, d)
    if stage.report(kokkos_check, check.details + "/kokkos.json", "cuda", 108, rc_ref, d + "/log.reference",
                    d + "/reference.dump", 1, rc1, d + "/log.kk1", d + "/kk1.dump",
                    2, rc2, d + "/log.kk2", d + "/kk2.dump") != 0:
        return 1
    if not os.path.isfile(check.model):
        stage.say("no full-size model (%s): no steps/s" % check.model)
        return 1
    with open(d + "/in.speed", "w") as f:
        f.write(SPEED_INPUT)
    rc_u = kk_run(stage, 20, "speed: uma device cuda", 1, d + "/in.speed", d + "/log.speed_uma", "-var", "model",
                  check.model)
    rc_k = kk_run(stage, 0, "speed: uma/kk", 1, d + "/in.speed", d + "/log.speed_kk", *KOKKOS_FLAGS, "-var", "model",
                  check.model)
    return stage.report(kokkos_speed, check.details + "/kokkos.json", rc_u, d + "/log.speed_uma", rc_k,
                        d + "/log.speed_kk")
