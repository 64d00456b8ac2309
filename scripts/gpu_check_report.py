"""Bookkeeping for scripts/gpu_check.sh (standard library only).

  gpu_check_report.py record STAGES NAME STATUS SECONDS [DETAILS.json] [NOTE]
      append one stage (one JSON line) to the STAGES file
  gpu_check_report.py ctest LOG OUT.json
      pass/fail counts and failed test names from a ctest log
  gpu_check_report.py bench LABEL STDOUT RC OUT.json
      the JSON line `uma bench` printed (or the failure), appended to OUT.json's list
  gpu_check_report.py lammps LOG OUT.json
      LAMMPS's Performance:/Loop time lines, the device pair uma reported, first/last thermo
  gpu_check_report.py mpi OUT.json WHEEL ROOT RC_TRUE RC_ALLREDUCE ALLREDUCE_OUT SHOWME [LIMIT_S]
      the mpi stage: `mpirun -np 2 true`, the 2-rank MPI_Allreduce, the wrappers' flags
  gpu_check_report.py ranks OUT.json CASE MODEL TOL RC1 LOG1 DUMP1 RC2 LOG2 DUMP2 PROBE_PREFIX
      one case of the ranks stage: 2 ranks against 1 (thermo, forces, positions to TOL relative),
      the halo exchange, the PMPI probe's records PROBE_PREFIX.<rank>, the per-step transfer counts
  gpu_check_report.py ranks-skip OUT.json CASE MODEL REASON
      a case of the ranks stage that was not run
  gpu_check_report.py devices OUT.json DEV_A RC_A LOG_A DUMP_A DEV_B RC_B LOG_B DUMP_B
      the devices stage: one fp64 input on DEV_A (cpu) and DEV_B (the device): run 0's energy,
      virial and forces to 1e-10 relative, 100 NVE steps' thermo to 1e-8, B's drift within 2x A's + 1e-6 eV/atom
  gpu_check_report.py kokkos OUT.json DEVICE NATOMS RC_REF LOG_REF DUMP_REF NRANKS RC LOG DUMP [NRANKS RC LOG DUMP ...]
      the kokkos stage: pair_style uma/kk on CUDA (-k on g 1 -sf kk) on each rank count against
      pair_style uma device cuda, as devices compares; uma/kk in place, moving neither positions
      nor forces per step (its bytes each way uma's less >= 24 B per atom, the same every step)
  gpu_check_report.py kokkos-speed OUT.json RC_UMA LOG_UMA RC_KK LOG_KK
      adds the NVE steps/s of uma device cuda and of uma/kk on the same input to OUT.json
  gpu_check_report.py kernels OUT.json LOG RC
      the kernels stage: the engine's CUDA kernels against their CPU launchers (kernels_check's
      lines), every output within its bound and the program's "passed" line
  gpu_check_report.py train OUT.json LOG RC NRANKS [PROBE_PREFIX]
      fix uma/train's loss lines and host reads/uploads per optimizer step, checked
  gpu_check_report.py precision OUT.json STRUCT PREC FILE RC [PREC FILE RC ...]
      `uma eval --json` outputs of one structure; the first precision (fp64) is the reference
  gpu_check_report.py versus OUT.json STRUCT DIR
      one structure of the versus_fairchem stage (scripts/gpu_speed_report.py)
  gpu_check_report.py lammps-replay LOG_EAGER LOG_GRAPH RC OUT.json TOL
      lammps_md on the GPU: the cuda_graph yes run against the eager one (scripts/gpu_speed_report.py)
  gpu_check_report.py versus-split eval|fairchem COMBINED RC DIR NAME STRUCT... [-- PRECISION...]
      one run over every structure, each structure's share written where `versus` reads it
  gpu_check_report.py versus-skip OUT.json STRUCT REASON
  gpu_check_report.py versus-compiled OUT.json STRUCT DIR REF_DIR EAGER_DIR
      the versus_fairchem_compiled stage, fairchem's compile timed apart (scripts/gpu_speed_report.py)
  gpu_check_report.py versus-train OUT.json RESULT.json RC
      the versus_train stage: bench/train_step.py's result, our lean step's host reads checked
  gpu_check_report.py largest LOG RC OUT.json MODE
      the largest stage: the LAMMPS run's speed, memory plan and peak GPU memory (MODE gpu: required)
  gpu_check_report.py shards OUT.json LOGDIR DEADLINE_EPOCH_S NSHARDS BINARY [GTEST_ARGS...]
      runs the GoogleTest binary in NSHARDS shards at once (GTEST_TOTAL_SHARDS, GTEST_SHARD_INDEX;
      the environment and working folder as given), each shard's output in LOGDIR; the tests of a
      shard that crashed, and those no shard reached, run again in new shards while time is left;
      all are stopped a few seconds before DEADLINE_EPOCH_S.  Writes the counts, the failed tests
      (failed, crashed, timed out) and those not run; exit 1 unless every test ran and passed
  gpu_check_report.py gtest-exclude BINARY
      prints a ctest -E regex for the LAMMPS-root and converter tests and every case of BINARY
  gpu_check_report.py tests-merge OUT.json GTEST.json CTEST.json
      the tests stage's details: the shards' and ctest's counts and failures together
  gpu_check_report.py archive OUT.tar.gz BASE SUBDIR...
      BASE's small text files (top level) and those under each SUBDIR (logs, outputs, details;
      no models, no installed packages), each at most 2 MB (its end), into one gzipped tar
  gpu_check_report.py summary STAGES DETAILS_DIR ENV.json MODE BUDGET_S TOTAL_S OUT.json [FINAL [SELECTION [ARCHIVE]]]
      the summary JSON (stages in order, their details, the figures, each stage's commands with
      their limits and the cut ones); prints it when FINAL is 1

The subcommands that check (mpi, ranks, devices, kokkos, train, precision) print what they found
and exit 1 when a check fails; they write OUT.json in every case.
"""
import io
import json
import math
import os
import re
import signal
import subprocess
import sys
import tarfile
import time

from gpu_speed_report import (cmd_lammps_replay, cmd_versus, cmd_versus_compiled, cmd_versus_skip,
                              cmd_versus_split, last_thermo)


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


def read_jsonl(path):
    out = []
    try:
        with open(path) as f:
            for line in f:
                try:
                    out.append(json.loads(line))
                except ValueError:
                    pass
    except OSError:
        pass
    return out


def cmd_record(stages, name, status, seconds, details="", note=""):
    entry = {"name": name, "status": status, "seconds": round(float(seconds), 1)}
    if note:
        entry["note"] = note
    d = load(details) if details else None
    if d is not None:
        entry["details"] = d
    # the stage's commands run by `limited`: each one's limit, time and exit status
    commands = read_jsonl(details[:-len(".json")] + ".commands.jsonl") if details.endswith(".json") else []
    if commands:
        entry["commands"] = commands
        cut = [c["command"] for c in commands if c.get("cut")]
        if cut:
            entry["cut_commands"] = cut
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


# ---- the tests stage: the engine suite in GoogleTest shards run at once

GTEST_RUN = re.compile(r"\[ RUN      \] (\S+)")
GTEST_END = re.compile(r"\[ +(OK|FAILED|SKIPPED) +\] (\S+?)(?:, where .*?)?(?: \((\d+) ms\))?\s*$")


