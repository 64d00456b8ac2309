"""One fp64 input run two ways, compared: the devices stage (the CPU against the device) and the
kokkos stage (uma/kk on CUDA against uma device cuda, on each rank count, with its per-step
transfers and the steps/s of both)."""
from .common import finish, finite, load, tail
from .lammps_log import first_error, loops, max_relative, read_dump, run_summary

KK_TRANSFERS = {"c_pu[1]": "host_reads", "c_pu[2]": "uploads", "c_pu[7]": "read_bytes", "c_pu[8]": "upload_bytes"}
PRESSURE = ("Pxx", "Pyy", "Pzz", "Pxy", "Pxz", "Pyz")
RUN0_RELATIVE = 1e-10   # run 0's energy, virial and forces, relative to each quantity's largest value


def compare_runs(failed, a, b, sa, sb, label_a, label_b):
    """Run 0 and 100 NVE steps of the same input, thermo every 10 steps (a, b: thermo_runs; sa,
    sb: read_dump): run 0's energy, virial and forces within 1e-10 relative, the NVE energies
    and pressure within 1e-8, b's energy drift at most twice a's.  (deviations, drifts), or None;
    failures appended to FAILED."""
    if len(a) != 2 or len(b) != 2 or len(a[1]) != 11 or len(b[1]) != 11:
        failed.append("expected run 0 and 11 rows of run 100 for each: %s vs %s rows" %
                      ([len(r) for r in a], [len(r) for r in b]))
        return None
    dev = {"run0_energy": max_relative([a[0][0]["PotEng"]], [b[0][0]["PotEng"]]),
           "run0_virial": max_relative([a[0][0][c] for c in PRESSURE], [b[0][0][c] for c in PRESSURE])}
    if not sa or not sb or sa[0][0] != 0 or sb[0][0] != 0 or sorted(sa[0][1]) != sorted(sb[0][1]):
        failed.append("the dumps lack run 0's snapshot or differ in atoms")
    else:
        ids = sorted(sa[0][1])
        dev["run0_forces"] = max_relative([sa[0][1][i][c] for i in ids for c in ("fx", "fy", "fz")],
                                          [sb[0][1][i][c] for i in ids for c in ("fx", "fy", "fz")])
    over = ["%s %.2e" % (k, v) for k, v in dev.items() if not finite(v) or v > RUN0_RELATIVE]
    if over:
        failed.append("%s: run 0 differs from %s by more than %g relative: %s" % (label_b, label_a, RUN0_RELATIVE,
                                                                              ", ".join(over)))
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


def run_with_dump(rc, log, dmp):
    lines = tail(log, 100000)
    summary, runs = run_summary(rc, lines)
    if int(rc) != 0:
        summary["log_tail"] = lines[-15:]
    return summary, runs, read_dump(dmp), lines


def devices_check(out, dev_a, rc_a, log_a, dump_a, dev_b, rc_b, log_b, dump_b):
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
        got = compare_runs(failed, runs["reference"], runs["device"], snaps["reference"], snaps["device"],
                           "reference", "device")
        if got:
            res["max_relative_deviation"], res["nve_drift_ev_per_atom"] = got
    return finish(out, res, failed, "devices %s vs %s%s" % (dev_b, dev_a, " (rehearsal)" if dev_a == dev_b else ""))


def steady_transfers(run):
    """{name: the per-step value of steps 10..100} where it is the same on every row, else None."""
    out = {}
    for col, name in KK_TRANSFERS.items():
        values = {r.get(col) for r in run[1:]}
        out[name] = values.pop() if len(values) == 1 else None
    return out


def kokkos_check(out, device, natoms, rc_ref, log_ref, dump_ref, *kk_runs):
    """pair_style uma/kk under LAMMPS's KOKKOS package on CUDA (-k on g 1 -sf kk) against
    pair_style uma device cuda on the same fp64 input (compare_runs), on each rank count of
    kk_runs (NRANKS RC LOG DUMP ...); in the NVE steps, uma/kk moves neither the positions nor
    the forces between host and device: per step on 1 rank, its bytes each way are uma's less
    at least 24 B per atom, and fewer than 8 B per atom (no per-atom array crosses), and on every
    rank count they do not vary from step to step.  DEVICE: cuda (cpu in a rehearsal with an
    OpenMP Kokkos)."""
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
        nranks, rc, log, dmp = (str(x) for x in kk_runs[i:i + 4])
        label = "uma/kk on %s rank(s)" % nranks
        summary, runs, snaps, lines = run_with_dump(rc, log, dmp)
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
            got = compare_runs(failed, ref_runs, runs, ref_snaps, snaps, "uma device " + device, label)
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


def kokkos_speed(out, rc_uma, log_uma, rc_kk, log_kk):
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
