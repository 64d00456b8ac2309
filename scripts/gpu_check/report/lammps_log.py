"""Readers of what LAMMPS writes: a log's thermo tables, Loop time and Performance lines and the
pair style's own lines, custom dumps, and the PMPI probe's per-rank records."""
import re

from .common import compact, dump, first_match, number, tail

LOOP_RE = re.compile(r"Loop time of ([\d.eE+-]+) on (\d+) procs for (\d+) steps with (\d+) atoms")
TRANSFER_COLUMNS = {"c_pu[1]": "host_reads", "c_pu[2]": "uploads", "c_pu[5]": "ghosts_in_graph",
                    "c_pu[6]": "halo_bytes_packed"}


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


def last_thermo(lines):
    """The rows of a LAMMPS log's last thermo table: [{column: value}]."""
    rows, header = [], None
    for line in lines:
        s = line.split()
        if s and s[0] == "Step":
            header, rows = s, []
            continue
        if header and line.startswith("Loop time"):
            header = None
            continue
        if header and len(s) == len(header):
            try:
                rows.append(dict(zip(header, map(float, s))))
            except ValueError:
                pass
    return rows


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
        with open(path) as f:
            lines = f.read().splitlines()
    except OSError:
        return []
    snaps, i, natoms = [], 0, 0
    while i < len(lines):
        if lines[i].startswith("ITEM: TIMESTEP"):
            snaps.append([int(lines[i + 1]), {}])
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
            with open("%s.%d" % (prefix, rank)) as f:
                words = f.read().split()
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


def max_relative(ref, other):
    """max |ref - other| / max |ref| (absolute where ref is all zero)."""
    scale = max((abs(v) for v in ref), default=0.0) or 1.0
    return max((abs(a - b) for a, b in zip(ref, other)), default=0.0) / scale


def run_summary(rc, log_lines):
    """One run's exit status, Loop time lines, device, first error and per-step transfer counts;
    and its thermo tables."""
    runs = thermo_runs(log_lines)
    res = {"rc": int(rc), "loops": loops(log_lines), "device": lammps_device(log_lines)}
    err = first_error(log_lines)
    if err:
        res["error"] = err
    res["transfers_per_step"] = [
        dict({"step": [int(r["Step"]) for r in run]},
             **{name: [compact(r[col]) for r in run]
                for col, name in TRANSFER_COLUMNS.items() if run and col in run[0]})
        for run in runs]
    return res, runs


def lammps_figures(log, out):
    """LAMMPS's Performance:/Loop time lines, the device and memory lines of pair uma, and the
    first/last thermo rows of the last run, into OUT."""
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
            m = LOOP_RE.search(line)
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
            res.update(first_match(line, chunk_edges=(r"chunks of (\d+) edges", int)))
            m = re.search(r"predicted peak ([\d.]+) GB, budget ([\d.]+) GB", line)
            if m:
                res["predicted_gb"], res["budget_gb"] = float(m.group(1)), float(m.group(2))
        elif re.match(r"pair uma(/kk)?: peak GPU memory", line):
            res["peak_gpu_line"] = line.strip()
            res.update(first_match(line, peak_gpu_gb=(r"peak GPU memory of the run ([\d.]+) GB", float),
                                   run_start_gpu_gb=(r"of which ([\d.]+) GB were held when it began", float)))
        elif "ERROR" in line and "error" not in res:
            res["error"] = line.strip()
    if "peak_gpu_gb" in res and res.get("predicted_gb"):   # against the evaluations' own peak
        own = res["peak_gpu_gb"] - res.get("run_start_gpu_gb", 0.0)
        if own > 0:
            res["predicted_over_peak"] = res["predicted_gb"] / own
    rows = last_thermo(lines)   # the last run's table (the check's NVE run has one)
    if rows:
        res["thermo_first"], res["thermo_last"] = rows[0], rows[-1]
    if "performance" not in res:
        res["log_tail"] = lines[-25:]
    dump(res, out)
