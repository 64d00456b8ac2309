"""The order of a run (on the GPU, or the CPU proof): the environment, then the builds (and the
structures and the model) before anything is checked or timed, from the prebuilt artifacts where
they match this machine and tree; then the checking and timing stages by value: fairchem side by
side (eager) first (a run cut short by its budget must still have it), the kernels, the engine
suite, the LAMMPS stages, tf32, our timings, fairchem compiled (its compile alone can take
minutes), and the pip route last (its own build of the engine and the plugin).  A stage whose
builds did not pass is skipped; one not selected is recorded so."""
import os
import shutil
import threading

from .bookkeeping import maybe_stage, not_selected, record, run_stage, skip, write_summary
from .builds.engine import st_engine, st_gtest, st_plugin
from .builds.kokkos import kk_ready
from .builds.lammps import st_lammps_build
from .builds.mpi import st_mpi
from .builds.prebuilt import st_prebuilt
from .builds.prebuilt_manifest import prebuilt_matches
from .builds.sysroot import st_unpack
from .check import log
from . import settings
from .settings import LAMMPS_STAGES
from .stages import (bench, devices, environment, inputs, kernels, kokkos, lammps_md, largest, pip_route, profile,
                     ranks, tests, tf32, train, versus_compiled, versus_fairchem, versus_train)

KOKKOS_NEEDS = ("needs the prebuilt uma/kk on CUDA (scripts/gpu_check.sh --prebuild with UMA_KOKKOS_LAMMPS and "
                "UMA_KOKKOS_LAMMPS_SOURCE) and mpi")


def use_prebuilt(check, ok):
    """The prebuilt stage: the artifacts of --prebuild where they match this machine and tree."""
    manifest = check.prebuilt_dir + "/manifest.json"
    if not os.path.isfile(manifest):
        not_selected(check, "prebuilt", "no prebuilt artifacts in %s (scripts/gpu_check.sh --prebuild %s)"
                     % (check.prep, check.prep))
        return False
    matches, why = prebuilt_matches(manifest, check.envjson, check.root, check.prep, check.build)
    if not matches:
        not_selected(check, "prebuilt", why + "; building here")
        return False
    if not ok["mpi"]:
        skip(check, "prebuilt", "needs mpi")
        return False
    return run_stage(check, "prebuilt", st_prebuilt) == 0


def build_here(check, ok, need_lammps):
    """gtest, the engine, LAMMPS and the plugin; LAMMPS beside the engine on the GPU machine (16
    cores), one thing at a time in the CPU proof (two cores)."""
    shutil.rmtree(check.build + "/kernels", ignore_errors=True)   # the kernels stage builds its own
    ok["gtest"] = ok["unpack"] and run_stage(check, "gtest", st_gtest) == 0
    if not ok["unpack"]:
        skip(check, "gtest", "needs unpack")
    beside, lammps_rc = None, []
    if need_lammps and ok["unpack"] and ok["mpi"] and check.mode == "gpu":
        log("lammps_build runs alongside the engine's build")
        beside = threading.Thread(target=lambda: lammps_rc.append(run_stage(check, "lammps_build", st_lammps_build)))
        beside.start()
    ok["engine"] = ok["gtest"] and run_stage(check, "engine", st_engine) == 0
    if not ok["gtest"]:
        skip(check, "engine", "needs gtest")
    if not need_lammps:
        not_selected(check, "lammps_build", "no LAMMPS stage selected")
    elif beside is not None:
        beside.join()
        ok["lammps"] = lammps_rc == [0]
    elif ok["unpack"] and ok["mpi"]:
        ok["lammps"] = run_stage(check, "lammps_build", st_lammps_build) == 0
    else:
        skip(check, "lammps_build", "needs unpack and mpi")
    if not need_lammps:
        not_selected(check, "plugin", "no LAMMPS stage selected")
    elif ok["lammps"] and ok["engine"]:
        ok["plugin"] = run_stage(check, "plugin", st_plugin) == 0
    else:
        skip(check, "plugin", "needs lammps_build and engine")


