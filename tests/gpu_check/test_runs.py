"""Whole runs of the check on the fake machine: every stage's commands, limits and checks, in
order, for each mode (a GPU run building here or from prebuilt artifacts, --quick, a selection,
the CPU proof), with the budget, a command cut by its limit and a failed stage."""
import json
import os
import tarfile
import unittest

from harness import Setting
from gpu_check.builds.prebuilt_manifest import write_manifest
from gpu_check.settings import GPU_TORCH_DIR, GPU_TORCH_VERSION
from test_limits import GPU

CHECKING = ["versus_fairchem", "kernels", "tests", "kokkos", "ranks", "devices", "train", "lammps_md", "tf32", "bench",
            "profile", "versus_train", "largest", "versus_fairchem_compiled", "pip_route"]
BUILT_HERE = ["environment", "unpack", "mpi", "prebuilt", "gtest", "engine", "lammps_build", "plugin", "structures",
              "model_init"]
VERSUS_CMD = "fairchem eager, cu_1000 si_1000 c33h68 cu_4000"


def statuses(stages):
    return {s["name"]: s["status"] for s in stages}


def in_order(stages):
    """The stages' names in order, lammps_build put after the engine (it builds beside it)."""
    names = [s["name"] for s in stages]
    if "lammps_build" in names and "engine" in names:
        names.remove("lammps_build")
        names.insert(names.index("engine") + 1, "lammps_build")
    return names


