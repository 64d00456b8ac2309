"""The tf32 stage's check: `uma eval --json` of one structure in several precisions, each
against the first (fp64): energy per atom and force errors; fp32 within 1e-3 eV/atom."""
from .common import dump, finite, load, tail, time_limited


def eval_frame(path, rc):
    """The first frame `uma eval --json` printed, or an error text."""
    if int(rc) != 0:
        err = path[:-5] + ".err" if path.endswith(".json") else path
        return None, "exit %s%s: %s" % (rc, time_limited(rc), " | ".join(tail(err, 5)))
    data = load(path)
    if not isinstance(data, list) or not data or not isinstance(data[0], dict):
        return None, "no JSON list of frames in %s" % path
    frame = data[0]
    if not isinstance(frame.get("energy"), (int, float)) or not isinstance(frame.get("forces"), list):
        return None, "the frame lacks energy or forces"
    return frame, None


def errors_against(entry, failed, frames, ref_prec, struct):
    """Each precision's errors against the reference frame, into entry["runs"]."""
    ref = frames[ref_prec]
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
            failed.append("fp32 energy %.3e eV/atom from %s (limit 1e-3)" % (errs["energy_per_atom_error"], ref_prec))


def precision_check(out, struct, runs):
    """RUNS: [(precision, uma eval's JSON file, exit status)], the reference first."""
    res = load(out, {}) or {}
    structs = res.setdefault("structures", {})
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
    if runs[0][0] in frames:
        errors_against(entry, failed, frames, runs[0][0], struct)
    entry["checks_failed"] = failed
    entry["passed"] = not failed
    structs[struct] = entry
    res["passed"] = all(e.get("passed") for e in structs.values())
    dump(res, out)
    print("precision %s: %s" % (struct, "passed" if not failed else "FAILED: " + "; ".join(failed)))
    return 1 if failed else 0
