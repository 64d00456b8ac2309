"""The profile stage: where the step's time goes, by operator (`uma bench --profile`; on CUDA each
outermost operator waits for the device, so its time is its kernels'): the bench stage's first
structure in its last precision (Cu 1,000, tf32).  On a GPU also each lean CUDA kernel timed
alone (bench/cuda/kernel_times.cu, from the kernels stage) and, where Nsight Compute is there,
the lean kernels of one evaluation under ncu (figures, not checks)."""
import os
import re

from ..report.bench import bench_run, read_last_json
from ..runner import STDOUT
from .bench import bench_setup, uma_bench

NCU_LINES = re.compile(r"^  [a-z_].*\(|Duration|Memory Throughput|Compute \(SM\) Throughput")


def show_profile(stage, out):
    """The profiled step and its top operators; False where the run printed none."""
    j = read_last_json(out)
    try:
        stage.say("profiled: %.1f ms per step (unprofiled %.1f); the top operators:" % (j["profile"]["ms_per_step"],
                                                                                      j["ms_per_step"]))
        for o in j["profile"]["top_ops"]:
            stage.say("  %9.2f ms %8.0f calls  %s" % (o["ms"], o["calls"], o["op"]))
        return True
    except (KeyError, TypeError) as e:
        stage.say("no profile in %s's last line (%r)" % (out, e))
        return False


def st_profile(stage):
    check, b = stage.check, stage.check.build
    stage.deadline(check.limits["profile"])
    device, structs, precisions, repeats = bench_setup(check)
    s, p, rc = structs[0], precisions[-1], 0
    gpu, ktimes = check.mode == "gpu", os.access(check.ktimes, os.X_OK)
    ncu = gpu and check.which("ncu") is not None
    stage.plan(20 + (10 if gpu and ktimes else 0) + (20 if ncu else 0))
    details = check.details + "/profile.json"
    with open(details, "w") as f:
        f.write("[]\n")
    stage.say("== uma bench %s --device %s --precision %s --repeats %d --profile" % (s, device, p, repeats))
    out = "%s/bench-%s-profile.out" % (b, s)
    r = uma_bench(stage, 20, "uma bench %s %s --profile" % (s, p), s, out, "--device", device, "--precision", p,
                  "--repeats", str(repeats), "--profile")
    if r != 0:
        stage.show(out)
        rc = 1
    stage.report(bench_run, "%s %s profile" % (s, p), out, r, details)
    if not show_profile(stage, out):
        rc = 1
    if gpu and ktimes:
        # Each lean kernel alone at this size, against a device copy of its bytes in the same run
        # (and the per-node ones over segments with and without the padding slots).
        stage.say("== the lean CUDA kernels one by one (bench/cuda/kernel_times.cu; kernel-times.txt)")
        k = stage.limited(10, "kernel_times", [check.ktimes], stdout=b + "/kernel-times.txt", stderr=STDOUT)
        if k != 0:
            stage.say("kernel_times exited %d" % k)
        stage.show(b + "/kernel-times.txt")
    elif gpu:
        stage.say("no %s (prebuilt, or built by the kernels stage): the kernels are not timed alone" % check.ktimes)
    if ncu:
        # The lean kernels of one evaluation under Nsight Compute: each launch's duration and its
        # share of the memory and compute peaks (a figure for the kernels' next step, not a check).
        stage.say("== ncu: the lean CUDA kernels of the first %s evaluation (%s), SpeedOfLight (ncu-%s.txt)"
                  % (s, p, s))
        n = stage.limited(20, "ncu lean kernels",
                          ["ncu", "--kernel-name", "regex:rotate_|gate_|radial_and|nodes_kernel", "--launch-count",
                           "40", "--section", "SpeedOfLight", check.uma, "bench", check.model,
                           "%s/%s.extxyz" % (check.structs, s), "--task", "omat", "--device", device, "--precision", p,
                           "--repeats", "1"], stdout="%s/ncu-%s.txt" % (b, s), stderr=STDOUT)
        if n != 0:
            stage.say("ncu exited %d (ncu-%s.txt)" % (n, s))
        try:
            with open("%s/ncu-%s.txt" % (b, s), errors="replace") as f:
                stage.say(*[line.rstrip("\n") for line in f if NCU_LINES.search(line)][:160])
        except OSError:
            pass
    return rc
