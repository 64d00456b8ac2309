"""--prebuild, here for the GPU machine: every build (unpack, mpi, gtest, engine, lammps_build,
plugin, kernels_build, and kokkos_build with the user's KOKKOS CUDA LAMMPS) against that
machine's torch, then the archive of what the stages use (PREP/prebuilt/), which the GPU run
takes when its torch and this tree's sources match."""
import json
import shutil

from .bookkeeping import run_stage
from .builds.engine import st_engine, st_gtest, st_plugin
from .builds.kokkos import kokkos_lammps_missing, st_kokkos_build
from .builds.lammps import st_lammps_build
from .builds.mpi import st_mpi
from .builds.prebuilt import pack_prebuilt, prebuild_torch
from .builds.sysroot import st_unpack
from .carry import check_carry
from .check import die, log
from .settings import GPU_TORCH_DIR, GPU_TORCH_VERSION
from .stages.kernels import build_kernels_check

BUILDS = (("unpack", st_unpack), ("mpi", st_mpi), ("gtest", st_gtest), ("engine", st_engine),
          ("lammps_build", st_lammps_build), ("plugin", st_plugin), ("kernels_build", build_kernels_check))
KOKKOS_DOC = "doc/pair_uma.rst, \"Building uma/kk for CUDA\""


def prebuild(check):
    if check.build != check.root + "/build-gpu":
        die("--prebuild builds in %s/build-gpu (UMA_GPU_BUILD is %s)" % (check.root, check.build))
    kokkos_root = check.env.get("Kokkos_ROOT", "")
    why = kokkos_lammps_missing(check.kokkos_lammps, check.kokkos_lammps_source, kokkos_root)
    if (check.kokkos_lammps or check.kokkos_lammps_source) and why:
        die("the KOKKOS LAMMPS for uma/kk on CUDA is incomplete: %s;" % ";".join(why))
    prebuild_torch()
    with open(check.envjson, "w") as f:
        json.dump({"mode": "prebuild", "torch": GPU_TORCH_VERSION, "torch_dir": GPU_TORCH_DIR}, f)
    for name, function in BUILDS:
        if run_stage(check, name, function) != 0:
            die("prebuild: %s failed (log: %s/%s.log)" % (name, check.logs, name))
    shutil.rmtree(check.kk, ignore_errors=True)
    if not why:
        if run_stage(check, "kokkos_build", st_kokkos_build) != 0:
            die("prebuild: kokkos_build failed (log: %s/kokkos_build.log)" % check.logs)
    else:
        log("no uma/kk on CUDA in the prebuilt artifacts, so the GPU run's kokkos stage will be skipped:")
        for line in why:
            log("  " + line)
        log("  (set UMA_KOKKOS_LAMMPS=PREFIX UMA_KOKKOS_LAMMPS_SOURCE=DIR: %s)" % KOKKOS_DOC)
    if not pack_prebuilt(check):
        die("prebuild: packing failed")
    check_carry(check.root, check.prep)
    log("carry %s with the tree; the GPU run uses %s when its torch and this tree's sources match"
        % (check.prep, check.prebuilt_dir))
    return 0
