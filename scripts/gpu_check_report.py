"""Bookkeeping for scripts/gpu_check.sh (standard library only).

  gpu_check_report.py record STAGES NAME STATUS SECONDS [DETAILS.json] [NOTE]
      append one stage (one JSON line) to the STAGES file
  gpu_check_report.py ctest LOG OUT.json
      pass/fail counts and failed test names from a ctest log
  gpu_check_report.py bench LABEL STDOUT RC OUT.json
      the JSON line `uma bench` printed (or the failure), appended to OUT.json's list
  gpu_check_report.py lammps LOG OUT.json
      LAMMPS's Performance:/Loop time lines, the device pair uma reported, first/last thermo
  gpu_check_report.py summary STAGES DETAILS_DIR ENV.json MODE BUDGET_S TOTAL_S OUT.json [FINAL]
      the summary JSON (stages in order, their details, the figures); prints it when FINAL is 1
"""
import json
import os
import re
import sys


def load(path, default=None):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return default


def dump(obj, path):
    tmp = "%s.tmp%d" % (path, os.getpid())   # two stages may finish at once
    with open(tmp, "w") as f:
        json.dump(obj, f, indent=1, sort_keys=False)
        f.write("\n")
    os.replace(tmp, path)


def tail(path, n=30):
    try:
        with open(path, errors="replace") as f:
            return f.read().splitlines()[-n:]
    except OSError:
        return []


def cmd_record(stages, name, status, seconds, details="", note=""):
    entry = {"name": name, "status": status, "seconds": round(float(seconds), 1)}
    if note:
        entry["note"] = note
    d = load(details) if details else None
    if d is not None:
        entry["details"] = d
    with open(stages, "a") as f:
        f.write(json.dumps(entry) + "\n")


def cmd_ctest(log, out):
    text = open(log, errors="replace").read() if os.path.exists(log) else ""
    res = {}
    m = re.search(r"(\d+)% tests passed, (\d+) tests? failed out of (\d+)", text)
    if m:
        total, failed = int(m.group(3)), int(m.group(2))
        res.update(total=total, failed=failed, passed=total - failed)
    failed_names = re.findall(r"^\s*\d+ - (.+?) \((Failed|Timeout|SEGFAULT|Subprocess aborted|Not Run|Exception)[^)]*\)\s*$",
                              text, re.M)
    res["failed_tests"] = [f"{n} ({why})" for n, why in failed_names]
    m = re.search(r"Total Test time \(real\) =\s*([\d.]+) sec", text)
    if m:
        res["ctest_seconds"] = float(m.group(1))
    if not m and "total" not in res:
        res["log_tail"] = tail(log)
    dump(res, out)


def cmd_bench(label, stdout, rc, out):
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
        for k in ("atoms", "edges", "device", "precision", "ms_per_step", "steps_per_s", "peak_device_mb",
                  "model_gflops_per_s", "gemm_gflops_per_s", "load_s", "first_call_s", "peak_rss_mb", "threads"):
            if k in result:
                entry[k] = result[k]
        if "time_s" in result:
            entry["time_s"] = {k: result["time_s"][k] for k in ("min", "median", "max") if k in result["time_s"]}
    else:
        entry["error"] = tail(stdout, 15)
    runs.append(entry)
    dump(runs, out)


def cmd_lammps(log, out):
    lines = tail(log, 100000)
    res = {}
    for line in lines:
        if line.startswith("Performance:"):
            res["performance"] = line.strip()
            m = re.search(r"([\d.eE+-]+) timesteps/s", line)
            if m:
                res["timesteps_per_s"] = float(m.group(1))
            m = re.search(r"([\d.eE+-]+) (k|M)?atom-step/s", line)
            if m:
                res["atom_steps_per_s"] = float(m.group(1)) * {"k": 1e3, "M": 1e6, None: 1}[m.group(2)]
        elif line.startswith("Loop time of"):
            res["loop"] = line.strip()
            m = re.search(r"Loop time of ([\d.eE+-]+) on (\d+) procs for (\d+) steps with (\d+) atoms", line)
            if m:
                res.update(loop_s=float(m.group(1)), procs=int(m.group(2)), steps=int(m.group(3)),
                           atoms=int(m.group(4)))
        elif line.startswith("pair uma: model"):
            res["pair_uma"] = line.strip()
            m = re.search(r" on (\S+)$", line.strip())
            if m:
                res["device"] = m.group(1)
        elif "ERROR" in line and "error" not in res:
            res["error"] = line.strip()
    # thermo rows: the lines after the "Step" header up to "Loop time"
    rows, header = [], None
    for line in lines:
        s = line.split()
        if s and s[0] == "Step":
            header = s
            continue
        if header and line.startswith("Loop time"):
            header = None
            continue
        if header and len(s) == len(header):
            try:
                rows.append(dict(zip(header, map(float, s))))
            except ValueError:
                pass
    if rows:
        res["thermo_first"], res["thermo_last"] = rows[0], rows[-1]
    if "performance" not in res:
        res["log_tail"] = lines[-25:]
    dump(res, out)


def cmd_summary(stages_path, details_dir, env_path, mode, budget, total, out, final="0"):
    stages = []
    if os.path.exists(stages_path):
        with open(stages_path) as f:
            stages = [json.loads(line) for line in f if line.strip()]
    failed = [s["name"] for s in stages if s["status"] == "failed"]
    skipped = [s["name"] for s in stages if s["status"] == "skipped"]
    figures = {}
    for s in stages:
        d = s.get("details")
        if s["name"] == "tests" and d:
            figures["tests"] = {k: d[k] for k in ("total", "passed", "failed", "failed_tests") if k in d}
        if s["name"] == "bench" and isinstance(d, list):
            figures["uma_bench"] = [{k: r[k] for k in ("run", "atoms", "edges", "device", "precision", "ms_per_step",
                                                       "steps_per_s", "peak_device_mb", "model_gflops_per_s", "rc", "error")
                                     if k in r} for r in d]
        if s["name"] == "lammps_md" and d:
            figures["lammps_md"] = {k: d[k] for k in ("performance", "timesteps_per_s", "atoms", "steps", "device",
                                                      "loop_s", "error") if k in d}
    budget = float(budget)
    summary = {
        "check": "lammps-uma scripts/gpu_check.sh",
        "mode": mode,
        "note": ("CPU proof of the offline build from the prepared folder: NOT GPU figures"
                 if mode == "cpu-proof" else "GPU check"),
        "status": "failed" if failed or skipped else "passed",
        "failed_stages": failed,
        "skipped_stages": skipped,
        "total_s": round(float(total), 1),
        "budget_s": budget if budget > 0 else None,
        "within_budget": (float(total) <= budget) if budget > 0 else None,
        "environment": load(env_path, {}),
        "stage_seconds": {s["name"]: s["seconds"] for s in stages},
        "figures": figures,
        "stages": stages,
    }
    dump(summary, out)
    if final == "1":
        short = dict(summary)
        short.pop("stages")
        print(json.dumps(short, indent=1))


def main(argv):
    cmds = {"record": cmd_record, "ctest": cmd_ctest, "bench": cmd_bench, "lammps": cmd_lammps,
            "summary": cmd_summary}
    if len(argv) < 2 or argv[1] not in cmds:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    cmds[argv[1]](*argv[2:])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
