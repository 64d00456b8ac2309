"""The versus_fairchem stage's check, one structure at a time, from the files the stage wrote in
its folder:
    ref.json                 `uma eval --precision fp64 --json` (the reference)
    ours-P.json              `uma eval --precision P --json`   (P: fp32, tf32)
    ours-P-MODE.out          `uma bench` stdout                (MODE: eager, graph, reference:
                             eager with --edge-ops reference, the composition)
    fairchem-P.out           bench/fairchem_worker.py stdout
    fairchem-P.forces.json   its first call's energy and forces
and NAME.rc, each run's exit status.  Per structure: ms/step, steps/s and peak device memory of
every run, the energy and force errors against fp64, fairchem's / ours, replay / eager and
composition / lean ratios.  Fails where the fp64 reference did not run, a run that was made
exited neither 0 nor by the stage's time limit (124/137: recorded as cut, not as a figure), an
fp32 energy, ours or fairchem's, is 1e-3 eV/atom or more from fp64, or a number is not finite."""
import math
import os

from .common import CUT, dump, last_json_line, load, read_rc

RUN_FIELDS = ("edge_ops", "graph_captures", "graph_replays", "graph_refusal", "graph_pool_mb")
FAIRCHEM_FIELDS = ("engine", "version", "torch", "backend")


def errors(frame, ref):
    """Energy per atom and force errors of FRAME ({energy, forces: flat or [n][3]}) against REF."""
    def flat(f):
        return [v for row in f for v in row] if f and isinstance(f[0], list) else list(f)
    fr, fe = flat(ref["forces"]), flat(frame["forces"])
    if len(fr) != len(fe):
        return None, "%d force components, the reference has %d" % (len(fe), len(fr))
    if not all(isinstance(v, (int, float)) and math.isfinite(v) for v in fe + [frame["energy"]]):
        return None, "non-finite energy or forces"
    n = len(fr) // 3
    diff = [abs(a - b) for a, b in zip(fe, fr)]
    return {"energy_per_atom_error": abs(frame["energy"] - ref["energy"]) / n,
            "force_max_abs_error": max(diff), "force_mean_abs_error": sum(diff) / len(diff)}, None


def timing(result):
    median = result["time_s"]["median"]
    out = {"ms_per_step": 1e3 * median, "steps_per_s": 1.0 / median,
           "peak_device_mb": result.get("peak_device_mb"), "first_call_s": result.get("first_call_s")}
    if "load_s" in result:
        out["load_s"] = result["load_s"]
    return out


def timed_run(out_path, name, fields, entry, failed):
    """(NAME's run, its JSON line): the timing and FIELDS of OUT_PATH's last JSON line; (None,
    None) where it has none, recorded as NAME's error and a failure."""
    result, lines = last_json_line(out_path)
    if result is None or "time_s" not in result:
        entry["runs"][name] = {"error": lines[-5:]}
        failed.append("%s: no JSON line" % name)
        return None, None
    run = timing(result)
    run.update({k: result[k] for k in fields if k in result})
    return run, result


def all_passed(structs):
    """Every structure that ran passed (those not run for the time left count for nothing)."""
    return all(e.get("passed") for e in structs.values() if "not_run" not in e)


def store_entry(res, out, struct, entry, ratios, failed):
    """STRUCT's ENTRY with its RATIOS and FAILED checks into RES (written to OUT), which passes
    where every structure that ran passed."""
    entry["ratios"] = ratios
    entry["checks_failed"] = failed
    entry["passed"] = not failed
    res["structures"][struct] = entry
    res["passed"] = all_passed(res["structures"])
    dump(res, out)


def reference(ref_dir, entry, failed):
    """The fp64 reference frame of REF_DIR (ref.json, ref.rc), or None (a failure)."""
    ref_rc = read_rc(ref_dir, "ref")
    data = load(os.path.join(ref_dir, "ref.json"))
    if ref_rc == 0 and isinstance(data, list) and data:
        entry["atoms"] = len(data[0]["forces"]) // 3
        entry["reference"] = "lammps-uma fp64 (uma eval)"
        return data[0]
    failed.append("the fp64 reference did not run (exit %s)" % ref_rc)
    return None


def versus_skip(out, struct, reason):
    """A structure the stage did not start (the time left): recorded as not run, not failed."""
    res = load(out) or {}
    structs = res.setdefault("structures", {})
    structs[struct] = {"not_run": reason}
    res["passed"] = all_passed(structs)
    dump(res, out)
    print("versus %s: %s" % (struct, reason))
    return 0


