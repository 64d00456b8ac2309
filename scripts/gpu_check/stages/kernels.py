"""The kernels stage: the engine's CUDA kernels against their CPU launchers, fp64 and fp32
(tests/cuda/kernels_check.cu), prebuilt by --prebuild or built here with nvcc where the machine
has it.  Each src/**/cuda/NAME.cu is linked with its CPU launcher src/**/cpu/NAME.cpp, the
reference.  Their timing (bench/cuda/kernel_times.cu, the profile stage's) links the same CUDA
objects."""
import fnmatch
import glob
import os
import shutil

from ..report.bench import kernels_check
from ..runner import STDOUT


def cuda_sources(root):
    """Every src/**/cuda/**.cu (find -path '*/cuda/*.cu'), sorted."""
    return sorted(p for p in (os.path.join(dirpath, n) for dirpath, _, names in os.walk(root + "/src") for n in names)
                  if fnmatch.fnmatch(p, "*/cuda/*.cu"))


def build_kernels_check(stage):
    check, o = stage.check, stage.check.build + "/kernels"
    nvcc = check.which("nvcc")
    if not nvcc:
        stage.say("no nvcc on this machine and no prebuilt kernels check (--prebuild)")
        return 1
    cxx = check.which("g++") or check.which("c++") or ""
    flags = ["-std=c++20", "-arch=sm_90", "-ccbin", cxx, "-O3", "-I" + check.root + "/src"]
    shutil.rmtree(o, ignore_errors=True)
    os.makedirs(o)
    if stage.run([nvcc] + flags + ["-c", check.root + "/tests/cuda/kernels_check.cu", "-o", o + "/kernels_check.o"]):
        return 1
    objs = [o + "/kernels_check.o"]
    for cu in cuda_sources(check.root):
        name = os.path.basename(cu)[:-len(".cu")]
        cpp = "%s/cpu/%s.cpp" % (os.path.dirname(os.path.dirname(cu)), name)
        if not os.path.isfile(cpp):
            stage.say("no CPU launcher %s for %s" % (cpp, cu))
            return 1
        if stage.run([nvcc] + flags + ["-c", cu, "-o", "%s/cuda_%s.o" % (o, name)]) or stage.run(
                [cxx, "-std=c++20", "-O3", "-fopenmp", "-I" + check.root + "/src", "-c", cpp, "-o",
                 "%s/cpu_%s.o" % (o, name)]):
            return 1
        objs += ["%s/cuda_%s.o" % (o, name), "%s/cpu_%s.o" % (o, name)]
    if stage.run([nvcc] + flags + ["-c", check.root + "/bench/cuda/kernel_times.cu", "-o", o + "/kernel_times.o"]):
        return 1
    link = [nvcc, "-arch=sm_90", "-ccbin", cxx]
    if stage.run(link + objs + ["-Xcompiler", "-fopenmp", "-o", check.kcheck]) or stage.run(
            link + [o + "/kernel_times.o"] + sorted(glob.glob(o + "/cuda_*.o")) + ["-o", check.ktimes]):
        return 1
    for obj in glob.glob(o + "/*.o"):
        os.remove(obj)
    return 0


def st_kernels(stage):
    check = stage.check
    stage.deadline(check.limits["kernels"])
    if not os.access(check.kcheck, os.X_OK):
        stage.say("== building the kernels check with nvcc")
        if build_kernels_check(stage) != 0:
            return 1
    stage.plan(20)
    out = check.build + "/kernels/kernels_check.txt"
    rc = stage.limited(20, "kernels_check", [check.kcheck], stdout=out, stderr=STDOUT)
    stage.show(out)
    return stage.report(kernels_check, check.details + "/kernels.json", out, rc)
