"""The bookkeeping of the stages: each stage run with its output in logs/NAME.log, timed and
recorded as passed or failed, or recorded as skipped (the budget is used up, or a stage it needs
did not pass) or as not selected (not in UMA_GPU_STAGES); after each, the summary and the logs
archive written again (a run stopped by its command's limit still brings back what it did)."""
import os
import sys
import threading
import traceback

from . import settings
from .check import log
from .report import archive, summary
from .report.common import tail
from .stage import Stage

ARCHIVED = ("logs", "details", "versus", "md", "ranks", "devices", "kokkos", "train", "precision", "pip_route")
LOCK = threading.RLock()   # the lammps_build stage runs beside the engine's build


def record(check, name, status, seconds, note=""):
    with LOCK:
        summary.record(check.stages_file, name, status, seconds, os.path.join(check.details, name + ".json"), note)


def write_summary(check, final=False):
    """The summary JSON (printed when FINAL) and the archive of every stage's logs and details."""
    with LOCK:
        result = summary.summary(check.stages_file, check.details, check.envjson, check.summary_mode, check.budget,
                                 check.elapsed(), check.summary_path, final, check.selection,
                                 os.path.basename(check.archive))
        archive.write_archive(check.archive, check.build, ARCHIVED)
    return result


def skip(check, name, reason):
    log("%s: SKIPPED (%s)" % (name, reason))
    record(check, name, "skipped", 0, reason)
    write_summary(check)


def not_selected(check, name, reason):
    """A stage this run was not asked for (not a failure)."""
    log("%s: not selected (%s)" % (name, reason))
    record(check, name, "not_selected", 0, reason)
    write_summary(check)


def over_budget(check, name):
    """Why the budget leaves no time to start NAME, or None."""
    if not check.budget_on:
        return None
    if check.elapsed() > float(check.budget):
        return "time budget of %s s used up" % check.budget
    needs = settings.STAGE_NEEDS_S.get(name, 0)
    if needs and check.budget_s_left() < needs:
        return "time budget of %s s: %.0f s left, the stage needs %d" % (check.budget, check.budget_s_left(), needs)
    return None


def run_stage(check, name, function):
    """FUNCTION(stage) with its output in logs/NAME.log, timed; its exit status (1 where it did not run)."""
    if name in settings.CHECK_ORDER and not check.wanted(name):
        not_selected(check, name, "not in UMA_GPU_STAGES (%s)" % check.selection)
        return 1
    why = over_budget(check, name)
    if why:
        skip(check, name, why)
        return 1
    log("%s ..." % name)
    stage_log = os.path.join(check.logs, name + ".log")
    if os.path.exists(os.path.join(check.details, name + ".commands.jsonl")):
        os.remove(os.path.join(check.details, name + ".commands.jsonl"))
    t0 = check.runner.now()
    with open(stage_log, "wb", buffering=0) as f:
        try:
            rc = function(Stage(check, name, f))
            if not isinstance(rc, int):
                raise TypeError("the stage %s returned %r, not an exit status" % (name, rc))
        except Exception:   # a fault of the check itself: the stage fails, the rest go on
            f.write(traceback.format_exc().encode())
            rc = 1
    seconds = "%.1f" % (check.runner.now() - t0)
    if rc == 0:
        log("%s: passed (%s s)" % (name, seconds))
        record(check, name, "passed", seconds)
    else:
        log("%s: FAILED (%s s, exit %d); last lines of %s:" % (name, seconds, rc, stage_log))
        for line in tail(stage_log, 25):
            print("    " + line, file=sys.stderr)
        record(check, name, "failed", seconds, "exit %d; log logs/%s.log in %s" % (rc, name,
                                                                                 os.path.basename(check.archive)))
    write_summary(check)
    return rc


def maybe_stage(check, name, function, ready, why):
    """A checking stage, run when selected and READY; else recorded as not selected or skipped (WHY)."""
    if name in settings.CHECK_ORDER and not check.wanted(name):
        not_selected(check, name, "not in UMA_GPU_STAGES (%s)" % check.selection)
        return 1
    if ready:
        return run_stage(check, name, function)
    skip(check, name, why)
    return 1