def gtest_list(binary, args, timeout):
    """(exit status, [Suite.Name, ...], stderr) of BINARY --gtest_list_tests (DISABLED_ ones left out)."""
    r = subprocess.run([binary, "--gtest_list_tests"] + list(args), capture_output=True, text=True,
                       timeout=timeout)
    tests, suite = [], None
    for line in r.stdout.splitlines():
        code = line.split("#")[0].rstrip()
        if not code.strip():
            continue
        if not line.startswith(" "):
            suite = code.strip() if code.strip().endswith(".") else None
        elif suite:
            tests.append(suite + code.strip())
    return r.returncode, [t for t in tests if "DISABLED_" not in t], r.stderr


def parse_gtest_log(path):
    """[(name, status, ms)] of the tests a shard's output ended, and the one it started and never ended."""
    done, current = [], None
    try:
        with open(path, errors="replace") as f:
            for line in f:
                m = GTEST_RUN.search(line)
                if m:
                    current = m.group(1)
                    continue
                m = GTEST_END.search(line)
                if m and current is not None and m.group(2) == current:
                    done.append((current, {"OK": "passed", "FAILED": "failed", "SKIPPED": "skipped"}[m.group(1)],
                                 int(m.group(3)) if m.group(3) else None))
                    current = None
    except OSError:
        pass
    return done, current


def test_output(path, name, limit=80):
    """The lines a test printed, from its RUN line to its result (or to the end: a crash)."""
    out, on = [], False
    try:
        with open(path, errors="replace") as f:
            for line in f:
                if not on:
                    m = GTEST_RUN.search(line)
                    on = bool(m and m.group(1) == name)
                    if on:
                        out.append(line.rstrip("\n"))
                    continue
                out.append(line.rstrip("\n"))
                m = GTEST_END.search(line)
                if m and m.group(2) == name:
                    break
    except OSError:
        pass
    return out if len(out) <= limit else out[:limit // 2] + ["... (%d lines)" % (len(out) - limit)] + out[-limit // 2:]


def kill_group(proc):
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except OSError:
            return
        try:
            proc.wait(timeout=5)
            return
        except subprocess.TimeoutExpired:
            pass


def exit_text(rc):
    return "signal %d" % -rc if rc is not None and rc < 0 else "exit %s" % rc


def cmd_shards(out, logdir, deadline, nshards, binary, *gtest_args):
    t_start = time.time()
    deadline = float(deadline) - 3   # the stage still writes its details before its end
    n = max(1, int(nshards))
    os.makedirs(logdir, exist_ok=True)
    res = {"binary": binary, "device": os.environ.get("UMA_TEST_DEVICE"), "shards": n,
           "omp_num_threads": os.environ.get("OMP_NUM_THREADS"), "rounds": []}
    try:
        rc, tests, err = gtest_list(binary, gtest_args, max(1.0, min(120.0, deadline - time.time())))
    except (OSError, subprocess.SubprocessError) as e:
        rc, tests, err = None, [], str(e)
    if rc != 0 or not tests:
        res["error"] = "cannot list the tests (%s): %s" % (exit_text(rc), " | ".join(err.strip().splitlines()[-5:]))
        res.update(total=0, passed=0, failed=0, failed_tests=[res["error"]])
        dump(res, out)
        print("gtest shards: FAILED: " + res["error"])
        return 1
    print("%d tests of %s in %d shards at once (UMA_TEST_DEVICE=%s, OMP_NUM_THREADS=%s)" %
          (len(tests), os.path.basename(binary), n, res["device"], res["omp_num_threads"]))
    results, shard_errors, logs_of = {}, [], {}
    pending, round_no = list(tests), 0
    while pending and round_no < 4 and time.time() < deadline - (10 if round_no else 0):
        k = min(n, len(pending))
        # the first round: GoogleTest's own sharding of the whole suite; later ones: what is left
        filt = [] if round_no == 0 else ["--gtest_filter=" + ":".join(pending)]
        procs = []
        for i in range(k):
            log = os.path.join(logdir, "round%d-shard%d.log" % (round_no, i))
            env = dict(os.environ, GTEST_TOTAL_SHARDS=str(k), GTEST_SHARD_INDEX=str(i))
            env.pop("GTEST_SHARD_STATUS_FILE", None)
            f = open(log, "w")
            p = subprocess.Popen([binary] + list(gtest_args) + filt, stdout=f, stderr=subprocess.STDOUT, env=env,
                                 start_new_session=True)
            procs.append({"p": p, "f": f, "log": log, "t0": time.time(), "killed": False, "t1": None})
        while any(x["p"].poll() is None for x in procs):
            now = time.time()
            for x in procs:
                if x["t1"] is None and x["p"].poll() is not None:
                    x["t1"] = now
            if now >= deadline:
                for x in procs:
                    if x["p"].poll() is None:
                        x["killed"] = True
                        kill_group(x["p"])
                break
            time.sleep(0.2)
        crashed, info = False, []
        for x in procs:
            x["p"].wait()
            x["f"].close()
            rcx = x["p"].returncode
            done, current = parse_gtest_log(x["log"])
            rel = os.path.basename(x["log"])
            for name, status, ms in done:
                results[name] = {"status": status, "ms": ms}
                logs_of[name] = x["log"]
            if current is not None:
                results[current] = {"status": "timeout" if x["killed"] else "crashed", "exit": exit_text(rcx)}
                logs_of[current] = x["log"]
                crashed = crashed or not x["killed"]
            elif rcx not in (0, 1) and not x["killed"]:
                shard_errors.append("%s: %s after its last test" % (rel, exit_text(rcx)))
            info.append({"log": rel, "exit": rcx, "killed_at_deadline": x["killed"], "tests_ended": len(done),
                         "seconds": round((x["t1"] or time.time()) - x["t0"], 1)})
        res["rounds"].append({"filter": "left over" if filt else None, "processes": info})
        before = len(pending)
        pending = [t for t in tests if t not in results]
        if any(x["killed"] for x in procs) or not crashed or len(pending) == before:
            break
        print("round %d: a shard crashed; %d tests not reached run again" % (round_no, len(pending)))
        round_no += 1
    status = {}
    for name, r in results.items():
        status.setdefault(r["status"], []).append(name)
    names = {"failed": "Failed", "crashed": "crashed", "timeout": "Timeout"}
    failed_tests = ["%s (%s%s)" % (t, names[st], ": " + results[t]["exit"] if "exit" in results[t] else "")
                    for st in ("failed", "crashed", "timeout") for t in status.get(st, [])]
    not_run = [t for t in tests if t not in results]
    timed = sorted(((r["ms"], t) for t, r in results.items() if r.get("ms") is not None), reverse=True)
    res.update(total=len(tests), passed=len(status.get("passed", [])), failed=len(failed_tests),
               skipped=len(status.get("skipped", [])), skipped_tests=status.get("skipped", []),
               not_run=len(not_run), not_run_tests=not_run[:60], failed_tests=failed_tests,
               shard_errors=shard_errors, seconds=round(time.time() - t_start, 1),
               slowest_ms=[{"test": t, "ms": ms} for ms, t in timed[:12]])
    dump(res, out)
    for t in status.get("failed", []) + status.get("crashed", []) + status.get("timeout", []):
        print("---- %s (%s), %s:" % (t, results[t]["status"], os.path.basename(logs_of[t])))
        for line in test_output(logs_of[t], t):
            print("    " + line)
    print("slowest: " + ", ".join("%s %.1f s" % (t, ms / 1e3) for ms, t in timed[:8]))
    ok = not failed_tests and not not_run and not shard_errors
    print("gtest shards: %d tests, %d passed, %d failed, %d skipped, %d not run%s in %.1f s: %s" % (
        len(tests), res["passed"], len(failed_tests), res["skipped"], len(not_run),
        (", shard errors: " + "; ".join(shard_errors)) if shard_errors else "", res["seconds"],
        "passed" if ok else "FAILED"))
    for t in failed_tests:
        print("  FAILED " + t)
    if not_run:
        print("  not run (the stage's limit): " + ", ".join(not_run[:20]) + (" ..." if len(not_run) > 20 else ""))
    return 0 if ok else 1


def cmd_gtest_exclude(binary):
    rc, tests, err = gtest_list(binary, [], 120)
    if rc != 0 or not tests:
        print("cannot list %s's tests (%s): %s" % (binary, exit_text(rc), err.strip()), file=sys.stderr)
        return 1
    suites = sorted({t.split(".", 1)[0] for t in tests})
    esc = [re.sub(r"([.^$*+?()\[\]{}|\\])", r"\\\1", x) for x in suites]
    print("^(lammps|converter|%s)\\." % "|".join(esc))
    return 0


def cmd_tests_merge(out, gtest_json, ctest_json):
    g, c = load(gtest_json, {}) or {}, load(ctest_json, {}) or {}
    res = {"total": g.get("total", 0) + c.get("total", 0), "passed": g.get("passed", 0) + c.get("passed", 0),
           "failed": g.get("failed", 0) + c.get("failed", 0),
           "failed_tests": g.get("failed_tests", []) + c.get("failed_tests", []),
           "skipped": g.get("skipped", 0), "not_run": g.get("not_run", 0), "not_run_tests": g.get("not_run_tests", []),
           "shard_errors": g.get("shard_errors", []), "gtest": g, "ctest": c}
    if "total" not in c:
        res["ctest_incomplete"] = "no ctest summary line (stopped by the stage's limit?)"
    dump(res, out)
    print("tests: %d, %d passed, %d failed, %d not run%s" % (res["total"], res["passed"], res["failed"],
                                                            res["not_run"], "; ctest incomplete" if "ctest_incomplete" in res else ""))
    return 0


# ---- the one archive that comes back with the summary

ARCHIVE_SKIP_DIRS = {"site", "image", "model", "__pycache__"}
ARCHIVE_SUFFIXES = (".log", ".json", ".jsonl", ".out", ".err", ".rc", ".txt", ".lammps", ".dump", ".data")
ARCHIVE_FILE_CAP = 2 << 20
ARCHIVE_TOTAL_CAP = 48 << 20   # uncompressed; compressed, well under the 16 MiB a file may come back with


def archived(name):
    return name.endswith(ARCHIVE_SUFFIXES) or name.startswith(("log.", "probe.", "in."))


def cmd_archive(out, base, *subdirs):
    files = []
    top_level = (".json", ".jsonl", ".out", ".txt", ".log")
    outname = os.path.basename(out)
    for name in sorted(os.listdir(base)):
        path = os.path.join(base, name)
        if os.path.isfile(path) and name.endswith(top_level) and name != outname and ".tmp" not in name:
            files.append(path)
    for sub in subdirs:
        root = os.path.join(base, sub)
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames[:] = sorted(d for d in dirnames if d not in ARCHIVE_SKIP_DIRS)
            files += [os.path.join(dirpath, f) for f in sorted(filenames) if archived(f) and ".tmp" not in f]
    tmp = "%s.tmp%d" % (out, os.getpid())
    total, left_out, cut = 0, [], []
    with tarfile.open(tmp, "w:gz") as tar:
        for path in files:
            rel = os.path.relpath(path, base)
            try:
                size = os.path.getsize(path)
                with open(path, "rb") as f:
                    if size > ARCHIVE_FILE_CAP:
                        f.seek(size - ARCHIVE_FILE_CAP)
                        cut.append(rel)
                    data = f.read(ARCHIVE_FILE_CAP)
            except OSError:
                continue
            if total + len(data) > ARCHIVE_TOTAL_CAP:
                left_out.append(rel)
                continue
            total += len(data)
            info = tarfile.TarInfo("gpu_check/" + rel)
            info.size, info.mtime, info.mode = len(data), int(time.time()), 0o644
            tar.addfile(info, io.BytesIO(data))
        note = ("The logs and details of scripts/gpu_check.sh, written %s; paths relative to its build folder.\n"
                "Files over %d bytes keep their last %d bytes: %s\nLeft out (over %d bytes in all): %s\n" % (
                    time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), ARCHIVE_FILE_CAP, ARCHIVE_FILE_CAP,
                    ", ".join(cut) or "none", ARCHIVE_TOTAL_CAP, ", ".join(left_out) or "none")).encode()
        info = tarfile.TarInfo("gpu_check/MANIFEST.txt")
        info.size, info.mtime, info.mode = len(note), int(time.time()), 0o644
        tar.addfile(info, io.BytesIO(note))
    os.replace(tmp, out)
    return 0


