"""The command line: scripts/gpu_check.sh (the shim) runs the driver with python3; the modes and
their usage errors, the prepared folder checked (and kept out of git, within what a run carries),
the knobs refused with a message, and what --kokkos-lammps says of the user's KOKKOS LAMMPS; and
archives extracted by Python where tar cannot."""
import contextlib
import io
import os
import subprocess
import tarfile
import unittest

from harness import PREPARED, REPO, Setting, quiet, touch
from gpu_check import USAGE, driver
from gpu_check.builds.kokkos import kokkos_lammps_missing
from gpu_check.builds.prebuilt_manifest import prebuilt_matches
from gpu_check.builds.sysroot import extract_tar
from gpu_check.carry import check_carry, ignore_in_git
from gpu_check.check import Check

SHIM = os.path.join(REPO, "scripts", "gpu_check.sh")


def shim(*args, env=None):
    r = subprocess.run(["bash", SHIM] + list(args), capture_output=True, text=True, timeout=60,
                       env=dict(os.environ, **(env or {})))
    return r.returncode, r.stdout, r.stderr


def parsed(argv):
    """(exit status, stdout) where parsing ARGV exits, else the arguments."""
    stdout = io.StringIO()
    try:
        with contextlib.redirect_stdout(stdout):
            return driver.parse(argv)
    except SystemExit as e:
        return e.code, stdout.getvalue()


class CommandLine(unittest.TestCase):
    def test_modes(self):
        for argv, mode, quick in ((["D"], "gpu", False), (["--quick", "D"], "gpu", True),
                                  (["--cpu", "D"], "cpu", False), (["--cpu", "--quick", "D"], "cpu", True),
                                  (["--prebuild", "D"], "prebuild", False)):
            args = parsed(argv)
            self.assertEqual((args.mode, args.quick, args.dir, args.prepare), (mode, quick, "D", None), argv)
        self.assertEqual(parsed(["--prepare", "D"]).prepare, "D")
        self.assertTrue(parsed(["--kokkos-lammps"]).kokkos_lammps)
        self.assertEqual(parsed(["--help"]), (0, USAGE + "\n"))
        self.assertEqual(parsed(["--cpu", "-h"]), (0, USAGE + "\n"))
        for argv in ([], ["--cpu"], ["D", "--cpu"], ["--prepare"], ["--prepare", "D", "E"], ["--cpu", "--prepare", "D"],
                     ["--nope", "D"], ["D", "E"], ["--cpu", "--kokkos-lammps"]):
            self.assertEqual(parsed(argv), (2, USAGE + "\n"), argv)

    def test_shim(self):
        rc, stdout, _ = shim("--help")
        self.assertEqual((rc, stdout.splitlines()[0]), (0, USAGE.splitlines()[0]))
        self.assertIn("--quick (or UMA_GPU_STAGES=quick)", stdout)
        self.assertEqual(shim()[0], 2)
        rc, _, stderr = shim("/nonexistent/gpu-prep")
        self.assertEqual((rc, stderr), (1, "[gpu-check] error: no folder /nonexistent/gpu-prep\n"))
        rc, _, stderr = shim("--kokkos-lammps", env={"UMA_KOKKOS_LAMMPS": "", "UMA_KOKKOS_LAMMPS_SOURCE": ""})
        self.assertEqual(rc, 1)
        self.assertIn("[gpu-check] uma/kk on CUDA: UMA_KOKKOS_LAMMPS is not set", stderr)

    def test_prepared_folder(self):
        setting = Setting()
        self.addCleanup(setting.close)
        self.assertEqual(driver.prepared_folder(setting.prep), setting.prep)
        rc, _, stderr = shim(setting.root)
        self.assertEqual(rc, 1)
        self.assertIn("is not a prepared folder (run scripts/gpu_check.sh --prepare", stderr)
        os.remove(os.path.join(setting.prep, PREPARED[2]))
        rc, _, stderr = shim(setting.prep)
        self.assertIn("has no openmpi-5.0.8-*.tar.xz (prepared before Open MPI came as an xz tar)", stderr)

    def test_knobs_refused(self):
        setting = Setting()
        self.addCleanup(setting.close)
        for env, message in (({"UMA_GPU_STAGES": "ranks nope"}, "UMA_GPU_STAGES: no stage 'nope'"),
                             ({"UMA_GPU_LIMITS": "tests=0"}, "UMA_GPU_LIMITS: 'tests=0' is not STAGE=SECONDS"),
                             ({"UMA_GPU_BUDGET_S": "soon"}, "UMA_GPU_BUDGET_S: 'soon' is not a number")):
            stderr = io.StringIO()
            with self.assertRaises(SystemExit) as exit_, contextlib.redirect_stderr(stderr):
                Check.from_environment(setting.root, setting.prep, "gpu", False, dict(env), runner=None)
            self.assertEqual(exit_.exception.code, 1)
            self.assertIn("[gpu-check] error: " + message, stderr.getvalue())

    def test_jobs_as_nproc_counts(self):
        setting = Setting()
        self.addCleanup(setting.close)
        plain = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "OMP_THREAD_LIMIT")}
        for knobs, jobs in (({}, len(os.sched_getaffinity(0))), ({"OMP_NUM_THREADS": "1"}, 1),
                            ({"UMA_GPU_JOBS": "3", "OMP_NUM_THREADS": "1"}, 3)):
            check = Check.from_environment(setting.root, setting.prep, "gpu", False, dict(plain, **knobs), runner=None)
            self.assertEqual(check.jobs, jobs, knobs)

    def test_kokkos_lammps(self):
        setting = Setting()
        self.addCleanup(setting.close)
        prefix, source = setting.tmp_dir.name + "/kk", setting.tmp_dir.name + "/kk-src"
        self.assertEqual(len(kokkos_lammps_missing("", "", "")), 2)
        touch(prefix + "/bin/lmp", executable=True)
        touch(source + "/src/lammpsplugin.h")
        self.assertEqual(kokkos_lammps_missing(prefix, source, ""), [
            "UMA_KOKKOS_LAMMPS=%s has no lib/liblammps.so (build LAMMPS with -D BUILD_SHARED_LIBS=on)" % prefix,
            "UMA_KOKKOS_LAMMPS_SOURCE=%s has no KOKKOS package (src/KOKKOS/kokkos.h)" % source])
        touch(prefix + "/lib/liblammps.so")
        touch(source + "/src/KOKKOS/kokkos.h")
        self.assertTrue(kokkos_lammps_missing(prefix, source, "")[0].endswith(
            "has no lib/cmake/Kokkos (LAMMPS's bundled Kokkos installs it; for an external Kokkos set Kokkos_ROOT)"))
        self.assertEqual(kokkos_lammps_missing(prefix, source, "/usr"), [])
        os.makedirs(prefix + "/lib/cmake/Kokkos")
        self.assertEqual(kokkos_lammps_missing(prefix, source, ""), [])


