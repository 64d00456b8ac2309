"""The versus_fairchem_compiled stage, last: fairchem with torch.compile, per precision its first
call (the compile, in fp32 the first of the stage: 150 s reserved; 60 s for each later one) and
its steps, timed apart; ours from the versus_fairchem stage where it ran (the ratios), the fp64
reference again where it did not.  The structures one after another, each later one only if the
time left is at least what the first took (twice that for cu_4000), one not started recorded as
not run; a run its limit stopped is recorded as cut."""
import os
import shutil

from ..report.versus import versus_skip
from ..report.versus_compiled import versus_compiled
from .versus_setup import (SETUP_RESERVE, Versus, eager_reference_ran, struct_weight, task_of, versus_ref,
                           versus_setup, versus_structs)


class Compiled:
    """The stage's state across its structures: how many compiles it has started."""

    def __init__(self, stage, vs):
        self.stage, self.vs, self.compiles = stage, vs, 0

    def reserve(self, struct):
        """The reserves of STRUCT's runs: the reference (where the eager stage's did not run), a
        compiled run per precision, and the first compile's extra."""
        ref = 0 if eager_reference_ran(self.vs, struct) else 5
        return ref + 60 * len(self.vs.precisions) + (90 if self.compiles == 0 else 0)

    def run(self, struct):
        stage, vs, check = self.stage, self.vs, self.stage.check
        d, ref_dir = "%s/compiled/%s" % (vs.dir, struct), "%s/%s" % (vs.dir, struct)
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        if not eager_reference_ran(vs, struct):
            ref_dir = d
            versus_ref(stage, vs, struct, d)
        for p in vs.precisions:
            stage.say("== %s %s: fairchem compiled (torch.compile)" % (struct, p))
            self.fairchem_run(150 if self.compiles == 0 else 60, struct, p, d)
            self.compiles += 1
        return stage.report(versus_compiled, check.details + "/versus_fairchem_compiled.json", struct, d, ref_dir,
                            "%s/%s" % (vs.dir, struct))

    def fairchem_run(self, reserve, struct, precision, d):
        """bench/fairchem_worker.py --compile on one structure, its files in D."""
        stage, vs, check = self.stage, self.vs, self.stage.check
        rc = stage.limited(reserve, "%s %s fairchem compiled" % (struct, precision),
                           vs.python + [check.root + "/bench/fairchem_worker.py", vs.pt,
                                        "%s/%s.extxyz" % (check.structs, struct), "--task", task_of(struct),
                                        "--repeats", str(vs.repeats), "--device", check.device, "--compile"] +
                           (["--tf32"] if precision == "tf32" else []) +
                           ["--forces-out", "%s/fairchem-%s.forces.json" % (d, precision)],
                           stdout="%s/fairchem-%s.out" % (d, precision), stderr="%s/fairchem-%s.err" % (d, precision),
                           env=vs.env)
        with open("%s/fairchem-%s.rc" % (d, precision), "w") as f:
            f.write("%d\n" % rc)
        stage.show("%s/fairchem-%s.err" % (d, precision), last=3)


def each_struct(stage, structs, details, compiled):
    """The first structure always, each later one only if at least what the first took (times its
    weight) is left, with the plan set to its reserves; one not started recorded as not run."""
    check, first, took, rc = stage.check, True, 0, 0
    for s in structs:
        if not os.path.isfile("%s/%s.extxyz" % (check.structs, s)):
            stage.say("no structure %s (%s/%s.extxyz)" % (s, check.structs, s))
            rc = 1
            continue
        if not first:
            est = took * struct_weight(s)
            if stage.left() < est:
                stage.say("== %s: not run: %d s left of the stage's limit, estimated %d s" % (s, stage.left(), est))
                stage.report(versus_skip, details, s, "not run: %d s left of the stage's limit of %d s, estimated %d s "
                             "(%s took %d s)" % (stage.left(), stage.limit, est, structs[0], took))
                continue
            stage.plan(compiled.reserve(s))
        t0 = stage.now()
        rc |= compiled.run(s)
        if first:
            took, first = stage.now() - t0, False
    return 1 if rc else 0


def st_versus_fairchem_compiled(stage):
    check = stage.check
    stage.deadline(check.limits["versus_fairchem_compiled"])
    vs = Versus(check)
    compiled = Compiled(stage, vs)
    setup = 0 if os.path.isfile(vs.dir + "/.ready") else SETUP_RESERVE
    structs = versus_structs(check)
    stage.plan(setup + compiled.reserve(structs[0]))
    if versus_setup(stage, vs) != 0:
        return 1
    return each_struct(stage, structs, check.details + "/versus_fairchem_compiled.json", compiled)