def ours(dir_, prec, ref, entry, failed, account):
    """Our runs in PREC: timings eager, replayed and with the composition; errors from uma eval
    (replay repeats eager's operations; Replay.ReplayedStepsEqualEagerOnesOrAreRefused bounds
    the difference)."""
    errs = None
    if account("ours-%s-eval" % prec, read_rc(dir_, "ours-%s" % prec)) and ref is not None:
        frames = load(os.path.join(dir_, "ours-%s.json" % prec))
        if isinstance(frames, list) and frames:
            errs, why = errors(frames[0], ref)
            if why:
                failed.append("ours %s: %s" % (prec, why))
    for mode in ("eager", "graph", "reference"):
        name = "ours-%s-%s" % (prec, mode)
        if not account(name, read_rc(dir_, name)):
            continue
        run, result = timed_run(os.path.join(dir_, name + ".out"), name, RUN_FIELDS, entry, failed)
        if run is None:
            continue
        if mode == "graph" and not (result.get("graph_replays", 0) >= 1 and not result.get("graph_refusal")):
            failed.append("%s: not replayed (%r)" % (name, result.get("graph_refusal")))
        if mode == "eager" and str(result.get("device", "")).startswith("cuda") and result.get("edge_ops") != "lean":
            failed.append("%s: edge_ops %r, not the lean CUDA kernels (an engine built without nvcc?)"
                          % (name, result.get("edge_ops")))
        if errs and mode != "reference":   # uma eval ran the default (lean) edge operators
            run.update(errs)
        entry["runs"][name] = run


def fairchem(dir_, prec, ref, entry, failed, account):
    name = "fairchem-%s" % prec
    if not account(name, read_rc(dir_, name)):
        return
    run, result = timed_run(os.path.join(dir_, name + ".out"), name, FAIRCHEM_FIELDS, entry, failed)
    if run is None:
        return
    frame = load(os.path.join(dir_, name + ".forces.json"))
    if ref is not None and frame:
        e, why = errors(frame, ref)
        if why:
            failed.append("%s: %s" % (name, why))
        else:
            run.update(e)
    entry["runs"][name] = run


def ratios_of(runs):
    ratios = {}
    for prec in ("fp32", "tf32"):
        fc = runs.get("fairchem-%s" % prec, {}).get("ms_per_step")
        eager = runs.get("ours-%s-eager" % prec, {}).get("ms_per_step")
        graph = runs.get("ours-%s-graph" % prec, {}).get("ms_per_step")
        composition = runs.get("ours-%s-reference" % prec, {}).get("ms_per_step")
        if fc and eager:
            ratios["fairchem_over_ours_eager_%s" % prec] = fc / eager
        if fc and graph:
            ratios["fairchem_over_ours_replayed_%s" % prec] = fc / graph
        if eager and graph:
            ratios["replay_speedup_%s" % prec] = eager / graph
        if eager and composition:
            ratios["lean_over_composition_speedup_%s" % prec] = composition / eager
        if fc and composition:
            ratios["fairchem_over_ours_composition_%s" % prec] = fc / composition
    return ratios


def versus_struct(out, struct, dir_):
    """One structure of the versus_fairchem stage, added to OUT's structures."""
    res = load(out) or {}
    res.setdefault("structures", {})
    entry = {"runs": {}}
    failed = []
    ref = reference(dir_, entry, failed)

    def account(name, rc):
        if rc is None:
            return False
        if rc in CUT:
            entry["runs"][name] = {"cut": "stage time limit (exit %d)" % rc}
            return False
        if rc != 0:
            entry["runs"][name] = {"rc": rc, "error": "exit %d" % rc}
            failed.append("%s: exit %d" % (name, rc))
            return False
        return True

    for prec in ("fp32", "tf32"):
        ours(dir_, prec, ref, entry, failed, account)
        fairchem(dir_, prec, ref, entry, failed, account)
    for name, run in entry["runs"].items():
        if name.endswith("fp32") or "-fp32-" in name:
            e = run.get("energy_per_atom_error")
            if e is not None and not e < 1e-3:
                failed.append("%s: energy %.3e eV/atom from fp64 (limit 1e-3: not the same model?)" % (name, e))
    store_entry(res, out, struct, entry, ratios_of(entry["runs"]), failed)
    for name, run in entry["runs"].items():
        if "ms_per_step" in run:
            print("%s %-18s %9.2f ms/step %8.2f steps/s  peak %s MB  energy err %s eV/atom" % (
                struct, name, run["ms_per_step"], run["steps_per_s"], run.get("peak_device_mb"),
                "%.2e" % run["energy_per_atom_error"] if "energy_per_atom_error" in run else "-"))
        else:
            print("%s %-18s %s" % (struct, name, run))
    for k, v in entry["ratios"].items():
        print("%s %s %.2fx" % (struct, k, v))
    print("versus %s: %s" % (struct, "passed" if not failed else "FAILED: " + "; ".join(failed)))
    return 1 if failed else 0
