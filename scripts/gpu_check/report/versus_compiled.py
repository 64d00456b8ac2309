"""The versus_fairchem_compiled stage's check, one structure at a time: fairchem with
torch.compile (fairchem-P.{out,err,rc,forces.json} in its folder), the fp64 reference of
REF_DIR, ours and fairchem eager from the versus_fairchem stage's folder where it ran.  Per
precision: the first call (load_s apart; first_call_s holds the compile), the step (ms_per_step,
the median of the timed calls after it), compile_s = first_call_s - the step, and, where the
eager stage ran, compile_s_over_eager = first_call_s - fairchem eager's first call; errors
against fp64; compiled / eager and compiled / ours ratios."""
import os

from .common import CUT, last_json_line, load, read_rc, tail
from .versus import FAIRCHEM_FIELDS, errors, reference, store_entry, timed_run


def eager_figures(run, result, eager_dir, prec):
    """fairchem eager's step and first call from the eager stage, beside the compiled run's."""
    eager, _ = last_json_line(os.path.join(eager_dir, "fairchem-%s.out" % prec))
    if read_rc(eager_dir, "fairchem-%s" % prec) != 0 or not eager or "time_s" not in eager:
        return None
    run["eager_ms_per_step"] = 1e3 * eager["time_s"]["median"]
    run["eager_first_call_s"] = eager.get("first_call_s")
    if isinstance(eager.get("first_call_s"), (int, float)) and isinstance(result.get("first_call_s"), (int, float)):
        run["compile_s_over_eager"] = result["first_call_s"] - eager["first_call_s"]
    return run["eager_ms_per_step"]


def compiled_run(dir_, prec, ref, eager_dir, entry, failed, ratios):
    name = "fairchem-compiled-%s" % prec
    rc = read_rc(dir_, "fairchem-%s" % prec)
    if rc is None:
        return
    if rc in CUT:
        entry["runs"][name] = {"cut": "stage time limit (exit %d): the compile and its first call did not end "
                                      "within the command's limit (details/versus_fairchem_compiled.commands.jsonl)"
                                      % rc, "stderr_tail": tail(os.path.join(dir_, "fairchem-%s.err" % prec), 3)}
        return
    if rc != 0:
        entry["runs"][name] = {"rc": rc, "error": "exit %d" % rc}
        failed.append("%s: exit %d" % (name, rc))
        return
    run, result = timed_run(os.path.join(dir_, "fairchem-%s.out" % prec), name, FAIRCHEM_FIELDS, entry, failed)
    if run is None:
        return
    if isinstance(result.get("first_call_s"), (int, float)):
        run["compile_s"] = result["first_call_s"] - result["time_s"]["median"]   # the first call beyond one step
    eager_ms = eager_figures(run, result, eager_dir, prec)
    frame = load(os.path.join(dir_, "fairchem-%s.forces.json" % prec))
    if ref is not None and frame:
        e, why = errors(frame, ref)
        if why:
            failed.append("%s: %s" % (name, why))
        else:
            run.update(e)
            if prec == "fp32" and not e["energy_per_atom_error"] < 1e-3:
                failed.append("%s: energy %.3e eV/atom from fp64 (limit 1e-3: not the same model?)" %
                              (name, e["energy_per_atom_error"]))
    entry["runs"][name] = run
    ms = run["ms_per_step"]
    if eager_ms:
        ratios["compiled_speedup_%s" % prec] = eager_ms / ms
    for mode, key in (("eager", "fairchem_compiled_over_ours_eager_%s"),
                      ("graph", "fairchem_compiled_over_ours_replayed_%s")):
        ours, _ = last_json_line(os.path.join(eager_dir, "ours-%s-%s.out" % (prec, mode)))
        if read_rc(eager_dir, "ours-%s-%s" % (prec, mode)) == 0 and ours and "time_s" in ours:
            ratios[key % prec] = ms / (1e3 * ours["time_s"]["median"])


def versus_compiled(out, struct, dir_, ref_dir, eager_dir):
    """One structure of the versus_fairchem_compiled stage, added to OUT's structures."""
    res = load(out) or {}
    res.setdefault("structures", {})
    entry = {"runs": {}}
    failed = []
    ref = reference(ref_dir, entry, failed)
    ratios = {}
    for prec in ("fp32", "tf32"):
        compiled_run(dir_, prec, ref, eager_dir, entry, failed, ratios)
    store_entry(res, out, struct, entry, ratios, failed)
    for name, run in entry["runs"].items():
        if "ms_per_step" in run:
            print("%s %-22s %9.2f ms/step, first call %.1f s (load %.1f s apart), compile ~%.1f s" % (
                struct, name, run["ms_per_step"], run.get("first_call_s") or float("nan"),
                run.get("load_s") or float("nan"), run.get("compile_s") or float("nan")))
        else:
            print("%s %-22s %s" % (struct, name, run))
    for k, v in ratios.items():
        print("%s %s %.2fx" % (struct, k, v))
    print("versus compiled %s: %s" % (struct, "passed" if not failed else "FAILED: " + "; ".join(failed)))
    return 1 if failed else 0