# The bound on the memory plan: its predicted peak within 25% of the
# evaluation's peak on the GPU in an eager run: the peak LibTorch's allocator
# measured less what the loaded model held before (`resident_device_mb`; the
# plan predicts the evaluation's bytes, not the weights').  The CPU's allocator
# keeps no peak; a replayed run's captures hold pools of their own.
PLAN_OVER_PEAK = (0.75, 1.25)


def cmd_bench(label, stdout, rc, out):
    """One `uma bench` run into the bench stage's list; exits 1 where a GPU run's memory
    plan predicted its peak outside PLAN_OVER_PEAK of the measured one."""
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
                  "model_gflops_per_s", "gemm_gflops_per_s", "load_s", "first_call_s", "peak_rss_mb", "threads",
                  "cuda_graph", "graph_captures", "graph_replays", "graph_refusal", "graph_pool_mb",
                  "step_kernels", "step_memory_ops", "profile", "memory_plan", "predicted_peak_mb",
                  "resident_device_mb"):
            if k in result:
                entry[k] = result[k]
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
        elif re.match(r"pair uma(/kk)?: memory plan", line):
            res["memory_plan"] = line.strip()
            m = re.search(r"(stored|recomputed)", line)
            res["recomputed"] = bool(m) and m.group(1) == "recomputed"
            m = re.search(r"chunks of (\d+) edges", line)
            if m:
                res["chunk_edges"] = int(m.group(1))
            m = re.search(r"predicted peak ([\d.]+) GB, budget ([\d.]+) GB", line)
            if m:
                res["predicted_gb"], res["budget_gb"] = float(m.group(1)), float(m.group(2))
        elif re.match(r"pair uma(/kk)?: peak GPU memory", line):
            res["peak_gpu_line"] = line.strip()
            m = re.search(r"peak GPU memory of the run ([\d.]+) GB", line)
            if m:
                res["peak_gpu_gb"] = float(m.group(1))
            m = re.search(r"of which ([\d.]+) GB were held when it began", line)
            if m:
                res["run_start_gpu_gb"] = float(m.group(1))
        elif "ERROR" in line and "error" not in res:
            res["error"] = line.strip()
    if "peak_gpu_gb" in res and res.get("predicted_gb"):   # against the evaluations' own peak
        own = res["peak_gpu_gb"] - res.get("run_start_gpu_gb", 0.0)
        if own > 0:
            res["predicted_over_peak"] = res["predicted_gb"] / own
    rows = last_thermo(lines)   # the last run's table (the script's NVE run has one)
    if rows:
        res["thermo_first"], res["thermo_last"] = rows[0], rows[-1]
    if "performance" not in res:
        res["log_tail"] = lines[-25:]
    dump(res, out)


# ---- the MPI stages (mpi, ranks, train) and the precision stage (tf32)

LOOP_RE = re.compile(r"Loop time of ([\d.eE+-]+) on (\d+) procs for (\d+) steps with (\d+) atoms")


def number(text):
    """float(text), or None where it is not a number."""
    try:
        return float(text)
    except (TypeError, ValueError):
        return None


