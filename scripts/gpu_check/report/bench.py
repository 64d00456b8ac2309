"""The timing stages' readers: the JSON line of `uma bench` (bench, profile) with its memory plan
checked against the measured peak, the kernels check's comparison lines, and the largest run."""
import json
import re

from .common import dump, finish, finite, load, number, tail
from .lammps_log import lammps_figures

# The bound on the memory plan: its predicted peak within 25% of the
# evaluation's peak on the GPU in an eager run: the peak LibTorch's allocator
# measured less what the loaded model held before (`resident_device_mb`; the
# plan predicts the evaluation's bytes, not the weights').  The CPU's allocator
# keeps no peak; a replayed run's captures hold pools of their own.
PLAN_OVER_PEAK = (0.75, 1.25)
BENCH_FIELDS = ("atoms", "edges", "device", "precision", "ms_per_step", "steps_per_s", "peak_device_mb",
                "model_gflops_per_s", "gemm_gflops_per_s", "load_s", "first_call_s", "peak_rss_mb", "threads",
                "cuda_graph", "graph_captures", "graph_replays", "graph_refusal", "graph_pool_mb",
                "step_kernels", "step_memory_ops", "profile", "memory_plan", "predicted_peak_mb",
                "resident_device_mb")
KERNEL_LINE = re.compile(r"(\S+)\s+(\S+)\s+(fp64|fp32)\s+relative (\S+) \(bound (\S+)\) (ok|FAILED)$")


def bench_run(label, stdout, rc, out):
    """One `uma bench` run appended to OUT's list; exit 1 where it failed, or where a GPU run's
    memory plan predicted its peak outside PLAN_OVER_PEAK of the measured one."""
    runs = load(out, [])
    entry = {"run": label, "rc": int(rc)}
    result = None
    for line in reversed(tail(stdout, 200)):
        line = line.strip()
        if line.startswith("{"):
            try:
                result = json.loads(line)
                break
            except ValueError:
                pass
    if result is not None and int(rc) == 0:
        entry.update((k, result[k]) for k in BENCH_FIELDS if k in result)
        if "time_s" in result:
            entry["time_s"] = {k: result["time_s"][k] for k in ("min", "median", "max") if k in result["time_s"]}
        peak, predicted = entry.get("peak_device_mb") or -1, entry.get("predicted_peak_mb") or 0
        resident = max(entry.get("resident_device_mb") or 0, 0)
        if peak > 0 and predicted > 0 and not result.get("cuda_graph"):   # (a capture holds a pool of its own)
            peak -= resident
            entry["evaluation_peak_mb"] = peak
            entry["predicted_over_peak"] = predicted / peak
            lo, hi = PLAN_OVER_PEAK
            if not lo <= entry["predicted_over_peak"] <= hi:
                entry["error"] = ["memory plan: predicted %.0f MB, measured peak %.0f MB less %.0f MB of the loaded "
                                  "model (%.2fx; the bound: %.2f-%.2fx)"
                                  % (predicted, peak + resident, resident, entry["predicted_over_peak"], lo, hi)]
                print("bench %s: %s" % (label, entry["error"][0]))
    else:
        entry["error"] = tail(stdout, 15)
    runs.append(entry)
    dump(runs, out)
    return 1 if "error" in entry else 0


def kernels_check(out, log, rc):
    """The engine's CUDA kernels against their CPU launchers (tests/cuda/kernels_check.cu): one
    row per kernel, output and precision with its relative deviation and bound."""
    rows, device, unread = [], None, []
    try:
        with open(log, errors="replace") as f:
            text = f.read()
    except OSError:
        text = ""
    for line in text.splitlines():
        m = re.match(r"kernels check on (.*)$", line)
        if m:
            device = m.group(1)
        m = KERNEL_LINE.match(line)
        if m:
            rows.append({"kernel": m.group(1), "output": m.group(2), "precision": m.group(3),
                         "relative": number(m.group(4)), "bound": number(m.group(5)), "ok": m.group(6) == "ok"})
        elif re.search(r"\) (ok|FAILED)$", line):
            unread.append(line)
    res = {"device": device, "outputs": rows,
           "max_relative": {p: max((r["relative"] for r in rows if r["precision"] == p and finite(r["relative"])),
                                   default=None) for p in ("fp64", "fp32")}}
    failed = []
    if int(rc) != 0:
        failed.append("kernels_check exited %s" % rc)
    if not rows:
        failed.append("no kernel was compared")
    failed += ["%s %s %s: %s > %s" % (r["kernel"], r["output"], r["precision"], r["relative"], r["bound"])
               for r in rows if not r["ok"]]
    if "kernels check: passed" not in text:
        failed.append("no 'kernels check: passed' line")
    failed += ["a comparison line not read: %r" % line for line in unread]
    return finish(out, res, failed, "kernels")


def largest_run(log, rc, out, mode):
    """The largest stage: the LAMMPS run's figures checked: it finished, logged its memory plan,
    and on a GPU (MODE gpu) its peak memory."""
    lammps_figures(log, out)
    res = load(out, {})
    res["rc"] = int(rc)
    checks_failed = []
    if int(rc) != 0 or "timesteps_per_s" not in res:
        checks_failed.append("the run did not finish (exit %s)%s" % (rc, ": " + res["error"] if "error" in res else ""))
    if "memory_plan" not in res:
        checks_failed.append("no memory plan in the log")
    if mode == "gpu":
        if "peak_gpu_gb" not in res:
            checks_failed.append("no peak GPU memory in the log")
        elif "budget_gb" in res:
            res["peak_within_budget"] = res["peak_gpu_gb"] <= res["budget_gb"]
    return finish(out, res, checks_failed, "the largest system")


def read_last_json(path):
    """The last line of PATH as JSON (what `uma bench` prints last), or None."""
    try:
        with open(path) as f:
            return json.loads(f.read().strip().splitlines()[-1])
    except (OSError, ValueError, IndexError):
        return None

