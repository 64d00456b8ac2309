"""The speed stages' bookkeeping (standard library only; gpu_check_report.py calls it).

  gpu_check_report.py versus OUT.json STRUCT DIR
      one structure's runs, from the files the stage wrote in DIR:
        ref.json             `uma eval --precision fp64 --json` (the reference)
        ours-P.json          `uma eval --precision P --json`   (P: fp32, tf32)
        ours-P-MODE.out      `uma bench` stdout                (MODE: eager, graph, reference:
                             eager with --edge-ops reference, the composition)
        fairchem-P.out       bench/fairchem_worker.py stdout
        fairchem-P.forces.json   its first call's energy and forces
      and NAME.rc, each run's exit status.  Appends the structure to OUT.json:
      ms/step, steps/s and peak device memory of every run, the energy and force
      errors against fp64, fairchem's / ours, replay / eager and composition / lean ratios.

  gpu_check_report.py versus-split eval|fairchem COMBINED RC DIR NAME STRUCT... [-- PRECISION...]
      the versus_fairchem stage runs each tool once over every structure; this writes
      each structure's share where `versus` reads it.  eval: COMBINED is `uma eval
      --json` over the structures' frames in STRUCT order: DIR/STRUCT/NAME.json (that
      frame, as a one-frame list) and NAME.rc.  fairchem: COMBINED is
      bench/fairchem_worker.py's stdout over the structures and PRECISIONs:
      DIR/STRUCT/fairchem-P.out (the run's line) and .rc.  A share that is missing gets
      the process's exit status (124/137: cut), or 1 where the process exited 0.

  gpu_check_report.py versus-skip OUT.json STRUCT REASON
      a structure the stage did not start (the time left): recorded as not run, not failed.

  gpu_check_report.py versus-compiled OUT.json STRUCT DIR REF_DIR EAGER_DIR
      one structure of the versus_fairchem_compiled stage: fairchem with torch.compile,
      fairchem-P.{out,err,rc,forces.json} in DIR; the fp64 reference REF_DIR/ref.json; ours
      and fairchem eager from the versus_fairchem stage in EAGER_DIR where it ran.  Per
      precision: the first call (load_s apart; first_call_s holds the compile), the step
      (ms_per_step, the median of the timed calls after it), compile_s = first_call_s - the
      step, and, where the eager stage ran, compile_s_over_eager = first_call_s - fairchem
      eager's first call; errors against fp64; compiled / eager and compiled / ours ratios.

  gpu_check_report.py lammps-replay LOG_EAGER LOG_GRAPH RC OUT.json TOL
      lammps_md's cuda_graph yes run against its eager run: the step was captured and
      replayed (the pair style's log lines), no refusal, the same thermo steps, PotEng
      and TotEng per atom within TOL eV/atom and Temp within TOL relative (float
      atomics reorder fp32 sums between any two runs), timesteps/s of both.

versus and versus-compiled check (exit 1 when one fails): the fp64 reference ran; every run that was made
exited 0 or was cut by the stage's time limit (exit 124/137, recorded as cut,
not as a figure); fp32 energies, ours and fairchem's, within 1e-3 eV/atom of
the fp64 reference (the same weights, both ways); finite numbers.
"""
import json
import math
import os
import re

CUT = (124, 137)


def _load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def _rc(dir_, name):
    try:
        with open(os.path.join(dir_, name + ".rc")) as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return None