def finite(x):
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def compact(x):
    """An integral float as an int (transfer counts), else the float."""
    return int(x) if finite(x) and x == int(x) else x


def finish(out, res, checks_failed, what):
    """Stores the checks' outcome in res, writes it, prints one line; the exit status."""
    res["checks_failed"] = checks_failed
    res["passed"] = not checks_failed
    dump(res, out)
    if checks_failed:
        print("%s: FAILED: %s" % (what, "; ".join(checks_failed)))
        return 1
    print("%s: passed" % what)
    return 0


def cmd_mpi(out, wheel, root, rc_true, rc_comm, comm_out, showme, limit=""):
    lines = tail(comm_out, 200)
    said = [l.strip() for l in lines if re.match(r"\s*rank \d+ of \d+: allreduce", l)]
    ok_ranks = sorted({int(m.group(1)) for m in (re.match(r"rank (\d+) of 2: allreduce ok", l) for l in said) if m})
    library = next((m.group(0) for m in (re.search(r"Open MPI v[\w.]+", l) for l in said) if m), None)
    res = {"wheel": os.path.basename(wheel), "root": root, "library": library,
           "mpirun_np2_true_rc": int(rc_true), "allreduce_rc": int(rc_comm), "allreduce_ranks_ok": ok_ranks,
           "wrappers": [l.strip() for l in tail(showme, 10) if l.strip()]}
    if limit:
        res["limit_s"] = int(limit)
    failed = []
    if int(rc_true) != 0:
        failed.append("mpirun -np 2 true exited %s" % rc_true)
    if int(rc_comm) != 0 or ok_ranks != [0, 1]:
        failed.append("the 2-rank MPI_Allreduce failed (exit %s, ranks ok: %s)" % (rc_comm, ok_ranks))
        res["allreduce_output"] = lines[-20:]
    return finish(out, res, failed, "mpi")


def thermo_runs(lines):
    """The thermo tables of a LAMMPS log: one list of rows (column -> value) per run."""
    runs, header = [], None
    for line in lines:
        s = line.split()
        if s and s[0] == "Step":
            header = s
            runs.append([])
            continue
        if header and line.startswith("Loop time"):
            header = None
            continue
        if header and len(s) == len(header):
            values = [number(v) for v in s]
            if None not in values:
                runs[-1].append(dict(zip(header, values)))
    return runs


def loops(lines):
    return [{"loop_s": float(m.group(1)), "procs": int(m.group(2)), "steps": int(m.group(3)),
             "atoms": int(m.group(4))} for m in (LOOP_RE.search(l) for l in lines) if m]


def lammps_device(lines):
    for line in lines:
        if line.startswith(("pair uma: model", "pair uma/kk: model")):
            m = re.search(r" on (\S+)$", line.strip())
            if m:
                return m.group(1)
    return None


def first_error(lines):
    return next((l.strip() for l in lines if "ERROR" in l), None)


def read_dump(path):
    """A LAMMPS custom dump: a list of (timestep, {id: {column: value}})."""
    try:
        lines = open(path).read().splitlines()
    except OSError:
        return []
    snaps, i = [], 0
    while i < len(lines):
        if lines[i].startswith("ITEM: TIMESTEP"):
            step = int(lines[i + 1])
            snaps.append([step, {}])
            i += 2
        elif lines[i].startswith("ITEM: NUMBER OF ATOMS"):
            natoms = int(lines[i + 1])
            i += 2
        elif lines[i].startswith("ITEM: ATOMS"):
            cols = lines[i].split()[2:]
            for row in lines[i + 1:i + 1 + natoms]:
                values = dict(zip(cols, (float(v) for v in row.split())))
                snaps[-1][1][int(values.pop("id"))] = values
            i += 1 + natoms
        else:
            i += 1
    return [tuple(s) for s in snaps]


def read_probe(prefix, nranks):
    """The PMPI probe's records, one dict per rank (None where a rank wrote none)."""
    out = []
    for rank in range(nranks):
        try:
            words = open("%s.%d" % (prefix, rank)).read().split()
        except OSError:
            out.append(None)
            continue
        rec = dict(zip(words[0::2], words[1::2]))
        out.append({"calls": int(rec.get("calls", -1)), "off_main_thread": int(rec.get("off_main_thread", -1)),
                    "inside_autograd": int(rec.get("inside_autograd", -1)), "first_bad": rec.get("first_bad")})
    return out


def probe_failures(probe, tag, min_calls):
    failed = []
    for rank, rec in enumerate(probe):
        if rec is None:
            failed.append("%s rank %d wrote no MPI probe record (was the probe preloaded?)" % (tag, rank))
            continue
        if rec["calls"] <= min_calls:
            failed.append("%s rank %d: only %d MPI calls recorded (want more than %d)" %
                          (tag, rank, rec["calls"], min_calls))
        if rec["off_main_thread"] != 0:
            failed.append("%s rank %d: %d of %d MPI calls off LAMMPS's main thread (first: %s)" %
                          (tag, rank, rec["off_main_thread"], rec["calls"], rec["first_bad"]))
        if rec["inside_autograd"] != 0:
            failed.append("%s rank %d: %d of %d MPI calls inside an autograd pass (first: %s)" %
                          (tag, rank, rec["inside_autograd"], rec["calls"], rec["first_bad"]))
    return failed


TRANSFER_COLUMNS = {"c_pu[1]": "host_reads", "c_pu[2]": "uploads", "c_pu[5]": "ghosts_in_graph",
                    "c_pu[6]": "halo_bytes_packed"}
THERMO_COMPARED = ("PotEng", "KinEng", "TotEng", "Press", "Pxx", "Pyy", "Pzz", "Pxy", "Pxz", "Pyz")


def max_relative(ref, other):
    """max |ref - other| / max |ref| (absolute where ref is all zero)."""
    scale = max((abs(v) for v in ref), default=0.0) or 1.0
    return max((abs(a - b) for a, b in zip(ref, other)), default=0.0) / scale


def lammps_run_summary(rc, log_lines, nranks):
    runs = thermo_runs(log_lines)
    res = {"rc": int(rc), "loops": loops(log_lines), "device": lammps_device(log_lines)}
    err = first_error(log_lines)
    if err:
        res["error"] = err
    res["transfers_per_step"] = [
        dict({"step": [int(r["Step"]) for r in run]},
             **{name: [compact(r[col]) for r in run] for col, name in TRANSFER_COLUMNS.items() if run and col in run[0]})
        for run in runs]
    return res, runs


