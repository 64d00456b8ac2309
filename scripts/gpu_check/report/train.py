"""The training stages' checks: fix uma/train on the device (its loss lines, host reads and
uploads per optimizer step, the PMPI probe) and bench/train_step.py's result (versus_train)."""
import re

from .common import finish, finite, load, number, tail, time_limited
from .lammps_log import first_error, lammps_device, loops, probe_failures, read_probe

LOSS_RE = re.compile(r"fix uma/train: step (\d+) optimizer step (\d+) frames (\d+) loss (\S+)")
LOSS_FIELDS = (("energy_mae", r"MAE energy (\S+)"), ("forces_mae", r"forces (\S+) eV/A\b"),
               ("grad_norm", r"grad_norm (\S+)"), ("lr", r" lr (\S+)"))
TRAIN_TRANSFERS_RE = re.compile(r"fix uma/train: (\S+) host reads and (\S+) uploads per optimizer step "
                                r"\((\d+) steps? since")


def train_lines(lines):
    """(the loss lines, the transfer lines) of fix uma/train's log."""
    losses, transfers = [], []
    for line in lines:
        m = LOSS_RE.search(line)
        if m:
            entry = {"step": int(m.group(1)), "optimizer_step": int(m.group(2)), "frames": int(m.group(3)),
                     "loss": number(m.group(4))}
            for key, pat in LOSS_FIELDS:
                mm = re.search(pat, line)
                if mm:
                    entry[key] = number(mm.group(1))
            losses.append(entry)
        m = TRAIN_TRANSFERS_RE.search(line)
        if m:
            transfers.append({"host_reads": number(m.group(1)), "uploads": number(m.group(2)),
                              "steps": int(m.group(3))})
    return losses, transfers


def train_check(out, log, rc, nranks="1", probe_prefix=""):
    """fix uma/train's run: it ended after `run 0`, at least 5 loss lines, the last below the
    first, no host read per optimizer step on 1 rank, the probe's records clean."""
    lines = tail(log, 100000)
    nranks = int(nranks)
    losses, transfers = train_lines(lines)
    res = {"rc": int(rc), "ranks": nranks, "device": lammps_device(lines), "loops": loops(lines),
           "losses": losses, "transfers_per_optimizer_step": transfers}
    err = first_error(lines)
    if err:
        res["error"] = err
    failed = []
    if int(rc) != 0:
        failed.append("lmp exited %s%s" % (rc, time_limited(rc)))
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


def versus_train(out, result_path, rc):
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
