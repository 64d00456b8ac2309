"""The tests stage's readers: GoogleTest's list of tests and its output per test, ctest's
summary, the ctest filter that leaves GoogleTest's cases to the shards, and the two merged."""
import re
import subprocess

from .common import dump, load, tail

GTEST_RUN = re.compile(r"\[ RUN      \] (\S+)")
GTEST_END = re.compile(r"\[ +(OK|FAILED|SKIPPED) +\] (\S+?)(?:, where .*?)?(?: \((\d+) ms\))?\s*$")
CTEST_FAILED = re.compile(r"^\s*\d+ - (.+?) \((Failed|Timeout|SEGFAULT|Subprocess aborted|Not Run|Exception)"
                          r"[^)]*\)\s*$", re.M)


def exit_text(rc):
    return "signal %d" % -rc if rc is not None and rc < 0 else "exit %s" % rc


def gtest_list(binary, args, timeout, env=None, cwd=None):
    """(exit status, [Suite.Name, ...], stderr) of BINARY --gtest_list_tests (DISABLED_ ones left out)."""
    r = subprocess.run([binary, "--gtest_list_tests"] + list(args), capture_output=True, text=True,
                       timeout=timeout, env=env, cwd=cwd)
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


def ctest_counts(log, out):
    """Pass/fail counts and failed test names from a ctest log, into OUT."""
    try:
        with open(log, errors="replace") as f:
            text = f.read()
    except OSError:
        text = ""
    res = {}
    m = re.search(r"(\d+)% tests passed, (\d+) tests? failed out of (\d+)", text)
    if m:
        total, failed = int(m.group(3)), int(m.group(2))
        res.update(total=total, failed=failed, passed=total - failed)
    res["failed_tests"] = ["%s (%s)" % (n, why) for n, why in CTEST_FAILED.findall(text)]
    m = re.search(r"Total Test time \(real\) =\s*([\d.]+) sec", text)
    if m:
        res["ctest_seconds"] = float(m.group(1))
    if not m and "total" not in res:
        res["log_tail"] = tail(log)
    dump(res, out)


def gtest_exclude(binary, env=None, cwd=None):
    """(a ctest -E regex for the LAMMPS-root and converter tests and every case of BINARY, None),
    or (None, why) where BINARY cannot list its tests."""
    try:
        rc, tests, err = gtest_list(binary, [], 120, env=env, cwd=cwd)
    except (OSError, subprocess.SubprocessError) as e:
        rc, tests, err = None, [], str(e)
    if rc != 0 or not tests:
        return None, "cannot list %s's tests (%s): %s" % (binary, exit_text(rc), err.strip())
    suites = sorted({t.split(".", 1)[0] for t in tests})
    esc = [re.sub(r"([.^$*+?()\[\]{}|\\])", r"\\\1", x) for x in suites]
    return "^(lammps|converter|%s)\\." % "|".join(esc), None


def tests_merge(out, gtest_json, ctest_json):
    """The tests stage's details: the shards' and ctest's counts and failures together."""
    g, c = load(gtest_json, {}) or {}, load(ctest_json, {}) or {}
    res = {"total": g.get("total", 0) + c.get("total", 0), "passed": g.get("passed", 0) + c.get("passed", 0),
           "failed": g.get("failed", 0) + c.get("failed", 0),
           "failed_tests": g.get("failed_tests", []) + c.get("failed_tests", []),
           "skipped": g.get("skipped", 0), "not_run": g.get("not_run", 0), "not_run_tests": g.get("not_run_tests", []),
           "shard_errors": g.get("shard_errors", []), "gtest": g, "ctest": c}
    if "total" not in c:
        res["ctest_incomplete"] = "no ctest summary line (stopped by the stage's limit?)"
    dump(res, out)
    print("tests: %d, %d passed, %d failed, %d not run%s" % (
        res["total"], res["passed"], res["failed"], res["not_run"],
        "; ctest incomplete" if "ctest_incomplete" in res else ""))
    return 0