def cmd_ranks(out, case, model, tol, rc1, log1, dump1, rc2, log2, dump2, probe_prefix):
    tol = float(tol)
    res = load(out, {}) or {}
    res.setdefault("tolerance", tol)
    cases = res.setdefault("cases", {})
    lines1, lines2 = tail(log1, 100000), tail(log2, 100000)
    one, runs1 = lammps_run_summary(rc1, lines1, 1)
    two, runs2 = lammps_run_summary(rc2, lines2, 2)
    entry = {"model": os.path.basename(model), "np1": one, "np2": two}
    failed = []
    for tag, rc, summary, lines, nranks in (("1 rank", rc1, one, lines1, 1), ("2 ranks", rc2, two, lines2, 2)):
        if int(rc) != 0:
            failed.append("%s: lmp exited %s%s" % (tag, rc, " (time limit)" if int(rc) in (124, 137) else ""))
            summary["log_tail"] = lines[-15:]
        if summary["loops"] and any(l["procs"] != nranks for l in summary["loops"]):
            failed.append("%s: LAMMPS ran on %s procs" % (tag, sorted({l["procs"] for l in summary["loops"]})))
    two["halo_exchange"] = any("halo exchange on 2 ranks" in l for l in lines2)
    if int(rc2) == 0 and not two["halo_exchange"]:
        failed.append("2 ranks: the run did not use the halo exchange")
    # thermo: every column compared over every row of every run
    dev = {}
    if int(rc1) == 0 and int(rc2) == 0:
        steps1 = [[r["Step"] for r in run] for run in runs1]
        steps2 = [[r["Step"] for r in run] for run in runs2]
        if not runs1 or steps1 != steps2:
            failed.append("the thermo rows of 1 and 2 ranks differ in number or steps")
        else:
            for col in THERMO_COMPARED:
                if col in runs1[0][0] and col in runs2[0][0]:
                    a = [r[col] for run in runs1 for r in run]
                    b = [r[col] for run in runs2 for r in run]
                    dev[col] = max_relative(a, b)
        snaps1, snaps2 = read_dump(dump1), read_dump(dump2)
        if not snaps1 or [s[0] for s in snaps1] != [s[0] for s in snaps2] or \
                any(sorted(a[1]) != sorted(b[1]) for a, b in zip(snaps1, snaps2)):
            failed.append("the dumps of 1 and 2 ranks differ in snapshots or atoms (%s vs %s)" %
                          ([s[0] for s in snaps1], [s[0] for s in snaps2]))
        else:
            for group, cols in (("forces", ("fx", "fy", "fz")), ("positions", ("xu", "yu", "zu"))):
                a = [s[1][i][c] for s in snaps1 for i in sorted(s[1]) for c in cols]
                b = [s[1][i][c] for s in snaps2 for i in sorted(s[1]) for c in cols]
                dev[group] = max_relative(a, b)
            entry["dump_steps"] = [s[0] for s in snaps1]
        non_finite = [k for k, v in dev.items() if not finite(v)]
        if non_finite:
            failed.append("non-finite deviations: %s" % ", ".join(non_finite))
        over = ["%s %.2e" % (k, v) for k, v in dev.items() if finite(v) and v > tol]
        if over:
            failed.append("2 ranks differ from 1 by more than %.0e relative: %s" % (tol, ", ".join(over)))
    entry["max_relative_deviation"] = dev
    if dev:
        entry["worst_relative_deviation"] = max(dev.values())
    entry["probe"] = read_probe(probe_prefix, 2)
    failed += probe_failures(entry["probe"], "2 ranks:", 100)
    entry["checks_failed"] = failed
    entry["passed"] = not failed
    cases[case] = entry
    res["passed"] = all(c.get("passed", False) or "skipped" in c for c in cases.values())
    dump(res, out)
    worst = entry.get("worst_relative_deviation")
    calls = [p["calls"] for p in entry["probe"] if p]
    print("ranks %s: 2 ranks vs 1: worst relative deviation %s; MPI calls per rank %s; %s" %
          (case, "%.2e" % worst if worst is not None else "n/a", calls,
           "passed" if not failed else "FAILED: " + "; ".join(failed)))
    return 1 if failed else 0


def cmd_ranks_skip(out, case, model, reason):
    res = load(out, {}) or {}
    cases = res.setdefault("cases", {})
    cases[case] = {"model": os.path.basename(model), "skipped": reason}
    res["passed"] = all(c.get("passed", False) or "skipped" in c for c in cases.values())
    dump(res, out)
    print("ranks %s: %s" % (case, reason))
    return 0


def compare_runs(res, failed, a, b, sa, sb, label_a, label_b):
    """Run 0 and 100 NVE steps of the same input, thermo every 10 steps (a, b:
    thermo_runs; sa, sb: read_dump): run 0's energy, virial and forces within
    1e-10 relative, the NVE energies and pressure within 1e-8, b's energy drift
    at most twice a's.  Deviations into res; failures appended to failed."""
    if len(a) != 2 or len(b) != 2 or len(a[1]) != 11 or len(b[1]) != 11:
        failed.append("expected run 0 and 11 rows of run 100 for each: %s vs %s rows" %
                      ([len(r) for r in a], [len(r) for r in b]))
        return None
    pressure = ("Pxx", "Pyy", "Pzz", "Pxy", "Pxz", "Pyz")
    dev = {"run0_energy": max_relative([a[0][0]["PotEng"]], [b[0][0]["PotEng"]]),
           "run0_virial": max_relative([a[0][0][c] for c in pressure], [b[0][0][c] for c in pressure])}
    if not sa or not sb or sa[0][0] != 0 or sb[0][0] != 0 or sorted(sa[0][1]) != sorted(sb[0][1]):
        failed.append("the dumps lack run 0's snapshot or differ in atoms")
    else:
        ids = sorted(sa[0][1])
        dev["run0_forces"] = max_relative([sa[0][1][i][c] for i in ids for c in ("fx", "fy", "fz")],
                                          [sb[0][1][i][c] for i in ids for c in ("fx", "fy", "fz")])
    over = ["%s %.2e" % (k, v) for k, v in dev.items() if not finite(v) or v > 1e-10]
    if over:
        failed.append("%s: run 0 differs from %s by more than 1e-10 relative: %s" % (label_b, label_a, ", ".join(over)))
    for col in ("PotEng", "TotEng", "Press"):
        worst = max(abs(x[col] - y[col]) / max(1.0, abs(x[col])) for x, y in zip(a[1], b[1]))
        dev["nve_" + col] = worst
        if not finite(worst) or worst > 1e-8:
            failed.append("%s: NVE %s differs by %.2e (relative, over 100 steps)" % (label_b, col, worst))
    natoms = len(sa[0][1]) if sa else 1
    drift = {k: abs(r[1][-1]["TotEng"] - r[1][0]["TotEng"]) / natoms for k, r in ((label_a, a), (label_b, b))}
    if not drift[label_b] <= 2 * drift[label_a] + 1e-6:
        failed.append("NVE drift over 100 steps: %.2e eV/atom for %s, %.2e for %s" %
                      (drift[label_b], label_b, drift[label_a], label_a))
    return dev, drift


def run_with_dump(rc, log, dmp, nranks=1):
    lines = tail(log, 100000)
    summary, runs = lammps_run_summary(rc, lines, nranks)
    if int(rc) != 0:
        summary["log_tail"] = lines[-15:]
    return summary, runs, read_dump(dmp), lines


def cmd_devices(out, dev_a, rc_a, log_a, dump_a, dev_b, rc_b, log_b, dump_b):
    """Run A (the CPU) is the reference, run B the device's; keyed "reference" and "device"."""
    res = {"devices": {"reference": dev_a, "device": dev_b}, "rehearsal": dev_a == dev_b}
    failed, runs, snaps = [], {}, {}
    for key, dev, rc, log, dmp in (("reference", dev_a, rc_a, log_a, dump_a), ("device", dev_b, rc_b, log_b, dump_b)):
        summary, runs[key], snaps[key], _ = run_with_dump(rc, log, dmp)
        res[key] = summary
        if int(rc) != 0:
            failed.append("%s (%s): lmp exited %s" % (key, dev, rc))
        elif summary["device"] is None or not summary["device"].startswith(dev):
            failed.append("%s: pair uma reported device %s, not %s" % (key, summary["device"], dev))
    if not failed:
        got = compare_runs(res, failed, runs["reference"], runs["device"], snaps["reference"], snaps["device"],
                           "reference", "device")
        if got:
            res["max_relative_deviation"], res["nve_drift_ev_per_atom"] = got
    return finish(out, res, failed, "devices %s vs %s%s" % (dev_b, dev_a, " (rehearsal)" if dev_a == dev_b else ""))


