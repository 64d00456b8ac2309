"""uma/kk on CUDA against the user's own LAMMPS built with the KOKKOS package for CUDA
(doc/pair_uma.rst, "Building uma/kk for CUDA"): UMA_KOKKOS_LAMMPS, its install prefix (bin/lmp,
liblammps.so, LAMMPS's and Kokkos's CMake packages), and UMA_KOKKOS_LAMMPS_SOURCE, its source
tree (the top folder or its src/).  What is missing from them (--kokkos-lammps), and the
kokkos_build stage of --prebuild (the GPU machine has no nvcc): the plugin built with
-D UMA_KOKKOS=ON through this project's CMake in BUILD/engine-kk (the styles and the plugin
through Kokkos's nvcc_wrapper), and lmp, liblammps and the Kokkos libraries it needs copied
beside it into BUILD/kk, so that they travel with the prebuilt artifacts."""
import glob
import os
import re
import shutil

from ..report.common import read_text
from .engine import mpi_hints
from .lammps import grep_after, lmp_help


def kokkos_lammps_missing(prefix, source, kokkos_root):
    """What is missing from the user's KOKKOS LAMMPS, one line each; none when nothing is."""
    why = []
    if not prefix:
        why.append("UMA_KOKKOS_LAMMPS is not set (the install prefix of a LAMMPS built with KOKKOS for CUDA)")
    elif not os.access(prefix + "/bin/lmp", os.X_OK):
        why.append("UMA_KOKKOS_LAMMPS=%s has no bin/lmp" % prefix)
    elif not glob.glob(prefix + "/lib*/liblammps.so"):
        why.append("UMA_KOKKOS_LAMMPS=%s has no lib/liblammps.so (build LAMMPS with -D BUILD_SHARED_LIBS=on)" % prefix)
    elif not glob.glob(prefix + "/lib*/cmake/Kokkos") and not kokkos_root:
        why.append("UMA_KOKKOS_LAMMPS=%s has no lib/cmake/Kokkos (LAMMPS's bundled Kokkos installs it; for an "
                   "external Kokkos set Kokkos_ROOT)" % prefix)
    if not source:
        why.append("UMA_KOKKOS_LAMMPS_SOURCE is not set (the source tree of that LAMMPS)")
    elif not os.path.isfile(source + "/src/lammpsplugin.h") and not os.path.isfile(source + "/lammpsplugin.h"):
        why.append("UMA_KOKKOS_LAMMPS_SOURCE=%s holds no LAMMPS source (no src/lammpsplugin.h)" % source)
    elif not os.path.isfile(source + "/src/KOKKOS/kokkos.h") and not os.path.isfile(source + "/KOKKOS/kokkos.h"):
        why.append("UMA_KOKKOS_LAMMPS_SOURCE=%s has no KOKKOS package (src/KOKKOS/kokkos.h)" % source)
    return why


def kk_ready(check):
    """Whether BUILD/kk holds uma/kk on CUDA (lmp and the plugin)."""
    return os.access(check.kk + "/lammps/bin/lmp", os.X_OK) and os.path.isfile(check.kk + "/umaplugin.so")


def copy_lmp(stage, stubs):
    """lmp and the libraries it loads from outside the system (liblammps, Kokkos's), into BUILD/kk."""
    check = stage.check
    shutil.rmtree(check.kk, ignore_errors=True)
    os.makedirs(check.kk + "/lammps/bin")
    os.makedirs(check.kk + "/lammps/lib")
    shutil.copy(check.kokkos_lammps + "/bin/lmp", check.kk + "/lammps/bin/")
    ld = "%s:%s" % (stubs, check.env.get("LD_LIBRARY_PATH", ""))
    _, ldd = stage.capture(["ldd", check.kokkos_lammps + "/bin/lmp"], env=check.with_env(LD_LIBRARY_PATH=ld))
    for line in ldd.splitlines():
        f = line.split()
        if len(f) >= 3 and f[2].startswith("/") and (f[0].startswith("liblammps") or f[0].startswith("libkokkos")):
            shutil.copy(f[2], check.kk + "/lammps/lib/")
    if not glob.glob(check.kk + "/lammps/lib/liblammps*.so*"):
        stage.say("lmp of %s loads no liblammps.so" % check.kokkos_lammps)
        return False
    return True


