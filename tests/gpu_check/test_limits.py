"""The check's stage selection, time limits and budget: the defaults of each mode, the knobs
(UMA_GPU_STAGES, UMA_GPU_LIMITS, UMA_GPU_BUDGET_S), a stage's limit cut to the budget, the
reserves its commands share, a command cut by its limit, and the stages skipped or not selected."""
import json
import os
import re
import unittest

from harness import REPO, Setting, quiet
from gpu_check import bookkeeping, settings
from gpu_check.runner import STDOUT, Runner


# The limits doc/benchmarks.md ("GPU check") states, and those of the quick run and of the CPU proof
GPU = {"mpi": 60, "versus_fairchem": 380, "kernels": 40, "tests": 120, "kokkos": 150, "ranks": 60, "devices": 60,
       "train": 45, "lammps_md": 120, "tf32": 60, "bench": 120, "profile": 70, "versus_train": 90, "largest": 120,
       "versus_fairchem_compiled": 240, "pip_route": 300}
QUICK = dict(GPU, versus_fairchem=210, lammps_md=50)
CPU = {"mpi": 300, "versus_fairchem": 1800, "kernels": 600, "tests": 3600, "kokkos": 600, "ranks": 1800, "devices": 900,
       "train": 1800, "lammps_md": 900, "tf32": 1800, "bench": 900, "profile": 900, "versus_train": 1800,
       "largest": 1800, "versus_fairchem_compiled": 1800, "pip_route": 1800}
NEEDS = {"kernels": 10, "kokkos": 40, "lammps_md": 30, "mpi": 10, "ranks": 30, "devices": 20, "train": 20, "tf32": 30,
         "versus_fairchem": 60, "tests": 30, "bench": 20, "profile": 10, "versus_fairchem_compiled": 60,
         "pip_route": 180}


def doc_listing():
    """The paragraph of doc/benchmarks.md's "GPU check" that lists the stages' limits, on one line."""
    with open(os.path.join(REPO, "doc", "benchmarks.md")) as f:
        text = f.read()
    paragraphs = [" ".join(p.split()) for p in text[text.index("## GPU check"):].split("\n\n")]
    return next(p for p in paragraphs if "The stages run in this order" in p)


def doc_limits():
    """{stage: seconds} as that paragraph states them."""
    return {name: int(s) for name, s in re.findall(r"\b([a-z_0-9]+) (\d+) s\b", doc_listing())
            if name in settings.CHECK_ORDER}


class Knobs(unittest.TestCase):
    def test_selection(self):
        self.assertEqual(settings.stage_selection("", False), (False, "", "all"))
        self.assertEqual(settings.stage_selection("", True), (True, "versus_fairchem tests lammps_md", "quick"))
        self.assertEqual(settings.stage_selection("quick", False), (True, "versus_fairchem tests lammps_md", "quick"))
        self.assertEqual(settings.stage_selection("ranks,devices train", False),
                         (False, "ranks,devices train", "ranks devices train"))
        with self.assertRaisesRegex(settings.KnobError,
                                    r"UMA_GPU_STAGES: no stage 'rank' \(the stages: versus_fairchem "):
            settings.stage_selection("rank", False)
        with self.assertRaisesRegex(settings.KnobError, r"--quick picks its own stages \(versus_fairchem tests "
                                                        r"lammps_md\): unset UMA_GPU_STAGES or set it to quick"):
            settings.stage_selection("ranks", True)

    def test_limits(self):
        self.assertEqual(settings.stage_limits("gpu", False, ""), GPU)
        self.assertEqual(doc_limits(), {k: v for k, v in GPU.items() if k in settings.CHECK_ORDER})
        self.assertIn("pip_route %d s (CUDA only; it starts with at least %d s of the budget left)"
                      % (GPU["pip_route"], NEEDS["pip_route"]), doc_listing())
        self.assertEqual(settings.stage_limits("gpu", True, ""), QUICK)
        self.assertEqual(settings.stage_limits("cpu", True, ""), CPU)
        self.assertEqual(settings.stage_limits("prebuild", False, ""), CPU)
        self.assertEqual(settings.STAGE_NEEDS_S, NEEDS)
        got = settings.stage_limits("gpu", False, "tests=200 versus_fairchem=120,largest=7")
        self.assertEqual((got["tests"], got["versus_fairchem"], got["largest"], got["bench"]), (200, 120, 7, 120))
        for bad in ("tests=0", "tests=", "tests", "test=20", "tests=2.5", "tests=-1"):
            with self.assertRaisesRegex(settings.KnobError, "UMA_GPU_LIMITS: '%s' is not STAGE=SECONDS for one of: mpi "
                                                            "versus_fairchem kernels" % bad):
                settings.stage_limits("gpu", False, bad)

    def test_budget(self):
        self.assertEqual([settings.budget_text(m, q, "") for m, q in (("gpu", False), ("gpu", True), ("cpu", False),
                                                                      ("prebuild", False))], ["540", "290", "0", "0"])
        self.assertEqual(settings.budget_text("cpu", False, "120"), "120")
        with self.assertRaisesRegex(settings.KnobError, "UMA_GPU_BUDGET_S: 'soon' is not a number of seconds"):
            settings.budget_text("gpu", False, "soon")