KK_TRANSFERS = {"c_pu[1]": "host_reads", "c_pu[2]": "uploads", "c_pu[7]": "read_bytes", "c_pu[8]": "upload_bytes"}


def steady_transfers(run):
    """{name: the per-step value of steps 10..100} where it is the same on every row, else None."""
    out = {}
    for col, name in KK_TRANSFERS.items():
        values = {r.get(col) for r in run[1:]}
        out[name] = values.pop() if len(values) == 1 else None
    return out


def cmd_kokkos(out, device, natoms, rc_ref, log_ref, dump_ref, *kk_runs):
    """pair_style uma/kk under LAMMPS's KOKKOS package on CUDA (-k on g 1 -sf kk) against
    pair_style uma device cuda on the same fp64 input (compare_runs), on each rank count
    of kk_runs (NRANKS RC LOG DUMP ...); in the NVE steps, uma/kk moves neither the
    positions nor the forces between host and device: per step on 1 rank, its bytes each
    way are uma's less at least 24 B per atom, and fewer than 8 B per atom (no per-atom
    array crosses), and on every rank count they do not vary from step to step.  DEVICE: cuda (cpu
    in a rehearsal with an OpenMP Kokkos)."""
    natoms = int(natoms)
    res = {"atoms": natoms, "device": device, "runs": {}}
    failed = []
    ref, ref_runs, ref_snaps, _ = run_with_dump(rc_ref, log_ref, dump_ref)
    res["reference"] = ref
    if int(rc_ref) != 0:
        failed.append("reference (pair_style uma device %s): lmp exited %s" % (device, rc_ref))
    elif not (ref["device"] or "").startswith(device):
        failed.append("reference: pair uma reported device %s, not %s" % (ref["device"], device))
    ref_steady = steady_transfers(ref_runs[1]) if not failed and len(ref_runs) == 2 else {}
    res["reference_transfers_per_step"] = ref_steady
    for i in range(0, len(kk_runs), 4):
        nranks, rc, log, dmp = kk_runs[i:i + 4]
        label = "uma/kk on %s rank(s)" % nranks
        summary, runs, snaps, lines = run_with_dump(rc, log, dmp, int(nranks))
        res["runs"][nranks] = summary
        if int(rc) != 0:
            failed.append("%s: lmp exited %s (%s)" % (label, rc, summary.get("error")))
            continue
        if not (summary["device"] or "").startswith(device):
            failed.append("%s: pair uma/kk reported device %s, not %s" % (label, summary["device"], device))
        if not any("pair uma/kk: in place on the Kokkos views" in l for l in lines):
            failed.append("%s: not in place on the Kokkos views (%s)" %
                          (label, next((l.strip() for l in lines if l.startswith("pair uma/kk: atoms go")), "?")))
        if int(rc_ref) == 0:
            got = compare_runs(res, failed, ref_runs, runs, ref_snaps, snaps, "uma device " + device, label)
            if got:
                summary["max_relative_deviation"], summary["nve_drift_ev_per_atom"] = got
        if len(runs) == 2 and ref_steady:
            steady = steady_transfers(runs[1])
            summary["steady_transfers_per_step"] = steady
            if None in steady.values() or None in ref_steady.values():
                failed.append("%s: transfers vary from step to step (%s; uma: %s)" % (label, steady, ref_steady))
            elif nranks == "1" and not (steady["read_bytes"] <= ref_steady["read_bytes"] - 24 * natoms and
                                        steady["upload_bytes"] <= ref_steady["upload_bytes"] - 24 * natoms):
                failed.append("%s moves %g B / %g B per step, uma %g B / %g B: uma/kk still moves the forces or "
                              "the positions" % (label, steady["read_bytes"], steady["upload_bytes"],
                                                 ref_steady["read_bytes"], ref_steady["upload_bytes"]))
            elif nranks == "1" and not max(steady["read_bytes"], steady["upload_bytes"]) < 8 * natoms:
                failed.append("%s moves %g B / %g B per step: not even one number per atom may cross between host "
                              "and device (%d atoms)" % (label, steady["read_bytes"], steady["upload_bytes"], natoms))
    return finish(out, res, failed, "kokkos: uma/kk against uma device %s" % device)


def cmd_kokkos_speed(out, rc_uma, log_uma, rc_kk, log_kk):
    """NVE steps/s of the same input through pair_style uma device cuda and through uma/kk."""
    res = load(out, {}) or {}
    failed = list(res.get("checks_failed", []))
    speed = {}
    for key, rc, log in (("uma_device_cuda", rc_uma, log_uma), ("uma_kk", rc_kk, log_kk)):
        lines = tail(log, 100000)
        lp = loops(lines)
        if int(rc) != 0 or not lp:
            failed.append("speed run %s: lmp exited %s (%s)" % (key, rc, first_error(lines)))
            continue
        speed[key] = {"steps": lp[-1]["steps"], "atoms": lp[-1]["atoms"], "loop_s": lp[-1]["loop_s"],
                      "steps_per_s": lp[-1]["steps"] / lp[-1]["loop_s"] if lp[-1]["loop_s"] > 0 else None}
    if len(speed) == 2 and speed["uma_device_cuda"]["steps_per_s"]:
        speed["kk_over_uma"] = speed["uma_kk"]["steps_per_s"] / speed["uma_device_cuda"]["steps_per_s"]
    res["speed"] = speed
    return finish(out, res, failed, "kokkos: steps/s, uma/kk against uma device cuda")


LOSS_RE = re.compile(r"fix uma/train: step (\d+) optimizer step (\d+) frames (\d+) loss (\S+)")
TRAIN_TRANSFERS_RE = re.compile(r"fix uma/train: (\S+) host reads and (\S+) uploads per optimizer step "
                                r"\((\d+) steps? since")


def cmd_kernels(out, log, rc):
    """The engine's CUDA kernels against their CPU launchers (tests/cuda/kernels_check.cu): one
    row per kernel, output and precision with its relative deviation and bound."""
    rows, device, unread = [], None, []
    text = open(log, errors="replace").read() if os.path.exists(log) else ""
    for line in text.splitlines():
        m = re.match(r"kernels check on (.*)$", line)
        if m:
            device = m.group(1)
        m = re.match(r"(\S+)\s+(\S+)\s+(fp64|fp32)\s+relative (\S+) \(bound (\S+)\) (ok|FAILED)$", line)
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


