"""What both versus stages share.  fairchem-core's UMA-S predictor next to lammps-uma on the same
GPU, in the same run, on the same weights: the full-size UMA-S-1.1-shaped random model made with
fairchem's classes and converted to ours (bench/make_model.py), the same structures.  fairchem in
its fastest settings that apply to this model (merged experts, its Triton backend umas_fast_gpu;
TF32 for the tf32 runs; its Nitro model with CUDA graphs takes only the released UMA-S-1.2.1
checkpoints, not this one); ours in fp32 and tf32, eager and replayed.  Errors against our fp64
evaluation (which equals fairchem's fp64 to ~1e-14: the parity tests).  In the CPU proof:
fairchem on the CPU (umas_fast_pytorch) in a site that holds only the GPU image's distributions
plus the prepared wheels (scripts/image_site.py), small structures, fp32 only.  GPU structures:
cu_1000 (the target), si_1000, the molecule, cu_4000, in that order (UMA_GPU_VERSUS_STRUCTS)."""
import os
import shutil

from ..report.common import read_rc
from ..settings import words

SETUP_RESERVE = 95   # install 30, versions 30, make_model.py 30, and 5 to spare
VERSIONS = '''import sys, torch, numpy, ase
from importlib.metadata import version
print("python %s, torch %s, numpy %s, fairchem-core %s, ase %s (fairchem from %s)" % (sys.version.split()[0],
      torch.__version__, numpy.__version__, version("fairchem-core"), ase.__version__,
      __import__("importlib").import_module("fairchem.core").__file__))'''


class Versus:
    """The versus stages' settings in this run's mode: fairchem's python and site, the
    precisions and repeats, the model both ways."""

    def __init__(self, check):
        self.dir = d = check.versus
        if check.mode == "cpu":
            self.python, self.path, self.precisions, self.repeats = [check.python, "-S"], d + "/image:" + d + "/site", \
                ("fp32",), 1
        else:
            self.python, self.path, self.precisions, self.repeats = [check.python], d + "/site", ("fp32", "tf32"), 10
        self.pt, self.st = d + "/model/uma-s-1p1-random.pt", d + "/model/uma-s-1p1-random.safetensors"
        self.env = check.with_env(PYTHONPATH=self.path)


def versus_structs(check):
    """The structures of both versus stages, in order."""
    if check.env.get("UMA_GPU_VERSUS_STRUCTS"):
        return words(check.env["UMA_GPU_VERSUS_STRUCTS"])
    if check.quick:
        return ["cu_1000"] if check.mode == "gpu" else ["cu_108"]
    return ["cu_1000", "si_1000", "c33h68", "cu_4000"] if check.mode == "gpu" else ["cu_108", "c33h68"]


def struct_weight(struct):
    return 2 if struct == "cu_4000" else 1


def heavy(struct):
    return struct == "cu_4000"


def task_of(struct):
    return "omol" if struct == "c33h68" else "omat"


def versus_setup(stage, vs):
    """fairchem installed from the prepared wheels and the model made both ways, once per run
    (by the first versus stage that runs); its exit status."""
    check = stage.check
    wheels = check.prep + "/fairchem-wheels"
    if os.path.isfile(vs.dir + "/.ready"):
        stage.say("fairchem-core and the model: installed and made by versus_fairchem")
        return 0
    if not os.path.isdir(wheels):
        stage.say("%s has no fairchem-wheels/ (prepared before this stage): run scripts/gpu_check.sh --prepare again "
                  "where the network is" % check.prep)
        return 1
    shutil.rmtree(vs.dir, ignore_errors=True)
    os.makedirs(vs.dir)
    if stage.limited(30, "install fairchem-core", [check.python, check.root + "/bench/fairchem_wheels.py", "install",
                                                   check.root + "/bench/fairchem_wheels.txt", wheels,
                                                   vs.dir + "/site"]) != 0:
        return 1
    # this python's own site-packages would lend fairchem what the GPU image lacks: hide them
    if check.mode == "cpu" and stage.limited(5, "image_site.py", [check.python, check.root + "/scripts/image_site.py",
                                                                  check.root + "/scripts/gpu_image_packages.txt",
                                                                  vs.dir + "/image"]) != 0:
        return 1
    # importing torch and fairchem the first time takes longer than 9 s on the GPU machine
    if stage.limited(30, "versions", vs.python + ["-c", VERSIONS], env=vs.env) != 0:
        return 1
    stage.say("== the model both ways: bench/make_model.py (fairchem's classes, seeded) -> .pt and .safetensors")
    if stage.limited(30, "make_model.py", vs.python + [check.root + "/bench/make_model.py", vs.dir + "/model"],
                     env=vs.env) != 0:
        return 1
    open(vs.dir + "/.ready", "w").close()
    return 0


def versus_ref(stage, vs, struct, folder):
    """Our fp64 evaluation of STRUCT, the reference of the errors, into FOLDER (ref.json, ref.rc)."""
    check = stage.check
    stage.say("== %s: fp64 reference (uma eval)" % struct)
    rc = stage.limited(5, "%s fp64 reference" % struct,
                       [check.uma, "eval", vs.st, "%s/%s.extxyz" % (check.structs, struct), "--task", task_of(struct),
                        "--device", check.device, "--precision", "fp64", "--json"],
                       stdout=folder + "/ref.json", stderr=folder + "/ref.err")
    with open(folder + "/ref.rc", "w") as f:
        f.write("%d\n" % rc)


def eager_reference_ran(vs, struct):
    """Whether the eager stage's fp64 reference of STRUCT ran."""
    return read_rc(os.path.join(vs.dir, struct), "ref") == 0
