"""The check's record of its stages (one JSON line each, with its details and its commands'
limits) and the summary made from it: the status, the stages that failed, were skipped or not
selected, the commands cut by their limits, the times, the environment and the figures."""
import json

from .common import dump, load, read_jsonl
from .figures import figures


def record(stages, name, status, seconds, details="", note=""):
    """Appends one stage to the STAGES file, with DETAILS (a stage's details/NAME.json) and the
    commands its limit shared (details/NAME.commands.jsonl)."""
    entry = {"name": name, "status": status, "seconds": round(float(seconds), 1)}
    if note:
        entry["note"] = note
    d = load(details) if details else None
    if d is not None:
        entry["details"] = d
    commands = read_jsonl(details[:-len(".json")] + ".commands.jsonl") if details.endswith(".json") else []
    if commands:
        entry["commands"] = commands
        cut = [c["command"] for c in commands if c.get("cut")]
        if cut:
            entry["cut_commands"] = cut
    with open(stages, "a") as f:
        f.write(json.dumps(entry) + "\n")


def summary(stages_path, details_dir, env_path, mode, budget, total, out, final=False, selection="all", archive=""):
    """Writes the summary JSON to OUT (and prints it, but its stages, when FINAL); returns it."""
    stages = read_jsonl(stages_path)
    failed = [s["name"] for s in stages if s["status"] == "failed"]
    skipped = [s["name"] for s in stages if s["status"] == "skipped"]
    not_selected = [s["name"] for s in stages if s["status"] == "not_selected"]
    budget = float(budget)
    result = {
        "check": "lammps-uma scripts/gpu_check.sh",
        "mode": mode,
        "note": ("CPU proof of the offline build from the prepared folder: NOT GPU figures"
                 if mode == "cpu-proof" else "GPU check"),
        # passed: every stage of the selection ran and passed (not_selected_stages: those it did not ask for)
        "status": "failed" if failed or skipped else "passed",
        "selection": selection,
        "failed_stages": failed,
        "skipped_stages": skipped,
        "not_selected_stages": not_selected,
        "cut_commands": {s["name"]: s["cut_commands"] for s in stages if s.get("cut_commands")},
        "archive": archive or None,
        "total_s": round(float(total), 1),
        "budget_s": budget if budget > 0 else None,
        "within_budget": (float(total) <= budget) if budget > 0 else None,
        "environment": load(env_path, {}),
        "stage_seconds": {s["name"]: s["seconds"] for s in stages},
        "figures": figures(stages, details_dir),
        "stages": stages,
    }
    dump(result, out)
    if final:
        short = dict(result)
        short.pop("stages")
        print(json.dumps(short, indent=1))
    return result
