"""The tests stage, the engine suite on the test device (cuda; cpu in the proof): uma_tests in
GoogleTest shards run at once (report/shards.py; the tests of a shard that crashed and those it
never reached run again in new shards while time is left), and beside them (after them in the
proof) ctest for the other tests of the build folder (static scans, the uma tool; no LAMMPS-root
or converter tests here).  The failures of both go into details/tests.json.
UMA_GPU_TEST_SHARDS=0: ctest alone, one process per test."""
import os
import threading

from ..report.gtest import ctest_counts, gtest_exclude, tests_merge
from ..report.shards import run_shards
from ..runner import STDOUT


def shard_plan(check):
    """(device, shards, ctest's -j where ctest runs alone): min(8, cores) shards on a GPU, the
    cores in the proof, or UMA_GPU_TEST_SHARDS."""
    tj = min(check.jobs, 8) if check.mode == "gpu" else check.jobs
    return check.device, int(check.env.get("UMA_GPU_TEST_SHARDS") or tj), tj


def ctest(stage, label, jobs, exclude, log):
    """ctest -jJOBS -E EXCLUDE in the engine's build folder, under its share; its output in LOG."""
    check = stage.check
    return stage.limited(1, label, ["ctest", "-j%d" % jobs, "--output-on-failure", "-E", exclude], stdout=log,
                         stderr=STDOUT, cwd=check.build + "/engine", env=check.with_env(UMA_TEST_DEVICE=check.device))


def ctest_alone(stage, tj):
    check = stage.check
    log = check.logs + "/tests-ctest.log"
    stage.say("UMA_TEST_DEVICE=%s ctest -j%d (engine, tool and static tests; no LAMMPS-root or converter tests here)"
              % (check.device, tj))
    stage.plan(1)
    rc = ctest(stage, "ctest -j%d" % tj, tj, r"^(lammps|converter)\.", log)
    stage.show(log)
    stage.report(ctest_counts, log, check.details + "/tests.json")
    return rc


def st_tests(stage):
    check = stage.check
    stage.deadline(check.limits["tests"])
    device, shards, tj = shard_plan(check)
    binary = check.build + "/engine/tests/uma_tests"
    if shards == 0:
        return ctest_alone(stage, tj)
    if not os.access(binary, os.X_OK):
        stage.say("no " + binary)
        return 1
    threads = check.env.get("OMP_NUM_THREADS") or str(max(check.jobs // shards, 1))
    exclude, why = gtest_exclude(binary, env=check.env, cwd=check.build + "/engine/tests")
    if exclude is None:
        stage.say(why, "cannot list %s's tests" % binary)
        return 1
    stage.say("UMA_TEST_DEVICE=%s: uma_tests in %d GoogleTest shards at once (OMP_NUM_THREADS=%s each);"
              % (device, shards, threads),
              "ctest %s for the rest (-E '%s')" % ("beside them" if check.mode == "gpu" else "after them", exclude))
    log, rc_c = check.logs + "/tests-ctest.log", []
    beside = None
    if check.mode == "gpu":   # 16 cores: ctest beside the shards
        stage.plan(1)
        beside = threading.Thread(target=lambda: rc_c.append(ctest(stage, "ctest (static, tool)", 2, exclude, log)))
        beside.start()
    # (the shards' runner stops them itself, a few seconds before the stage's end)
    rc_g = stage.report(run_shards, check.details + "/tests-gtest.json", check.logs + "/tests-shards", stage.end,
                        shards, binary, (), check.with_env(UMA_TEST_DEVICE=device, UMA_SOURCE_DIR=check.root,
                                                           OMP_NUM_THREADS=threads), check.build + "/engine/tests")
    if beside is not None:
        beside.join()
    else:
        stage.plan(1)
        rc_c.append(ctest(stage, "ctest (static, tool)", check.jobs, exclude, log))
    stage.say("== ctest (exit %d)" % rc_c[0])
    stage.show(log)
    stage.report(ctest_counts, log, check.details + "/tests-ctest.json")
    stage.report(tests_merge, check.details + "/tests.json", check.details + "/tests-gtest.json",
                 check.details + "/tests-ctest.json")
    return 0 if rc_g == 0 and rc_c[0] == 0 else 1