def cmd_train(out, log, rc, nranks="1", probe_prefix=""):
    lines = tail(log, 100000)
    nranks = int(nranks)
    losses, transfers = [], []
    for line in lines:
        m = LOSS_RE.search(line)
        if m:
            entry = {"step": int(m.group(1)), "optimizer_step": int(m.group(2)), "frames": int(m.group(3)),
                     "loss": number(m.group(4))}
            for key, pat in (("energy_mae", r"MAE energy (\S+)"), ("forces_mae", r"forces (\S+) eV/A\b"),
                             ("grad_norm", r"grad_norm (\S+)"), ("lr", r" lr (\S+)")):
                mm = re.search(pat, line)
                if mm:
                    entry[key] = number(mm.group(1))
            losses.append(entry)
        m = TRAIN_TRANSFERS_RE.search(line)
        if m:
            transfers.append({"host_reads": number(m.group(1)), "uploads": number(m.group(2)),
                              "steps": int(m.group(3))})
    res = {"rc": int(rc), "ranks": nranks, "device": lammps_device(lines), "loops": loops(lines),
           "losses": losses, "transfers_per_optimizer_step": transfers}
    err = first_error(lines)
    if err:
        res["error"] = err
    failed = []
    if int(rc) != 0:
        failed.append("lmp exited %s%s" % (rc, " (time limit)" if int(rc) in (124, 137) else ""))
        res["log_tail"] = lines[-20:]
    lp = res["loops"]
    if len(lp) < 2 or lp[0]["steps"] != 0:
        failed.append("want `run 0` (before the fix) and then the training run; Loop time lines: %s" %
                      [l["steps"] for l in lp])
    values = [l["loss"] for l in losses]
    if len(values) < 5:
        failed.append("%d loss lines, want at least 5" % len(values))
    if not all(finite(v) for v in values):
        failed.append("non-finite losses: %s" % values)
    elif len(values) >= 2 and not values[-1] < values[0]:
        failed.append("the last loss %.6g is not below the first %.6g" % (values[-1], values[0]))
    if not transfers:
        failed.append("no 'host reads and uploads per optimizer step' lines")
    elif nranks == 1 and any(t["host_reads"] != 0 for t in transfers):
        failed.append("host reads per optimizer step on 1 rank: %s (want 0)" % [t["host_reads"] for t in transfers])
    if probe_prefix:
        res["probe"] = read_probe(probe_prefix, nranks)
        failed += probe_failures(res["probe"], "train:", 0)
    if values:
        res["loss_first"], res["loss_last"] = values[0], values[-1]
    return finish(out, res, failed, "train: %d loss lines%s; host reads per optimizer step %s; uploads %s" %
                  (len(values), " %.6g -> %.6g" % (values[0], values[-1]) if values else "",
                   [t["host_reads"] for t in transfers], [t["uploads"] for t in transfers]))


def eval_frame(path, rc):
    """The first frame `uma eval --json` printed, or an error text."""
    if int(rc) != 0:
        err = path[:-5] + ".err" if path.endswith(".json") else path
        return None, "exit %s%s: %s" % (rc, " (time limit)" if int(rc) in (124, 137) else "",
                                        " | ".join(tail(err, 5)))
    data = load(path)
    if not isinstance(data, list) or not data or not isinstance(data[0], dict):
        return None, "no JSON list of frames in %s" % path
    frame = data[0]
    if not isinstance(frame.get("energy"), (int, float)) or not isinstance(frame.get("forces"), list):
        return None, "the frame lacks energy or forces"
    return frame, None


def cmd_precision(out, struct, *triples):
    if not triples or len(triples) % 3:
        print("precision: want PREC FILE RC triples", file=sys.stderr)
        return 2
    res = load(out, {}) or {}
    structs = res.setdefault("structures", {})
    runs = list(zip(triples[0::3], triples[1::3], triples[2::3]))
    entry = {"reference": runs[0][0], "runs": {}}
    failed, frames = [], {}
    for prec, path, rc in runs:
        frame, err = eval_frame(path, rc)
        if err:
            entry["runs"][prec] = {"rc": int(rc), "error": err}
            failed.append("%s: %s" % (prec, err))
            continue
        forces = frame["forces"]
        values = [frame["energy"]] + forces + list(frame.get("stress") or [])
        entry["runs"][prec] = {"rc": 0, "energy": frame["energy"], "atoms": len(forces) // 3,
                               "edges": frame.get("edges")}
        if not all(finite(v) for v in values):   # (JSON null: nlohmann's NaN)
            entry["runs"][prec]["error"] = "non-finite energy, forces or stress"
            failed.append("%s: non-finite energy, forces or stress" % prec)
            continue
        frames[prec] = frame
    ref_prec = runs[0][0]
    ref = frames.get(ref_prec)
    if ref is not None:
        n = len(ref["forces"]) // 3
        fmax = max((abs(v) for v in ref["forces"]), default=0.0)
        entry["atoms"] = n
        entry["reference_energy_per_atom"] = ref["energy"] / n
        entry["reference_max_abs_force"] = fmax
        for prec, frame in frames.items():
            if prec == ref_prec:
                continue
            if len(frame["forces"]) != len(ref["forces"]):
                failed.append("%s: %d force components, %s has %d" % (prec, len(frame["forces"]), ref_prec,
                                                                      len(ref["forces"])))
                continue
            diff = [abs(a - b) for a, b in zip(frame["forces"], ref["forces"])]
            errs = {"energy_per_atom_error": abs(frame["energy"] - ref["energy"]) / n,
                    "force_max_abs_error": max(diff), "force_mean_abs_error": sum(diff) / len(diff),
                    "force_max_relative_error": max(diff) / (fmax or 1.0)}
            if ref.get("stress") and frame.get("stress"):
                errs["stress_max_abs_error"] = max(abs(a - b) for a, b in zip(frame["stress"], ref["stress"]))
            entry["runs"][prec].update(errs)
            print("%s %s vs %s: energy %.3e eV/atom, forces max %.3e mean %.3e eV/A (max |F| %.3g)" %
                  (struct, prec, ref_prec, errs["energy_per_atom_error"], errs["force_max_abs_error"],
                   errs["force_mean_abs_error"], fmax))
            if prec == "fp32" and not errs["energy_per_atom_error"] < 1e-3:
                failed.append("fp32 energy %.3e eV/atom from %s (limit 1e-3)" % (errs["energy_per_atom_error"],
                                                                                 ref_prec))
    entry["checks_failed"] = failed
    entry["passed"] = not failed
    structs[struct] = entry
    res["passed"] = all(e.get("passed") for e in structs.values())
    dump(res, out)
    print("precision %s: %s" % (struct, "passed" if not failed else "FAILED: " + "; ".join(failed)))
    return 1 if failed else 0


def summarise_ranks_case(c):
    """The figures of one ranks case: deviation, probe counts, the last step's transfer counts."""
    if "skipped" in c:
        return {"skipped": c["skipped"]}
    out = {k: c[k] for k in ("passed", "worst_relative_deviation", "checks_failed") if k in c}
    out["mpi_calls_per_rank"] = [p["calls"] if p else None for p in c.get("probe", [])]
    for tag in ("np1", "np2"):
        runs = c.get(tag, {}).get("transfers_per_step", [])
        if runs and runs[-1].get("step"):
            out[tag + "_last_step"] = {k: v[-1] for k, v in runs[-1].items()}
    return out


def cmd_versus_train(out, result_path, rc):
    """bench/train_step.py's result: per batch the step times, speed-ups, host reads and peak
    device memory; fails where it did not finish or our lean step read the host."""
    res = {"rc": int(rc), "batches": {}}
    checks_failed = []
    result = load(result_path) if int(rc) == 0 else None
    if result is None:
        checks_failed.append("bench/train_step.py did not finish (exit %s)" % rc)
    else:
        res["device"] = result.get("device")
        for name, b in result.get("batches", {}).items():
            mine, ref, theirs = b["lammps_uma"], b["lammps_uma_reference_edge_ops"], b["fairchem"]
            res["batches"][name] = {
                "atoms": b["atoms_per_batch"],
                "lean_s": mine["median_seconds"], "reference_s": ref["median_seconds"],
                "fairchem_s": theirs["median_seconds"],
                "speedup_over_fairchem": b["speedup"],
                "reference_speedup_over_fairchem": b["speedup_reference_edge_ops"],
                "host_reads_per_step": {"lean": mine["host_reads_per_step"],
                                        "fairchem": theirs["host_reads_per_step"]},
                "peak_device_mb": {"lean": mine.get("peak_device_mb"), "reference": ref.get("peak_device_mb"),
                                   "fairchem": theirs.get("peak_device_mb")},
                "loss": {"lean": mine["loss"], "reference": ref["loss"]}}
            if mine["host_reads_per_step"] != 0:
                checks_failed.append("%s: our lean step read the host %d times" % (name, mine["host_reads_per_step"]))
    return finish(out, res, checks_failed, "the training step side by side")