def builds(check):
    """The builds, the structures and the model; what passed."""
    run_stage(check, "environment", environment.st_environment)   # a failure here (no CUDA) still lets the builds run
    ok = dict.fromkeys(("unpack", "mpi", "gtest", "engine", "lammps", "plugin", "structs", "model", "prebuilt"), False)
    need_lammps = any(check.wanted(s) for s in LAMMPS_STAGES)   # LAMMPS and the plugin only for the stages that run it
    ok["unpack"] = run_stage(check, "unpack", st_unpack) == 0
    # before anything forks: the mpi stage sets PATH, LD_LIBRARY_PATH and the OMPI_ settings
    ok["mpi"] = run_stage(check, "mpi", st_mpi) == 0
    ok["prebuilt"] = use_prebuilt(check, ok)
    if ok["prebuilt"]:
        for name in ("gtest", "engine", "lammps_build", "plugin"):
            record(check, name, "passed", 0, "prebuilt (scripts/gpu_check.sh --prebuild)")
        ok.update(gtest=True, engine=True, lammps=True, plugin=True)
        write_summary(check)
    else:
        build_here(check, ok, need_lammps)
    ok["structs"] = run_stage(check, "structures", inputs.st_structures) == 0
    if ok["engine"]:
        ok["model"] = run_stage(check, "model_init", inputs.st_model_init) == 0
    else:
        skip(check, "model_init", "needs engine")
    return ok


def checking_stages(check, ok):
    es, ms, pm = ok["engine"] and ok["structs"], ok["model"] and ok["structs"], ok["plugin"] and ok["model"]
    gpu = check.mode == "gpu"
    maybe_stage(check, "versus_fairchem", versus_fairchem.st_versus_fairchem, es, "needs engine and structures")
    if gpu:
        maybe_stage(check, "kernels", kernels.st_kernels, True, "")
    else:
        not_selected(check, "kernels", "CUDA only: the engine's CUDA kernels on the GPU (their sources compile in the "
                                       "test command's kokkos.cuda_compile)")
    maybe_stage(check, "tests", tests.st_tests, ok["engine"], "needs engine")
    if gpu:
        maybe_stage(check, "kokkos", kokkos.st_kokkos, ok["prebuilt"] and ok["mpi"] and kk_ready(check), KOKKOS_NEEDS)
    else:
        not_selected(check, "kokkos", "CUDA only: uma/kk on a Kokkos CUDA LAMMPS (the CPU's uma/kk: the test "
                                      "command's lammps.pair_uma.kokkos)")
    for name, function in (("ranks", ranks.st_ranks), ("devices", devices.st_devices), ("train", train.st_train)):
        maybe_stage(check, name, function, ok["plugin"], "needs plugin")
    maybe_stage(check, "lammps_md", lammps_md.st_lammps_md, pm, "needs plugin and model_init")
    for name, function in (("tf32", tf32.st_tf32), ("bench", bench.st_bench), ("profile", profile.st_profile)):
        maybe_stage(check, name, function, ms, "needs model_init and structures")
    maybe_stage(check, "versus_train", versus_train.st_versus_train, ok["engine"], "needs engine")
    maybe_stage(check, "largest", largest.st_largest, pm, "needs plugin and model_init")
    maybe_stage(check, "versus_fairchem_compiled", versus_compiled.st_versus_fairchem_compiled, es,
                "needs engine and structures")
    if gpu and not os.path.isdir(os.path.join(check.prep, settings.PIP_ROUTE_DIR)):
        not_selected(check, "pip_route", "the prepared folder has no %s/ (%s=1 scripts/gpu_check.sh --prepare "
                                         "DIR packs it)" % (settings.PIP_ROUTE_DIR, settings.PIP_ROUTE_ENV))
    elif gpu:   # its own build, last: it delays no other stage
        maybe_stage(check, "pip_route", pip_route.st_pip_route, ok["unpack"] and ok["model"],
                    "needs unpack and model_init")
    else:
        not_selected(check, "pip_route", "CUDA only: pair_style uma device cuda through the pip install (on the "
                                         "CPU: the test command's pip phase, tests/wheel/pip_cases.py)")


def check_run(check):
    """Every stage in order; the summary; the exit status (1 where a stage failed or was skipped)."""
    checking_stages(check, builds(check))
    result = write_summary(check, final=True)
    log("summary written to " + check.summary_path)
    if check.mode == "cpu":
        log("(CPU proof: the figures above are CPU figures, not GPU figures)")
    if result["status"] != "passed":
        log("FAILED: " + ", ".join(result["failed_stages"] + [x + " (skipped)" for x in result["skipped_stages"]]))
        return 1
    if check.selection == "all":
        log("all stages passed in %.1f s" % check.elapsed())
    else:
        log("all stages of the selection (%s) passed in %.1f s" % (check.selection, check.elapsed()))
    return 0