def st_kokkos_build(stage):
    check, b = stage.check, stage.check.build
    lsrc = check.kokkos_lammps_source
    if os.path.isfile(lsrc + "/src/lammpsplugin.h"):
        lsrc += "/src"
    # No GPU here: the CUDA driver's stub stands in for libcuda.so.1, which libkokkoscore needs,
    # when programs link against LAMMPS (the configure's check that the plugin's messages link,
    # through -rpath-link) and when lmp and the plugin load below (through LD_LIBRARY_PATH).
    stubs = b + "/kk-stubs"
    os.makedirs(stubs, exist_ok=True)
    nvcc = os.path.realpath(check.which("nvcc") or "/usr/local/cuda/bin/nvcc")
    if os.path.lexists(stubs + "/libcuda.so.1"):
        os.remove(stubs + "/libcuda.so.1")
    os.symlink(os.path.dirname(nvcc) + "/../lib64/stubs/libcuda.so", stubs + "/libcuda.so.1")
    if not copy_lmp(stage, stubs):
        return 1
    # the engine's arguments without ccache: Kokkos's launcher must see the compiler itself
    args = [a for a in check.engine_args
            if not re.match(r"-DCMAKE_.*_COMPILER_LAUNCHER=|-DUMA_BUILD_TESTS=|-DUMA_BUILD_PLUGIN=", a)]
    kokkos_root = check.env.get("Kokkos_ROOT", "")
    prefix = "%s;%s%s" % (check.kokkos_lammps, kokkos_root + ";" if kokkos_root else "", check.engine_prefix)
    for argv in (["cmake", "-S", check.root, "-B", b + "/engine-kk"] + args +
                 ["-DUMA_BUILD_TESTS=OFF", "-DUMA_BUILD_PLUGIN=ON", "-DUMA_KOKKOS=ON", "-DCMAKE_PREFIX_PATH=" + prefix,
                  "-DUMA_LAMMPS_SOURCE_DIR=" + lsrc] + mpi_hints(check) +
                 ["-DCMAKE_EXE_LINKER_FLAGS=-Wl,-rpath-link," + stubs],
                 ["cmake", "--build", b + "/engine-kk", "-j%d" % check.jobs, "--target", "umaplugin"]):
        if stage.run(argv) != 0:
            return 1
    shutil.copy(b + "/engine-kk/umaplugin.so", check.kk + "/umaplugin.so")
    with open(b + "/in.kk_probe", "w") as f:
        f.write("plugin load %s\n" % (check.kk + "/umaplugin.so"))
    env = check.with_env(LD_LIBRARY_PATH="%s:%s:%s" % (check.kk_libs, check.env.get("LD_LIBRARY_PATH", ""), stubs))
    lmp = check.kk + "/lammps/bin/lmp"
    if lmp_help(stage, lmp, b + "/lmp-kk-help.txt", env) != 0:
        stage.show(b + "/lmp-kk-help.txt")
        return 1
    text = read_text(b + "/lmp-kk-help.txt")
    stage.say(*grep_after(text, r"^Installed packages", 2))
    if "KOKKOS package API: CUDA" not in text:
        stage.say("the lmp of UMA_KOKKOS_LAMMPS=%s has no KOKKOS package for CUDA (lmp -h)" % check.kokkos_lammps)
        return 1
    if stage.run(check.mpirun + ["-np", "1", lmp, "-in", b + "/in.kk_probe", "-log", "none", "-screen",
                                 b + "/kk-probe.txt"], env=env, limit_s=120) != 0:
        stage.show(b + "/kk-probe.txt")
        return 1
    probe = read_text(b + "/kk-probe.txt")
    stage.say(*[line for line in probe.splitlines() if "Loading plugin" in line])
    return 0 if "Loading plugin: UMA-S universal potential, KOKKOS package variant" in probe else 1
