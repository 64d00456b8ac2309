"""The tf32 stage: `uma eval` of Cu and Si (1,000 atoms each on the GPU; 108 and 64 in the CPU
proof) with the full-size random model in fp64, fp32 and tf32 (tf32 is CUDA only: fp64 and fp32
in the CPU proof): energy per atom and force errors of fp32 and tf32 against fp64.  Checks: every
run ends with finite numbers, fp32 within 1e-3 eV/atom of fp64; the tf32 figures are recorded
only."""
import os
import shutil

from ..report.precision import precision_check


def precision_runs(check):
    """(structures, precisions; the reference first)."""
    if check.mode == "gpu":
        return ("cu_1000", "si_1000"), ("fp64", "fp32", "tf32")
    return ("cu_108", "si_64"), ("fp64", "fp32")


def st_tf32(stage):
    check, rc = stage.check, 0
    stage.deadline(check.limits["tf32"])
    structs, precisions = precision_runs(check)
    d = check.build + "/precision"
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    stage.plan(5 * len(structs) * len(precisions))
    for s in structs:
        runs = []
        for p in precisions:
            stage.say("== uma eval %s.extxyz --task omat --device %s --precision %s --json" % (s, check.device, p))
            out = "%s/%s.%s" % (d, s, p)
            r = stage.limited(5, "uma eval %s %s" % (s, p),
                              [check.uma, "eval", check.model, "%s/%s.extxyz" % (check.structs, s), "--task", "omat",
                               "--device", check.device, "--precision", p, "--json"],
                              stdout=out + ".json", stderr=out + ".err")
            stage.show(out + ".err")
            stage.say("exit %d" % r)
            runs.append((p, out + ".json", r))
        rc |= stage.report(precision_check, check.details + "/tf32.json", s, runs)
    if check.mode == "cpu":
        stage.say("no tf32 runs in the CPU proof (tf32 is CUDA only)")
    return 1 if rc else 0
