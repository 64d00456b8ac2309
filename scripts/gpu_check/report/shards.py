"""The engine suite in GoogleTest shards run at once (GTEST_TOTAL_SHARDS, GTEST_SHARD_INDEX):
each shard's output in its own log; the tests of a shard that crashed, and those no shard
reached, run again in new shards while time is left; all are stopped a few seconds before the
stage's end.  Writes the counts, the failed tests (failed, crashed, timed out) and those not run."""
import os
import signal
import subprocess
import time

from .common import dump
from .gtest import exit_text, gtest_list, parse_gtest_log, test_output


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


def run_round(binary, gtest_args, filt, k, logdir, round_no, deadline, env, cwd):
    """Starts K shards and waits for them (stopping them at DEADLINE); each shard's record."""
    procs = []
    for i in range(k):
        log = os.path.join(logdir, "round%d-shard%d.log" % (round_no, i))
        shard_env = dict(env, GTEST_TOTAL_SHARDS=str(k), GTEST_SHARD_INDEX=str(i))
        shard_env.pop("GTEST_SHARD_STATUS_FILE", None)
        f = open(log, "w")
        p = subprocess.Popen([binary] + list(gtest_args) + filt, stdout=f, stderr=subprocess.STDOUT, env=shard_env,
                             cwd=cwd, start_new_session=True)
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
    for x in procs:
        x["p"].wait()
        x["f"].close()
    return procs


def run_shards(out, logdir, deadline, nshards, binary, gtest_args=(), env=None, cwd=None):
    """Exit 1 unless every test ran and passed."""
    env = dict(os.environ if env is None else env)
    t_start = time.time()
    deadline = float(deadline) - 3   # the stage still writes its details before its end
    n = max(1, int(nshards))
    os.makedirs(logdir, exist_ok=True)
    res = {"binary": binary, "device": env.get("UMA_TEST_DEVICE"), "shards": n,
           "omp_num_threads": env.get("OMP_NUM_THREADS"), "rounds": []}
    try:
        rc, tests, err = gtest_list(binary, gtest_args, max(1.0, min(120.0, deadline - time.time())), env=env, cwd=cwd)
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
        procs = run_round(binary, gtest_args, filt, k, logdir, round_no, deadline, env, cwd)
        crashed, info = False, []
        for x in procs:
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
    return report(out, res, tests, results, logs_of, shard_errors, t_start)


def report(out, res, tests, results, logs_of, shard_errors, t_start):
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