def cmd_largest(log, rc, out, mode):
    """The largest stage: the LAMMPS run's figures (cmd_lammps) checked: it finished, logged its
    memory plan, and on a GPU its peak memory."""
    cmd_lammps(log, out)
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


def versus_figures(d):
    return {struct: ({"not_run": e["not_run"]} if "not_run" in e else
                     {"atoms": e.get("atoms"), "passed": e.get("passed"), "ratios": e.get("ratios"),
                      "checks_failed": e.get("checks_failed"),
                      "runs": {n: {k: r[k] for k in ("ms_per_step", "steps_per_s", "peak_device_mb", "first_call_s",
                                                     "load_s", "compile_s", "compile_s_over_eager",
                                                     "energy_per_atom_error", "force_max_abs_error",
                                                     "version", "torch", "cut", "error") if k in r}
                               for n, r in e.get("runs", {}).items()}})
            for struct, e in d.get("structures", {}).items()}


def cmd_summary(stages_path, details_dir, env_path, mode, budget, total, out, final="0", selection="all",
                archive=""):
    stages = read_jsonl(stages_path)
    failed = [s["name"] for s in stages if s["status"] == "failed"]
    skipped = [s["name"] for s in stages if s["status"] == "skipped"]
    not_selected = [s["name"] for s in stages if s["status"] == "not_selected"]
    figures = {}
    for s in stages:
        d = s.get("details")
        if s["name"] == "tests" and d:
            figures["tests"] = {k: d[k] for k in ("total", "passed", "failed", "failed_tests", "skipped", "not_run",
                                                  "not_run_tests", "shard_errors", "ctest_incomplete") if k in d}
            g = d.get("gtest") or {}
            if g:
                figures["tests"]["shards"] = g.get("shards")
                figures["tests"]["gtest_seconds"] = g.get("seconds")
                figures["tests"]["slowest_ms"] = g.get("slowest_ms", [])[:5]
        if s["name"] == "profile" and isinstance(d, list):
            figures["uma_profile"] = [{k: r[k] for k in ("run", "atoms", "ms_per_step", "profile", "rc", "error")
                                       if k in r} for r in d]
        if s["name"] == "bench" and isinstance(d, list):
            figures["uma_bench"] = [{k: r[k] for k in ("run", "atoms", "edges", "device", "precision", "ms_per_step",
                                                       "steps_per_s", "peak_device_mb", "resident_device_mb",
                                                       "evaluation_peak_mb", "predicted_peak_mb", "predicted_over_peak",
                                                       "model_gflops_per_s", "graph_replays",
                                                       "graph_refusal", "step_kernels", "step_memory_ops", "profile",
                                                       "rc", "error")
                                     if k in r} for r in d]
        if s["name"] == "lammps_md" and d:
            figures["lammps_md"] = {k: d[k] for k in ("performance", "timesteps_per_s", "atoms", "steps", "device",
                                                      "loop_s", "error") if k in d}
        if s["name"] == "mpi" and d:
            figures["mpi"] = {k: d[k] for k in ("library", "allreduce_ranks_ok", "passed", "checks_failed") if k in d}
        if s["name"] == "ranks" and d:
            figures["ranks"] = {name: summarise_ranks_case(c) for name, c in d.get("cases", {}).items()}
        if s["name"] == "devices" and d:
            figures["devices"] = {k: d[k] for k in ("devices", "rehearsal", "max_relative_deviation",
                                                    "nve_drift_ev_per_atom", "passed", "checks_failed") if k in d}
        if s["name"] == "kokkos" and d:
            figures["kokkos"] = {k: d[k] for k in ("atoms", "speed", "reference_transfers_per_step", "passed",
                                                   "checks_failed") if k in d}
            figures["kokkos"]["runs"] = {n: {k: r[k] for k in ("max_relative_deviation", "steady_transfers_per_step",
                                                               "error")
                                             if k in r} for n, r in d.get("runs", {}).items()}
        if s["name"] == "kernels" and d:
            figures["kernels"] = {k: d[k] for k in ("device", "max_relative", "passed", "checks_failed") if k in d}
        if s["name"] == "train" and d:
            figures["train"] = {k: d[k] for k in ("device", "loss_first", "loss_last", "passed", "checks_failed",
                                                  "error") if k in d}
            figures["train"]["loss_lines"] = len(d.get("losses", []))
            figures["train"]["host_reads_per_optimizer_step"] = [t["host_reads"] for t in
                                                                 d.get("transfers_per_optimizer_step", [])]
            figures["train"]["uploads_per_optimizer_step"] = [t["uploads"] for t in
                                                              d.get("transfers_per_optimizer_step", [])]
        if s["name"] == "lammps_md":
            replay = load(os.path.join(details_dir, "lammps_md_replay.json"))
            if replay:
                figures["lammps_md_replay"] = {k: replay[k] for k in (
                    "passed", "worst_difference", "eager_timesteps_per_s", "replayed_timesteps_per_s",
                    "replay_speedup", "checks_failed") if k in replay}
        if s["name"] in ("versus_fairchem", "versus_fairchem_compiled") and d:
            figures[s["name"]] = versus_figures(d)
        if s["name"] == "largest" and d:
            figures["largest"] = {k: d[k] for k in ("atoms", "steps", "timesteps_per_s", "memory_plan", "recomputed",
                                                    "chunk_edges", "predicted_gb", "budget_gb", "peak_gpu_gb",
                                                    "predicted_over_peak", "peak_within_budget", "error") if k in d}
        if s["name"] == "versus_train" and d:
            figures["versus_train"] = d.get("batches")
        if s["name"] == "tf32" and d:
            figures["tf32"] = {
                struct: dict({"atoms": e.get("atoms"), "passed": e.get("passed")},
                             **{p: {k: r[k] for k in ("energy_per_atom_error", "force_max_abs_error",
                                                      "force_mean_abs_error", "error") if k in r}
                                for p, r in e.get("runs", {}).items() if p != e.get("reference")})
                for struct, e in d.get("structures", {}).items()}
    budget = float(budget)
    summary = {
        "check": "lammps-uma scripts/gpu_check.sh",
        "mode": mode,
        "note": ("CPU proof of the offline build from the prepared folder: NOT GPU figures"
                 if mode == "cpu-proof" else "GPU check"),
        # passed: every stage of the selection ran and passed (not_selected_stages: those it did not ask for)
        "status": "failed" if failed or skipped else "passed",
        "selection": selection,
        "failed_stages": failed,
        "skipped_stages": skipped,
        "not_selected_stages": not_selected,
        "cut_commands": {s["name"]: s["cut_commands"] for s in stages if s.get("cut_commands")},
        "archive": archive or None,
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
            "mpi": cmd_mpi, "ranks": cmd_ranks, "ranks-skip": cmd_ranks_skip, "devices": cmd_devices,
            "kokkos": cmd_kokkos, "kokkos-speed": cmd_kokkos_speed, "kernels": cmd_kernels,
            "train": cmd_train, "versus": cmd_versus, "versus-skip": cmd_versus_skip,
            "versus-split": cmd_versus_split,
            "versus-compiled": cmd_versus_compiled, "versus-train": cmd_versus_train,
            "largest": cmd_largest, "lammps-replay": cmd_lammps_replay,
            "precision": cmd_precision, "shards": cmd_shards, "gtest-exclude": cmd_gtest_exclude,
            "tests-merge": cmd_tests_merge, "archive": cmd_archive, "summary": cmd_summary}
    if len(argv) < 2 or argv[1] not in cmds:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    return cmds[argv[1]](*argv[2:]) or 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