def _last_json_line(path):
    try:
        with open(path, errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return None, []
    for line in reversed(lines):
        line = line.strip()
        if line.startswith("{"):
            try:
                return json.loads(line), lines
            except ValueError:
                pass
    return None, lines


def _errors(frame, ref):
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


def _timing(result):
    median = result["time_s"]["median"]
    out = {"ms_per_step": 1e3 * median, "steps_per_s": 1.0 / median,
           "peak_device_mb": result.get("peak_device_mb"), "first_call_s": result.get("first_call_s")}
    if "load_s" in result:
        out["load_s"] = result["load_s"]
    return out


def _write(res, out):
    tmp = "%s.tmp%d" % (out, os.getpid())
    with open(tmp, "w") as f:
        json.dump(res, f, indent=1)
        f.write("\n")
    os.replace(tmp, out)


def _all_passed(structs):
    """Every structure that ran passed (those not run for the time left count for nothing)."""
    return all(e.get("passed") for e in structs.values() if "not_run" not in e)


def _write_share(dir_, struct, name, text, rc):
    """STRUCT's share of a run over every structure: NAME's output (None: missing) and NAME.rc."""
    d = os.path.join(dir_, struct)
    os.makedirs(d, exist_ok=True)
    if text is not None:
        with open(os.path.join(d, name), "w") as f:
            f.write(text)
    share_rc = 0 if text is not None else (rc if rc != 0 else 1)
    with open(os.path.join(d, os.path.splitext(name)[0] + ".rc"), "w") as f:
        f.write("%d\n" % share_rc)
    return share_rc


def cmd_versus_split(kind, combined, rc, dir_, name, *rest):
    rc = int(rc)
    structs, precisions = list(rest), []
    if "--" in structs:
        cut = structs.index("--")
        structs, precisions = structs[:cut], structs[cut + 1:]
    missing = []
    if kind == "eval":
        frames = _load(combined) if rc == 0 else None
        if frames is not None and (not isinstance(frames, list) or len(frames) != len(structs)):
            missing.append("%s holds %s frames for %d structures" % (
                combined, len(frames) if isinstance(frames, list) else "no", len(structs)))
            frames = None
        for i, struct in enumerate(structs):
            text = json.dumps([frames[i]]) if frames else None
            if _write_share(dir_, struct, name + ".json", text, rc):
                missing.append("%s %s" % (struct, name))
    elif kind == "fairchem":
        lines = {}
        try:
            with open(combined, errors="replace") as f:
                for line in f:
                    try:
                        result = json.loads(line)
                    except ValueError:
                        continue
                    if isinstance(result, dict):
                        lines[(result.get("structure"), result.get("precision"))] = line
        except OSError:
            pass
        for struct in structs:
            for prec in precisions:
                if _write_share(dir_, struct, "fairchem-%s.out" % prec, lines.get((struct, prec)), rc):
                    missing.append("%s fairchem-%s" % (struct, prec))
    else:
        print("versus-split: eval or fairchem, not %r" % kind)
        return 2
    print("versus-split %s (exit %d): %s" % (kind, rc, "every structure's share written" if not missing
                                            else "missing: " + "; ".join(missing)))
    return 0


def cmd_versus_skip(out, struct, reason):
    res = _load(out) or {}
    structs = res.setdefault("structures", {})
    structs[struct] = {"not_run": reason}
    res["passed"] = _all_passed(structs)
    _write(res, out)
    print("versus %s: %s" % (struct, reason))
    return 0


def cmd_versus(out, struct, dir_):
    res = _load(out) or {}
    structs = res.setdefault("structures", {})
    entry = {"runs": {}}
    failed = []
    ref = None
    ref_rc = _rc(dir_, "ref")
    data = _load(os.path.join(dir_, "ref.json"))
    if ref_rc == 0 and isinstance(data, list) and data:
        ref = data[0]
        entry["atoms"] = len(ref["forces"]) // 3
        entry["reference"] = "lammps-uma fp64 (uma eval)"
    else:
        failed.append("the fp64 reference did not run (exit %s)" % ref_rc)

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
        # ours: timings eager and replayed, errors from uma eval (replay repeats eager's
        # operations; Replay.ReplayedStepsEqualEagerOnesOrAreRefused bounds the difference)
        errs = None
        if account("ours-%s-eval" % prec, _rc(dir_, "ours-%s" % prec)) and ref is not None:
            frames = _load(os.path.join(dir_, "ours-%s.json" % prec))
            if isinstance(frames, list) and frames:
                errs, why = _errors(frames[0], ref)
                if why:
                    failed.append("ours %s: %s" % (prec, why))
        for mode in ("eager", "graph", "reference"):
            name = "ours-%s-%s" % (prec, mode)
            if not account(name, _rc(dir_, name)):
                continue
            result, lines = _last_json_line(os.path.join(dir_, name + ".out"))
            if result is None or "time_s" not in result:
                entry["runs"][name] = {"error": lines[-5:]}
                failed.append("%s: no JSON line" % name)
                continue
            run = _timing(result)
            run.update({k: result[k] for k in ("edge_ops", "graph_captures", "graph_replays", "graph_refusal",
                                               "graph_pool_mb") if k in result})
            if mode == "graph" and not (result.get("graph_replays", 0) >= 1 and not result.get("graph_refusal")):
                failed.append("%s: not replayed (%r)" % (name, result.get("graph_refusal")))
            if mode == "eager" and str(result.get("device", "")).startswith("cuda") and \
                    result.get("edge_ops") != "lean":
                failed.append("%s: edge_ops %r, not the lean CUDA kernels (an engine built without nvcc?)"
                              % (name, result.get("edge_ops")))
            if errs and mode != "reference":   # uma eval ran the default (lean) edge operators
                run.update(errs)
            entry["runs"][name] = run
        # fairchem
        name = "fairchem-%s" % prec
        if account(name, _rc(dir_, name)):
            result, lines = _last_json_line(os.path.join(dir_, name + ".out"))
            frame = _load(os.path.join(dir_, name + ".forces.json"))
            if result is None or "time_s" not in result:
                entry["runs"][name] = {"error": lines[-5:]}
                failed.append("%s: no JSON line" % name)
                continue
            run = _timing(result)
            run.update({k: result[k] for k in ("engine", "version", "torch", "backend") if k in result})
            if ref is not None and frame:
                e, why = _errors(frame, ref)
                if why:
                    failed.append("%s: %s" % (name, why))
                else:
                    run.update(e)
            entry["runs"][name] = run

    for name, run in entry["runs"].items():
        if name.endswith("fp32") or "-fp32-" in name:
            e = run.get("energy_per_atom_error")
            if e is not None and not e < 1e-3:
                failed.append("%s: energy %.3e eV/atom from fp64 (limit 1e-3: not the same model?)" % (name, e))

    ratios = {}
    for prec in ("fp32", "tf32"):
        fc = entry["runs"].get("fairchem-%s" % prec, {}).get("ms_per_step")
        eager = entry["runs"].get("ours-%s-eager" % prec, {}).get("ms_per_step")
        graph = entry["runs"].get("ours-%s-graph" % prec, {}).get("ms_per_step")
        if fc and eager:
            ratios["fairchem_over_ours_eager_%s" % prec] = fc / eager
        if fc and graph:
            ratios["fairchem_over_ours_replayed_%s" % prec] = fc / graph
        if eager and graph:
            ratios["replay_speedup_%s" % prec] = eager / graph
        composition = entry["runs"].get("ours-%s-reference" % prec, {}).get("ms_per_step")
        if eager and composition:
            ratios["lean_over_composition_speedup_%s" % prec] = composition / eager
        if fc and composition:
            ratios["fairchem_over_ours_composition_%s" % prec] = fc / composition
    entry["ratios"] = ratios
    entry["checks_failed"] = failed
    entry["passed"] = not failed
    structs[struct] = entry
    res["passed"] = _all_passed(structs)
    _write(res, out)
    for name, run in entry["runs"].items():
        if "ms_per_step" in run:
            print("%s %-18s %9.2f ms/step %8.2f steps/s  peak %s MB  energy err %s eV/atom" % (
                struct, name, run["ms_per_step"], run["steps_per_s"], run.get("peak_device_mb"),
                "%.2e" % run["energy_per_atom_error"] if "energy_per_atom_error" in run else "-"))
        else:
            print("%s %-18s %s" % (struct, name, run))
    for k, v in ratios.items():
        print("%s %s %.2fx" % (struct, k, v))
    print("versus %s: %s" % (struct, "passed" if not failed else "FAILED: " + "; ".join(failed)))
    return 1 if failed else 0


def cmd_versus_compiled(out, struct, dir_, ref_dir, eager_dir):
    res = _load(out) or {}
    structs = res.setdefault("structures", {})
    entry = {"runs": {}}
    failed = []
    ref = None
    ref_rc = _rc(ref_dir, "ref")
    data = _load(os.path.join(ref_dir, "ref.json"))
    if ref_rc == 0 and isinstance(data, list) and data:
        ref = data[0]
        entry["atoms"] = len(ref["forces"]) // 3
        entry["reference"] = "lammps-uma fp64 (uma eval)"
    else:
        failed.append("the fp64 reference did not run (exit %s)" % ref_rc)
    ratios = {}
    for prec in ("fp32", "tf32"):
        name = "fairchem-compiled-%s" % prec
        rc = _rc(dir_, "fairchem-%s" % prec)
        if rc is None:
            continue
        if rc in CUT:
            err = []
            try:
                with open(os.path.join(dir_, "fairchem-%s.err" % prec), errors="replace") as f:
                    err = f.read().splitlines()[-3:]
            except OSError:
                pass
            entry["runs"][name] = {"cut": "stage time limit (exit %d): the compile and its first call did not end "
                                          "within the command's limit (details/versus_fairchem_compiled.commands.jsonl)"
                                          % rc, "stderr_tail": err}
            continue
        if rc != 0:
            entry["runs"][name] = {"rc": rc, "error": "exit %d" % rc}
            failed.append("%s: exit %d" % (name, rc))
            continue
        result, lines = _last_json_line(os.path.join(dir_, "fairchem-%s.out" % prec))
        if result is None or "time_s" not in result:
            entry["runs"][name] = {"error": lines[-5:]}
            failed.append("%s: no JSON line" % name)
            continue
        run = _timing(result)
        run.update({k: result[k] for k in ("engine", "version", "torch", "backend") if k in result})
        step_s = result["time_s"]["median"]
        if isinstance(result.get("first_call_s"), (int, float)):
            run["compile_s"] = result["first_call_s"] - step_s   # the first call beyond one step
        eager, _ = _last_json_line(os.path.join(eager_dir, "fairchem-%s.out" % prec))
        eager_ms = None
        if _rc(eager_dir, "fairchem-%s" % prec) == 0 and eager and "time_s" in eager:
            eager_ms = 1e3 * eager["time_s"]["median"]
            run["eager_ms_per_step"] = eager_ms
            run["eager_first_call_s"] = eager.get("first_call_s")
            if isinstance(eager.get("first_call_s"), (int, float)) and isinstance(result.get("first_call_s"),
                                                                                   (int, float)):
                run["compile_s_over_eager"] = result["first_call_s"] - eager["first_call_s"]
        frame = _load(os.path.join(dir_, "fairchem-%s.forces.json" % prec))
        if ref is not None and frame:
            e, why = _errors(frame, ref)
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
            ours, _ = _last_json_line(os.path.join(eager_dir, "ours-%s-%s.out" % (prec, mode)))
            if _rc(eager_dir, "ours-%s-%s" % (prec, mode)) == 0 and ours and "time_s" in ours:
                ratios[key % prec] = ms / (1e3 * ours["time_s"]["median"])
    entry["ratios"] = ratios
    entry["checks_failed"] = failed
    entry["passed"] = not failed
    structs[struct] = entry
    res["passed"] = _all_passed(structs)
    _write(res, out)
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


def _log(path):
    try:
        with open(path, errors="replace") as f:
            return f.read().splitlines()
    except OSError:
        return []


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


def _speed(lines):
    for line in lines:
        m = re.search(r"([\d.eE+-]+) timesteps/s", line) if line.startswith("Performance:") else None
        if m:
            return float(m.group(1))
    return None


def _atoms(lines):
    for line in lines:
        m = re.match(r"Loop time of \S+ on \d+ procs for \d+ steps with (\d+) atoms", line)
        if m:
            return int(m.group(1))
    return None


def cmd_lammps_replay(log_eager, log_graph, rc, out, tol):
    tol = float(tol)
    eager, graph = _log(log_eager), _log(log_graph)
    res = {"tolerance": tol, "rc": int(rc)}
    failed = []
    if int(rc) != 0:
        failed.append("the cuda_graph yes run exited %s" % rc)
    captured = [l for l in graph if "captured as a CUDA graph" in l]
    refused = [l for l in graph if "no CUDA graph at step" in l]
    res["capture_lines"], res["refusal_lines"] = captured[:3], refused[:3]
    if not captured:
        failed.append("no 'captured as a CUDA graph' line in %s" % log_graph)
    if refused:
        failed.append("refused: " + refused[0])
    n = _atoms(eager) or _atoms(graph)
    te, tg = last_thermo(eager), last_thermo(graph)
    if not te or [r["Step"] for r in te] != [r["Step"] for r in tg]:
        failed.append("the two runs' thermo steps differ (%d and %d rows)" % (len(te), len(tg)))
    elif not n:
        failed.append("no atom count in the logs")
    else:
        worst = {"PotEng": 0.0, "TotEng": 0.0, "Temp": 0.0}
        for a, b in zip(te, tg):
            for k in ("PotEng", "TotEng"):
                worst[k] = max(worst[k], abs(a[k] - b[k]) / n)
            worst["Temp"] = max(worst["Temp"], abs(a["Temp"] - b["Temp"]) / max(abs(a["Temp"]), 1e-300))
        res["worst_difference"] = {"PotEng_ev_per_atom": worst["PotEng"], "TotEng_ev_per_atom": worst["TotEng"],
                                   "Temp_relative": worst["Temp"]}
        res["steps_compared"] = [int(r["Step"]) for r in te]
        for k, v in worst.items():
            if not v <= tol:
                failed.append("%s differs by %.3e (limit %.0e)" % (k, v, tol))
    se, sg = _speed(eager), _speed(graph)
    res.update(eager_timesteps_per_s=se, replayed_timesteps_per_s=sg)
    if se and sg:
        res["replay_speedup"] = sg / se
    res["checks_failed"] = failed
    res["passed"] = not failed
    with open(out, "w") as f:
        json.dump(res, f, indent=1)
        f.write("\n")
    print(json.dumps(res, indent=1))
    print("lammps replay: %s" % ("passed" if not failed else "FAILED: " + "; ".join(failed)))
    return 1 if failed else 0