class Folders(unittest.TestCase):
    def test_prepared_folder_ignored_by_git(self):
        setting = Setting()
        self.addCleanup(setting.close)
        repo = setting.tmp_dir.name
        subprocess.run(["git", "init", "-q", repo], check=True)
        for _ in range(2):   # added once
            with quiet():
                ignore_in_git(repo, setting.prep)
        with open(repo + "/.git/info/exclude") as f:
            self.assertEqual([l for l in f.read().splitlines() if not l.startswith("#")], ["/gpu-prep/"])
        stderr = io.StringIO()
        with contextlib.redirect_stderr(stderr):
            check_carry(repo, setting.prep)   # the tree and the folder, within the 64 MiB a run carries
        self.assertRegex(stderr.getvalue(), r"with the working tree \([\d.]+ MB\): [\d.]+ MB of the 67.1 MB")

    def test_manifest_unreadable_or_incomplete(self):
        setting = Setting()
        self.addCleanup(setting.close)
        manifest = os.path.join(setting.tmp_dir.name, "manifest.json")
        for text, why in (("{", "cannot read " + manifest),
                          ('{"key": "k", "root": "r"}', manifest + " has no torch_version, torch_dir, build, cxx")):
            with open(manifest, "w") as f:
                f.write(text)
            matches, line = prebuilt_matches(manifest, "/nonexistent.json", setting.root, setting.prep, "/b")
            self.assertFalse(matches)
            self.assertTrue(line.startswith("prebuilt artifacts not usable: " + why), line)

    def test_tar_falls_back_to_python(self):
        setting = Setting()
        self.addCleanup(setting.close)
        check, runner = setting.check(failures={"^tar ": 2})   # a tar that cannot (e.g. no xz)
        archive = os.path.join(setting.tmp_dir.name, "data.tar.gz")
        with tarfile.open(archive, "w:gz") as tar:
            tar.add(setting.root + "/CMakeLists.txt", "usr/src/googletest/CMakeLists.txt")
        stage = setting.stage(check, "unpack")
        self.assertTrue(extract_tar(stage, archive, check.sysroot))
        self.assertTrue(os.path.isfile(check.sysroot + "/usr/src/googletest/CMakeLists.txt"))
        self.assertEqual(runner.commands("tar -xf"), ["tar -xf %s -C %s" % (archive, check.sysroot)])


if __name__ == "__main__":
    unittest.main()
