"""The lammps_build stage: LAMMPS from the prepared, stripped source (PLUGIN, MANYBODY, a shared
library) with MPI, the Open MPI of the mpi stage, never the serial STUBS: a configure that finds
no MPI fails (BUILD_MPI=on makes MPI REQUIRED).  As C++20, as the plugin is: LAMMPS's own
default, C++17, gives its messages fmt's argument types where the plugin's compiler gives
std::format's, and the plugin would not load.  Then `lmp -h` must name both packages and Open MPI."""
import glob
import os
import re
import shutil

from ..report.common import read_text
from ..settings import LAMMPS_TARBALL_GLOB, LAMMPS_TOPDIR
from .engine import mpi_hints
from .sysroot import extract_tar


def grep_after(text, pattern, after):
    """grep -A AFTER PATTERN TEXT: the matching lines, each with the AFTER lines that follow it."""
    lines, keep = text.splitlines(), set()
    for i, line in enumerate(lines):
        if re.search(pattern, line):
            keep.update(range(i, min(i + after + 1, len(lines))))
    return [lines[i] for i in sorted(keep)]


def lmp_help(stage, lmp, out, env):
    """`lmp -h` on one rank into OUT (its stderr in the log); the exit status."""
    return stage.run(stage.check.mpirun + ["-np", "1", lmp, "-h"], stdout=out, env=env, limit_s=120)


def st_lammps_build(stage):
    check, b = stage.check, stage.check.build
    shutil.rmtree(check.lsrc, ignore_errors=True)
    tarballs = sorted(glob.glob(os.path.join(check.prep, LAMMPS_TARBALL_GLOB)))
    if not tarballs or not extract_tar(stage, tarballs[0], b):
        return 1
    if not os.path.isfile(check.lsrc + "/src/lammpsplugin.h"):
        stage.say("the tarball lacks %s/src" % LAMMPS_TOPDIR)
        return 1
    configure = (["cmake", "-S", check.lsrc + "/cmake", "-B", b + "/lammps-build", "-G", check.generator,
                  "-DCMAKE_BUILD_TYPE=Release", "-DCMAKE_CXX_STANDARD=20", "-DBUILD_MPI=on"] + mpi_hints(check) +
                 ["-DBUILD_OMP=off", "-DBUILD_SHARED_LIBS=on", "-DPKG_PLUGIN=on", "-DPKG_MANYBODY=on",
                  "-DBUILD_TOOLS=off", "-DBUILD_DOC=off", "-DENABLE_TESTING=off", "-DDOWNLOAD_POTENTIALS=off",
                  "-DWITH_JPEG=off", "-DWITH_PNG=off", "-DWITH_GZIP=off", "-DWITH_FFMPEG=off", "-DWITH_CURL=off",
                  "-DCMAKE_INSTALL_PREFIX=" + check.linst, "-DCMAKE_INSTALL_LIBDIR=lib",
                  "-DCMAKE_INSTALL_RPATH=%s/lib" % check.linst] + check.launcher)
    if stage.run(configure) != 0:
        return 1
    if not re.search(r"^BUILD_MPI:BOOL=(on|1|yes|true)$", read_text(b + "/lammps-build/CMakeCache.txt"), re.I | re.M):
        stage.say("LAMMPS is not configured with MPI")
        return 1
    if stage.run(["cmake", "--build", b + "/lammps-build", "-j%d" % check.jobs]) != 0:
        return 1
    if stage.run(["cmake", "--install", b + "/lammps-build"], stdout=os.devnull) != 0:
        return 1
    if lmp_help(stage, check.linst + "/bin/lmp", b + "/lmp-help.txt", check.lammps_env()) != 0:
        return 1
    text = read_text(b + "/lmp-help.txt")
    stage.say(*grep_after(text, r"^Installed packages", 3))
    stage.say(*[line for line in text.splitlines() if line.startswith("MPI v")])
    if "PLUGIN" not in text or "MANYBODY" not in text:
        return 1
    if not re.search(r"^MPI v.*Open MPI", text, re.M):
        stage.say("lmp does not run on Open MPI (MPI STUBS?)")
        return 1
    return 0
