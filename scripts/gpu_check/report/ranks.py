"""The MPI stages' checks: the mpi stage (`mpirun -np 2 true`, a 2-rank MPI_Allreduce, the
wrappers' flags) and the ranks stage (pair_style uma on 2 ranks against 1: thermo, forces and
positions to a relative tolerance, the halo exchange, the PMPI probe's records)."""
import os
import re

from .common import dump, finish, finite, load, tail, time_limited
from .lammps_log import max_relative, probe_failures, read_dump, read_probe, run_summary

THERMO_COMPARED = ("PotEng", "KinEng", "TotEng", "Press", "Pxx", "Pyy", "Pzz", "Pxy", "Pxz", "Pyz")


def mpi_check(out, wheel, root, rc_true, rc_comm, comm_out, showme, limit=""):
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


def deviations(runs1, runs2, dump1, dump2, entry, failed):
    """Every thermo column over every row of every run, and the dumps' forces and positions:
    the largest relative deviation of 2 ranks from 1, per quantity."""
    dev = {}
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
    return dev


def ranks_case(out, case, model, tol, rc1, log1, dump1, rc2, log2, dump2, probe_prefix):
    """One case of the ranks stage, added to OUT's cases."""
    tol = float(tol)
    res = load(out, {}) or {}
    res.setdefault("tolerance", tol)
    cases = res.setdefault("cases", {})
    lines1, lines2 = tail(log1, 100000), tail(log2, 100000)
    one, runs1 = run_summary(rc1, lines1)
    two, runs2 = run_summary(rc2, lines2)
    entry = {"model": os.path.basename(model), "np1": one, "np2": two}
    failed = []
    for tag, rc, summary, lines, nranks in (("1 rank", rc1, one, lines1, 1), ("2 ranks", rc2, two, lines2, 2)):
        if int(rc) != 0:
            failed.append("%s: lmp exited %s%s" % (tag, rc, time_limited(rc)))
            summary["log_tail"] = lines[-15:]
        if summary["loops"] and any(l["procs"] != nranks for l in summary["loops"]):
            failed.append("%s: LAMMPS ran on %s procs" % (tag, sorted({l["procs"] for l in summary["loops"]})))
    two["halo_exchange"] = any("halo exchange on 2 ranks" in l for l in lines2)
    if int(rc2) == 0 and not two["halo_exchange"]:
        failed.append("2 ranks: the run did not use the halo exchange")
    dev = {}
    if int(rc1) == 0 and int(rc2) == 0:
        dev = deviations(runs1, runs2, dump1, dump2, entry, failed)
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


def ranks_skip(out, case, model, reason):
    """A case of the ranks stage that was not run."""
    res = load(out, {}) or {}
    cases = res.setdefault("cases", {})
    cases[case] = {"model": os.path.basename(model), "skipped": reason}
    res["passed"] = all(c.get("passed", False) or "skipped" in c for c in cases.values())
    dump(res, out)
    print("ranks %s: %s" % (case, reason))
    return 0
