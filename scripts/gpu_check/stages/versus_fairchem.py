"""The versus_fairchem stage, fairchem EAGER, early (a first call with torch.compile can take
longer than the stage's limit and give nothing).  Each tool runs once over the structures
(imports, the model's load and the CUDA context paid once, not per structure): our fp64
reference and ours per precision by one `uma eval` over the structures' frames (each frame's
task= label; cu_4000 in an eval of its own, since an eval prints its frames only at its end),
fairchem by one bench/fairchem_worker.py over the structures and precisions (a predict unit per
run: a merged unit serves one composition; each run's line printed as it ends); then `uma bench`
per structure and precision, eager, and for the first structure on the GPU also replayed and with
the composition.  Structures outer in every pass, so that a cut keeps the runs finished before it
(the rest recorded as cut).  Reserves (seconds, GPU, about 1.5x the H100's times; the CPU proof's
fp32-only runs take about as long): per eval the fp64 reference 15 and ours 10 per precision;
fairchem 20 for its imports and 10 per run (20 for cu_4000); uma bench 6 per run (12 for cu_4000)."""
import os
import shutil

from ..report.versus import versus_struct
from ..report.versus_split import versus_split
from ..runner import STDOUT
from .versus_setup import SETUP_RESERVE, Versus, heavy, task_of, versus_setup, versus_structs


def eager_reserve(check, vs, structs):
    """The stage's reserves after its setup."""
    p, r, first, evals, light = len(vs.precisions), 20, True, 0, 0
    for s in structs:
        modes = 3 if check.mode == "gpu" and first else 1
        if heavy(s):
            r += p * 20 + p * modes * 12
            evals += 1
        else:
            r += p * 10 + p * modes * 6
            light = 1
        first = False
    return r + (evals + light) * (15 + 10 * p)


def eval_groups(structs):
    """The structures of each `uma eval`: the light ones together, then each heavy one alone."""
    light = [s for s in structs if not heavy(s)]
    return ([light] if light else []) + [[s] for s in structs if heavy(s)]


def eval_group(stage, vs, precision, name, structs):
    """One uma eval over STRUCTS, split into VERSUS/STRUCT/NAME.*"""
    check = stage.check
    tag = "%s-%s" % (name, structs[0])
    with open("%s/%s.extxyz" % (vs.dir, tag), "w") as out:
        for s in structs:
            with open("%s/%s.extxyz" % (check.structs, s)) as f:
                out.write(f.read())
    r = stage.limited(15 if precision == "fp64" else 10, "uma eval %s, %s" % (precision, " ".join(structs)),
                      [check.uma, "eval", vs.st, "%s/%s.extxyz" % (vs.dir, tag), "--device", check.device,
                       "--precision", precision, "--json"],
                      stdout="%s/%s.json" % (vs.dir, tag), stderr="%s/%s.err" % (vs.dir, tag))
    stage.show("%s/%s.err" % (vs.dir, tag), last=3)
    stage.report(versus_split, "eval", "%s/%s.json" % (vs.dir, tag), r, vs.dir, name, structs)


def fairchem_all(stage, vs, structs):
    """bench/fairchem_worker.py over every structure and precision, in one process."""
    check = stage.check
    reserve = 20 + sum((20 if heavy(s) else 10) * len(vs.precisions) for s in structs)
    stage.say("== fairchem (eager), one process: %s in %s" % (" ".join(structs), " ".join(vs.precisions)))
    files = ["%s/%s.extxyz" % (check.structs, s) for s in structs]
    r = stage.limited(reserve, "fairchem eager, " + " ".join(structs),
                      vs.python + [check.root + "/bench/fairchem_worker.py", vs.pt] + files +
                      ["--task"] + [task_of(s) for s in structs] + ["--precision"] + list(vs.precisions) +
                      ["--repeats", str(vs.repeats), "--device", check.device,
                       "--forces-out", vs.dir + "/{name}/fairchem-{precision}.forces.json"],
                      stdout=vs.dir + "/fairchem.out", stderr=vs.dir + "/fairchem.err", env=vs.env)
    stage.show(vs.dir + "/fairchem.err", last=3)
    stage.report(versus_split, "fairchem", vs.dir + "/fairchem.out", r, vs.dir, "fairchem", structs, vs.precisions)


def bench_modes(check, first):
    """Our `uma bench` runs of a structure: eager; replayed (CUDA only: its CPU refusal is a test)
    and with the composition, the diagnostics, on the first structure only."""
    return ("eager", "graph", "reference") if check.mode != "cpu" and first else ("eager",)


def versus_bench(stage, vs, struct, precision, mode):
    """uma bench, eager, graph (replayed) or reference (the composition)."""
    check, d = stage.check, "%s/%s" % (vs.dir, struct)
    extra = {"graph": ["--cuda-graph"], "reference": ["--edge-ops", "reference"]}.get(mode, [])
    rc = stage.limited(12 if heavy(struct) else 6, "%s %s uma bench %s" % (struct, precision, mode),
                       [check.uma, "bench", vs.st, "%s/%s.extxyz" % (check.structs, struct), "--task", task_of(struct),
                        "--device", check.device, "--precision", precision, "--repeats", str(vs.repeats)] + extra,
                       stdout="%s/ours-%s-%s.out" % (d, precision, mode), stderr=STDOUT)
    with open("%s/ours-%s-%s.rc" % (d, precision, mode), "w") as f:
        f.write("%d\n" % rc)


def eager_all(stage, vs, structs):
    check, rc = stage.check, 0
    for s in structs:
        shutil.rmtree("%s/%s" % (vs.dir, s), ignore_errors=True)
        os.makedirs("%s/%s" % (vs.dir, s))
    stage.say("== fp64 reference and ours (uma eval, one process per precision): " + " ".join(structs))
    for group in eval_groups(structs):
        eval_group(stage, vs, "fp64", "ref", group)
    fairchem_all(stage, vs, structs)
    for p in vs.precisions:
        for group in eval_groups(structs):
            eval_group(stage, vs, p, "ours-" + p, group)
    stage.say("== lammps-uma (uma bench eager; the first structure also replayed and with the composition)")
    for i, s in enumerate(structs):
        for p in vs.precisions:
            for mode in bench_modes(check, i == 0):
                versus_bench(stage, vs, s, p, mode)
    for s in structs:
        rc |= stage.report(versus_struct, check.details + "/versus_fairchem.json", s, "%s/%s" % (vs.dir, s))
    return 1 if rc else 0


def st_versus_fairchem(stage):
    check = stage.check
    stage.deadline(check.limits["versus_fairchem"])
    vs = Versus(check)
    structs = versus_structs(check)
    for s in structs:
        if not os.path.isfile("%s/%s.extxyz" % (check.structs, s)):
            stage.say("no structure %s (%s/%s.extxyz)" % (s, check.structs, s))
            return 1
    stage.plan(SETUP_RESERVE + eager_reserve(check, vs, structs))
    if versus_setup(stage, vs) != 0:
        return 1
    return eager_all(stage, vs, structs)