class Runs(unittest.TestCase):
    def setUp(self):
        self.setting = Setting()

    def tearDown(self):
        self.setting.close()

    def test_gpu_run_building_here(self):
        check, runner = self.setting.check()
        rc, summary, stages = self.setting.run(check)
        self.assertEqual(in_order(stages), BUILT_HERE + CHECKING)
        want = dict.fromkeys(BUILT_HERE + CHECKING, "passed")
        want.update(prebuilt="not_selected", kokkos="skipped")
        self.assertEqual(statuses(stages), want)
        self.assertEqual(rc, 1)   # kokkos needs the prebuilt uma/kk: skipped, so not passed
        self.assertEqual((summary["status"], summary["failed_stages"], summary["skipped_stages"]),
                         ("failed", [], ["kokkos"]))
        self.assertEqual((summary["mode"], summary["selection"], summary["budget_s"], summary["archive"]),
                         ("gpu", "all", 540.0, "gpu_check_logs.tar.gz"))
        self.assertEqual(summary["environment"]["device"], "NVIDIA H100 80GB HBM3")
        # the stage limits and the versus stage's reserves: 95 for its setup, 274 for its runs
        versus = next(s for s in stages if s["name"] == "versus_fairchem")
        self.assertEqual(versus["commands"][0], {"command": "install fairchem-core", "limit_s": 41, "seconds": 0.1,
                                                 "exit": 0, "cut": False})
        self.assertTrue(all(c["limit_s"] <= 380 for c in versus["commands"]))
        for name, limit in GPU.items():   # each stage's log starts with its limit
            if name in want and want[name] == "passed":
                with open("%s/%s.log" % (check.logs, name)) as f:
                    self.assertEqual(f.readline(), "time limit %d s\n" % limit, name)
        figures = summary["figures"]
        self.assertAlmostEqual(figures["versus_fairchem"]["cu_1000"]["ratios"]["fairchem_over_ours_eager_fp32"],
                               95.9 / 154.5)
        self.assertEqual(sorted(figures["versus_fairchem"]), ["c33h68", "cu_1000", "cu_4000", "si_1000"])
        with open(check.details + "/versus_fairchem.json") as f:   # each run with its engine's fields
            runs = json.load(f)["structures"]["cu_1000"]["runs"]
        self.assertEqual((runs["fairchem-fp32"]["backend"], runs["ours-fp32-graph"]["graph_replays"]),
                         ("umas_fast_gpu", 9))
        for stage in ("versus_fairchem", "versus_fairchem_compiled"):   # each structure's checks passed
            self.assertEqual({s: (e["passed"], e["checks_failed"]) for s, e in figures[stage].items()},
                             dict.fromkeys(figures[stage], (True, [])), stage)
        self.assertEqual(figures["lammps_md"]["timesteps_per_s"], 7.722)
        self.assertAlmostEqual(figures["lammps_md_replay"]["replay_speedup"], 8.0 / 7.722)
        self.assertEqual(figures["kernels"]["max_relative"], {"fp64": 7.9e-16, "fp32": 2.9e-7})
        self.assertEqual(figures["tests"]["total"], 22)   # 2 GoogleTest cases in shards, 20 by ctest
        self.assertTrue(figures["ranks"]["tiny"]["passed"] and figures["ranks"]["balanced"]["passed"])
        self.assertEqual(figures["train"]["host_reads_per_optimizer_step"], [0.0] * 5)
        self.assertEqual(figures["largest"]["peak_gpu_gb"], 4.92)
        self.assertEqual(len(figures["uma_bench"]), 3 * 2 + 3)
        self.assertEqual(sorted(figures["versus_fairchem_compiled"]), ["c33h68", "cu_1000", "cu_4000", "si_1000"])
        # the commands: the engine built with its tests, LAMMPS, the plugin, the kernels check by nvcc
        builds = sorted(c.split()[2].rsplit("/", 1)[1] + (" " + c.split()[-1] if "--target" in c else "")
                        for c in runner.commands("cmake --build"))
        self.assertEqual(builds, ["engine", "engine mpi_thread_probe", "gtest-build", "lammps-build"])
        self.assertEqual(len(runner.commands("nvcc")), 6)   # the check, a kernel and its launcher, the timing, 2 links
        # bench (eager, replayed, in chunks), profile (and under ncu), versus (ours, the first structure 3 ways)
        self.assertEqual(len(runner.commands("uma bench")), (6 + 3 + 2) + (1 + 1) + (6 + 3 * 2))
        self.assertEqual(len(runner.commands("--cuda-graph")), 3 + 2)
        self.assertEqual(len([c for c in runner.calls if c["argv"][-2:] == ["graph", "yes"]]), 1)   # the replayed twin
        with tarfile.open(check.archive) as tar:
            names = tar.getnames()
        for name in ("gpu_check/MANIFEST.txt", "gpu_check/logs/ranks.log", "gpu_check/details/tf32.json",
                     "gpu_check/stages.jsonl", "gpu_check/md/log.graph.lammps"):
            self.assertIn(name, names)

    def test_gpu_run_from_prebuilt_artifacts(self):
        check, runner = self.setting.check()
        os.makedirs(check.prebuilt_dir)
        open(check.prebuilt_dir + "/prebuilt.tar.xz", "w").close()
        write_manifest(check.prebuilt_dir + "/manifest.json", check.root, check.prep, check.build, GPU_TORCH_DIR,
                       GPU_TORCH_VERSION, "c++ (Ubuntu 13.3.0-6ubuntu2~24.04.1) 13.3.0")
        rc, summary, stages = self.setting.run(check)
        self.assertEqual((rc, summary["status"]), (0, "passed"))
        self.assertEqual([s["name"] for s in stages][:8],
                         ["environment", "unpack", "mpi", "prebuilt", "gtest", "engine", "lammps_build", "plugin"])
        self.assertEqual(stages[4]["note"], "prebuilt (scripts/gpu_check.sh --prebuild)")
        self.assertEqual(runner.commands("cmake -S") + runner.commands("cmake --build"), [])
        self.assertAlmostEqual(summary["figures"]["kokkos"]["speed"]["kk_over_uma"], 7.5 / 7.0, places=4)
        self.assertEqual(summary["figures"]["kokkos"]["runs"]["1"]["steady_transfers_per_step"],
                         {"host_reads": 1.0, "uploads": 1.0, "read_bytes": 128.0, "upload_bytes": 200.0})

    def test_quick(self):
        check, runner = self.setting.check(quick=True)
        rc, summary, stages = self.setting.run(check)
        self.assertEqual((rc, summary["status"], summary["selection"], summary["budget_s"]),
                         (0, "passed", "quick", 290.0))
        selected = [n for n in CHECKING if statuses(stages)[n] != "not_selected"]
        self.assertEqual(selected, ["versus_fairchem", "tests", "lammps_md"])
        self.assertEqual(list(summary["figures"]["versus_fairchem"]), ["cu_1000"])
        self.assertNotIn("lammps_md_replay", summary["figures"])
        versus = next(s for s in stages if s["name"] == "versus_fairchem")
        self.assertEqual(versus["commands"][0]["limit_s"], 210 - (95 + 111 - 30))   # the quick limit, its reserves
        self.assertEqual(next(s for s in stages if s["name"] == "lammps_md")["commands"][0]["limit_s"], 50)

    def test_selected_stages(self):
        check, runner = self.setting.check(env={"UMA_GPU_STAGES": "tf32,bench"})
        rc, summary, stages = self.setting.run(check)
        self.assertEqual((rc, summary["selection"]), (0, "tf32 bench"))
        st = statuses(stages)
        self.assertEqual([n for n in CHECKING if st[n] != "not_selected"], ["tf32", "bench"])
        self.assertEqual((st["lammps_build"], st["plugin"]), ("not_selected", "not_selected"))
        self.assertEqual(runner.commands("cmake --build")[-1].split()[-2:], ["--target", "uma_tool"])
        self.assertIn("not in UMA_GPU_STAGES (tf32 bench)", [s.get("note") for s in stages])

    def test_cpu_proof(self):
        check, runner = self.setting.check(mode="cpu")
        rc, summary, stages = self.setting.run(check)
        self.assertEqual((rc, summary["status"], summary["mode"], summary["budget_s"]),
                         (0, "passed", "cpu-proof", None))
        self.assertEqual(in_order(stages), BUILT_HERE + CHECKING)
        st = statuses(stages)
        self.assertEqual((st["kernels"], st["kokkos"], st["pip_route"]), ("not_selected",) * 3)
        self.assertEqual(runner.commands("pip-venv"), [])
        self.assertEqual(runner.commands("--cuda-graph"), [])
        self.assertEqual(runner.commands("--device cuda"), [])
        self.assertTrue(runner.commands("image_site.py"))
        self.assertEqual(list(summary["figures"]["versus_fairchem"]), ["cu_108", "c33h68"])
        self.assertTrue(summary["figures"]["devices"]["rehearsal"])
        with open(check.logs + "/tests.log") as f:
            self.assertIn("time limit 3600 s", f.read())

    def test_budget(self):
        # the builds take 320 s of the 400: the later stages' limits are cut to what is left, the
        # kernels check and ctest run into theirs, and the stages after them are skipped
        check, runner = self.setting.check(env={"UMA_GPU_BUDGET_S": "400"},
                                           durations={"cmake --build": 80, r"^\S*/kernels_check$": 50, "^ctest": 40})
        rc, summary, stages = self.setting.run(check)
        self.assertEqual((rc, summary["status"], summary["budget_s"]), (1, "failed", 400.0))
        with open(check.logs + "/tests.log") as f:
            self.assertRegex(f.read(), r"time limit \d+ s \(120 s, cut to what is left of the budget of 400 s\)")
        self.assertEqual(summary["cut_commands"], {"kernels": ["kernels_check"], "tests": ["ctest (static, tool)"]})
        notes = {s["name"]: s.get("note", "") for s in stages}
        # versus_train and largest have no least time to start (STAGE_NEEDS_S): they still run
        after = ["ranks", "devices", "train", "lammps_md", "tf32", "bench", "profile", "versus_fairchem_compiled",
                 "pip_route"]
        self.assertEqual([n for n in summary["skipped_stages"] if n != "kokkos"], after)
        self.assertTrue(all(notes[n].startswith("time budget of 400 s: ") for n in after))
        self.assertEqual((statuses(stages)["versus_train"], statuses(stages)["largest"]), ("passed", "passed"))

    def test_command_cut_by_its_limit(self):
        check, runner = self.setting.check(env={"UMA_GPU_STAGES": "versus_fairchem"},
                                           durations={"fairchem_worker.py": 1000})
        rc, summary, stages = self.setting.run(check)
        self.assertEqual(summary["cut_commands"]["versus_fairchem"], [VERSUS_CMD])
        versus = next(s for s in stages if s["name"] == "versus_fairchem")
        self.assertEqual(versus["status"], "passed")   # a cut run is recorded as cut, not as failed
        cut = [c for c in versus["commands"] if c["cut"]]
        self.assertEqual([(c["command"], c["exit"]) for c in cut], [(VERSUS_CMD, 124)])
        self.assertEqual(summary["figures"]["versus_fairchem"]["cu_1000"]["runs"]["fairchem-fp32"],
                         {"cut": "stage time limit (exit 124)"})
        with open(check.logs + "/versus_fairchem.log") as f:
            self.assertIn("[CUT: %s at its limit of" % VERSUS_CMD, f.read())

    def test_bench_fails_as_recorded(self):
        # run1 (doc/gpu_check_2026-12-04.json): Cu 4,000 could not be captured as a CUDA graph
        check, runner = self.setting.check(env={"UMA_GPU_STAGES": "bench"})
        runner.refusals = True
        rc, summary, stages = self.setting.run(check)
        self.assertEqual((rc, summary["failed_stages"]), (1, ["bench"]))
        refused = [r for r in summary["figures"]["uma_bench"] if r["graph_refusal"]]
        self.assertEqual([r["run"] for r in refused], ["cu_4000 fp32 cuda_graph"])
        with open(check.logs + "/bench.log") as f:
            self.assertIn("cuda graph: NOT replayed (or no kernel counted): 'the step could not be captured", f.read())

    def test_failed_stage(self):
        check, runner = self.setting.check(env={"UMA_GPU_STAGES": "ranks devices"}, failures={"in.ranks": 1})
        rc, summary, stages = self.setting.run(check)
        self.assertEqual((rc, summary["failed_stages"]), (1, ["ranks"]))
        ranks = next(s for s in stages if s["name"] == "ranks")
        self.assertEqual(ranks["note"], "exit 1; log logs/ranks.log in gpu_check_logs.tar.gz")
        self.assertIn("1 rank: lmp exited 1", ranks["details"]["cases"]["tiny"]["checks_failed"])
        with open(check.summary_path) as f:
            self.assertEqual(json.load(f)["status"], "failed")


if __name__ == "__main__":
    unittest.main()
