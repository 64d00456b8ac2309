"""lammps_md on the GPU: the cuda_graph yes run against its eager run.  The step was captured and
replayed (the pair style's log lines), no refusal, the same thermo steps, PotEng and TotEng per
atom within TOL eV/atom and Temp within TOL relative (float atomics reorder fp32 sums between
any two runs), timesteps/s of both."""
import json
import re

from .common import dump, tail
from .lammps_log import last_thermo


def speed(lines):
    for line in lines:
        m = re.search(r"([\d.eE+-]+) timesteps/s", line) if line.startswith("Performance:") else None
        if m:
            return float(m.group(1))
    return None


def atoms(lines):
    for line in lines:
        m = re.match(r"Loop time of \S+ on \d+ procs for \d+ steps with (\d+) atoms", line)
        if m:
            return int(m.group(1))
    return None


def lammps_replay(log_eager, log_graph, rc, out, tol):
    tol = float(tol)
    eager, graph = tail(log_eager, None), tail(log_graph, None)
    res = {"tolerance": tol, "rc": int(rc)}
    failed = []
    if int(rc) != 0:
        failed.append("the cuda_graph yes run exited %s" % rc)
    captured = [l for l in graph if "captured as a CUDA graph" in l]
    refused = [l for l in graph if "no CUDA graph at step" in l]
    res["capture_lines"], res["refusal_lines"] = captured[:3], refused[:3]
    if not captured:
        failed.append("no 'captured as a CUDA graph' line in %s" % log_graph)
    if refused:
        failed.append("refused: " + refused[0])
    n = atoms(eager) or atoms(graph)
    te, tg = last_thermo(eager), last_thermo(graph)
    if not te or [r["Step"] for r in te] != [r["Step"] for r in tg]:
        failed.append("the two runs' thermo steps differ (%d and %d rows)" % (len(te), len(tg)))
    elif not n:
        failed.append("no atom count in the logs")
    else:
        worst = {"PotEng": 0.0, "TotEng": 0.0, "Temp": 0.0}
        for a, b in zip(te, tg):
            for k in ("PotEng", "TotEng"):
                worst[k] = max(worst[k], abs(a[k] - b[k]) / n)
            worst["Temp"] = max(worst["Temp"], abs(a["Temp"] - b["Temp"]) / max(abs(a["Temp"]), 1e-300))
        res["worst_difference"] = {"PotEng_ev_per_atom": worst["PotEng"], "TotEng_ev_per_atom": worst["TotEng"],
                                   "Temp_relative": worst["Temp"]}
        res["steps_compared"] = [int(r["Step"]) for r in te]
        for k, v in worst.items():
            if not v <= tol:
                failed.append("%s differs by %.3e (limit %.0e)" % (k, v, tol))
    se, sg = speed(eager), speed(graph)
    res.update(eager_timesteps_per_s=se, replayed_timesteps_per_s=sg)
    if se and sg:
        res["replay_speedup"] = sg / se
    res["checks_failed"] = failed
    res["passed"] = not failed
    dump(res, out)
    print(json.dumps(res, indent=1))
    print("lammps replay: %s" % ("passed" if not failed else "FAILED: " + "; ".join(failed)))
    return 1 if failed else 0