class RealRunner(unittest.TestCase):
    """The one place that starts processes, on trivial ones: where the output goes, a program
    that is not there, a limit's exit status, a death by signal."""

    def test_runner(self):
        setting = Setting()
        self.addCleanup(setting.close)
        out, runner = os.path.join(setting.out, "both.txt"), Runner()
        self.assertEqual(runner.run(["sh", "-c", "echo out; echo err >&2; exit 3"], stdout=out, stderr=STDOUT), 3)
        with open(out) as f:
            self.assertEqual(sorted(f.read().split()), ["err", "out"])
        with open(out, "wb") as log:
            self.assertEqual(runner.run(["/nonexistent/program"], stdout=log, stderr=log), 127)
        with open(out) as f:
            self.assertIn("/nonexistent/program: No such file or directory", f.read())
        self.assertEqual(runner.run(["sleep", "5"], limit_s=0.2, kill_after_s=5), 124)
        self.assertEqual(runner.run(["sh", "-c", "kill -9 $$"]), 137)
        self.assertEqual(runner.output(["sh", "-c", "echo a; echo b >&2"]), (0, "a\n", "b\n"))


class Limits(unittest.TestCase):
    def setUp(self):
        self.setting = Setting()

    def tearDown(self):
        self.setting.close()

    def stage(self, check, name="ranks"):
        return self.setting.stage(check, name)

    def log_of(self, check, name="ranks"):
        with open(os.path.join(check.logs, name + ".log")) as f:
            return f.read()

    def test_limit_cut_to_the_budget(self):
        check, runner = self.setting.check(env={"UMA_GPU_BUDGET_S": "100"})
        runner.clock += 70.4   # 29.6 s left of the budget
        stage = self.stage(check)
        stage.deadline(60)
        self.assertEqual((stage.limit, stage.left()), (29, 29))
        self.assertIn("time limit 29 s (60 s, cut to what is left of the budget of 100 s)", self.log_of(check))
        runner.clock += 30   # over the budget: a stage still gets 1 s
        stage.deadline(60)
        self.assertEqual(stage.limit, 1)
        check, runner = self.setting.check(mode="cpu")   # no budget
        runner.clock += 1e5
        stage = self.stage(check)
        stage.deadline(1800)
        self.assertEqual(stage.limit, 1800)

    def test_reserves_shared(self):
        check, runner = self.setting.check()
        stage = self.stage(check)
        stage.deadline(150)
        stage.plan(90)   # the kokkos stage's first three runs: reserves 60, 40 and 20
        self.assertEqual([stage.share(60), stage.plan_left], [150 - 30, 30])
        self.assertEqual([stage.share(40), stage.plan_left], [150, 0])   # what is left beyond no one's reserve
        stage.deadline(50)
        stage.plan(90)   # less left than the reserves: each its proportional part
        self.assertEqual([stage.share(60), stage.share(20), stage.share(10)], [50 * 60 // 90, 50 - (30 - 20), 50])
        stage.plan(1000)
        self.assertEqual(stage.share(1), 1)   # at least 1 s

    def test_command_cut_by_its_limit(self):
        check, runner = self.setting.check(durations={"slow": 50})
        stage = self.stage(check)
        stage.deadline(60)
        stage.plan(30)
        self.assertEqual(stage.limited(10, 'a "slow" one', ["slow", "x"]), 124)
        self.assertEqual(stage.limited(20, "the last", ["fast"]), 0)
        self.assertEqual(runner.calls[-2]["limit_s"], 40)   # 60 s left, 20 s kept for the last
        with open(stage.commands) as f:
            commands = [json.loads(line) for line in f]
        self.assertEqual(commands, [{"command": "a slow one", "limit_s": 40, "seconds": 40.0, "exit": 124, "cut": True},
                                    {"command": "the last", "limit_s": 20, "seconds": 0.1, "exit": 0, "cut": False}])
        self.assertIn("[CUT: a slow one at its limit of 40 s (exit 124)]", self.log_of(check))
        with quiet():
            bookkeeping.record(check, "ranks", "passed", "40.2")
            summary = bookkeeping.write_summary(check)
        self.assertEqual(summary["cut_commands"], {"ranks": ["a slow one"]})
        self.assertEqual(summary["stages"][0]["commands"], commands)

    def test_stages_skipped_or_not_selected(self):
        check, runner = self.setting.check(env={"UMA_GPU_STAGES": "ranks tests"})
        called = []
        with quiet():
            self.assertEqual(bookkeeping.run_stage(check, "bench", lambda stage: called.append(1) or 0), 1)
            runner.clock += 512.3   # 27.7 s left of 540
            self.assertEqual(bookkeeping.run_stage(check, "ranks", lambda stage: called.append(1) or 0), 1)
            self.assertEqual(bookkeeping.run_stage(check, "unpack", lambda stage: called.append(1) or 0), 0)
            runner.clock += 30
            self.assertEqual(bookkeeping.run_stage(check, "structures", lambda stage: called.append(1) or 0), 1)
            self.assertEqual(bookkeeping.maybe_stage(check, "tests", None, False, "needs engine"), 1)
            summary = bookkeeping.write_summary(check)
        self.assertEqual(len(called), 1)   # unpack only: it needs no least time
        self.assertEqual([(s["name"], s["status"], s.get("note")) for s in summary["stages"]], [
            ("bench", "not_selected", "not in UMA_GPU_STAGES (ranks tests)"),
            ("ranks", "skipped", "time budget of 540 s: 28 s left, the stage needs 30"),
            ("unpack", "passed", None),
            ("structures", "skipped", "time budget of 540 s used up"),
            ("tests", "skipped", "needs engine")])
        self.assertEqual((summary["status"], summary["skipped_stages"], summary["not_selected_stages"]),
                         ("failed", ["ranks", "structures", "tests"], ["bench"]))

    def test_a_fault_of_the_check_fails_its_stage(self):
        check, runner = self.setting.check()
        with quiet():
            self.assertEqual(bookkeeping.run_stage(check, "tf32", lambda stage: {}["missing"]), 1)
            self.assertEqual(bookkeeping.run_stage(check, "bench", lambda stage: None), 1)
            summary = bookkeeping.write_summary(check)
        self.assertEqual(summary["failed_stages"], ["tf32", "bench"])
        self.assertIn("KeyError: 'missing'", self.log_of(check, "tf32"))
        self.assertIn("returned None, not an exit status", self.log_of(check, "bench"))


if __name__ == "__main__":
    unittest.main()
