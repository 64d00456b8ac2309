"""The engine's builds, incremental (a second run on the same machine rebuilds only what changed;
the archives keep their files' times): GoogleTest from the sysroot's source (gtest); the engine,
the uma tool and the tests against the torch of UMA_GPU_PYTHON, or, for --prebuild, the GPU
machine's torch (engine); the same build folder again with the plugin and the PMPI probe of the
ranks stage, against the LAMMPS of lammps_build (plugin)."""
import json
import os
import shutil

from ..settings import GPU_TORCH_DIR


def mpi_hints(check):
    """MPI's compiler wrappers, for LAMMPS's find_package(MPI) and the engine's
    (LAMMPSConfig.cmake's find_dependency(MPI), the probe's MPI C)."""
    return ["-DMPI_C_COMPILER=%s/bin/mpicc" % check.mpiroot, "-DMPI_CXX_COMPILER=%s/bin/mpicxx" % check.mpiroot]


def st_gtest(stage):
    check, b = stage.check, stage.check.build
    for argv in (["cmake", "-S", check.sysroot + "/usr/src/googletest", "-B", b + "/gtest-build", "-G", check.generator,
                  "-DCMAKE_BUILD_TYPE=Release", "-DCMAKE_POLICY_VERSION_MINIMUM=3.5", "-DBUILD_GMOCK=OFF",
                  "-DINSTALL_GTEST=ON", "-DCMAKE_POSITION_INDEPENDENT_CODE=ON",
                  "-DCMAKE_INSTALL_PREFIX=" + b + "/gtest", "-DCMAKE_INSTALL_LIBDIR=lib"] + check.launcher,
                 ["cmake", "--build", b + "/gtest-build", "-j%d" % check.jobs],
                 ["cmake", "--install", b + "/gtest-build"]):
        rc = stage.run(argv)
        if rc != 0:
            return rc
    return 0


def engine_args(check, flags, torch_dir):
    """The engine's configure arguments but CMAKE_PREFIX_PATH."""
    return (["-G", check.generator, "-DCMAKE_BUILD_TYPE=Release", "-DUMA_BUILD_TESTS=ON", "-DUMA_BUILD_PLUGIN=OFF",
             "-DUMA_PYTHON=", "-DUMA_SID_ROOT=", "-DCMAKE_CXX_FLAGS=" + flags] + check.launcher +
            ["-DUMA_TORCH_DIR=" + torch_dir])


def st_engine(stage):
    check, b = stage.check, stage.check.build
    if check.mode == "prebuild":   # the GPU machine's torch, placed by prebuild_torch
        torch_dir, torch_prefix = GPU_TORCH_DIR, GPU_TORCH_DIR + "/share/cmake"
    else:
        rc, out = stage.capture([check.python, "-c", "import torch; print(torch.utils.cmake_prefix_path)"])
        if rc != 0:
            return 1
        torch_prefix = out.rstrip("\n")
        torch_dir = stage.capture([check.python, "-c", "import os, torch; print(os.path.dirname(torch.__file__))"]
                                  )[1].rstrip("\n")
    configure = ["cmake", "-S", check.root, "-B", b + "/engine"]
    flags = "-isystem %s/usr/include" % check.sysroot
    # find_package(Torch) first; where its CUDA probe fails, the wheel's torch/ folder directly
    # (UMA_TORCH_DIR), with the CUDA headers if there are any.
    check.engine_args, check.engine_prefix = engine_args(check, flags, ""), "%s;%s/gtest;%s/usr" % (
        torch_prefix, b, check.sysroot)
    check.torch_mode = "find_package(Torch)"
    if check.mode == "prebuild" or stage.run(configure + check.engine_args +
                                             ["-DCMAKE_PREFIX_PATH=" + check.engine_prefix]) != 0:
        if check.mode == "prebuild":
            stage.say("== the GPU machine's torch: UMA_TORCH_DIR=" + torch_dir)
        else:
            stage.say("== find_package(Torch) failed; configuring again with UMA_TORCH_DIR=" + torch_dir)
            shutil.rmtree(b + "/engine", ignore_errors=True)
        if os.path.isdir("/usr/local/cuda/include"):
            flags += " -isystem /usr/local/cuda/include"
        check.engine_args = engine_args(check, flags, torch_dir)
        if check.mode == "prebuild":   # the Python-driven tests run there with its python3 (on PATH)
            check.engine_args.append("-DUMA_TEST_PYTHON=python3")
        check.engine_prefix = "%s/gtest;%s/usr" % (b, check.sysroot)
        check.torch_mode = "UMA_TORCH_DIR fallback"
        if stage.run(configure + check.engine_args + ["-DCMAKE_PREFIX_PATH=" + check.engine_prefix]) != 0:
            return 1
    with open(check.details + "/engine.json", "w") as f:
        json.dump({"torch_mode": check.torch_mode, "torch_cmake_prefix": torch_prefix}, f)
    build = ["cmake", "--build", b + "/engine", "-j%d" % check.jobs]
    # the test programs only for the tests
    return stage.run(build if check.wanted("tests") else build + ["--target", "uma_tool"])


def st_plugin(stage):
    """The engine's build folder again, now with the plugin (the engine is up to date) and the
    PMPI probe of the ranks stage (built with UMA_BUILD_TESTS and UMA_BUILD_PLUGIN)."""
    check, b = stage.check, stage.check.build
    for argv in (["cmake", "-S", check.root, "-B", b + "/engine"] + check.engine_args +
                 ["-DCMAKE_PREFIX_PATH=%s;%s" % (check.linst, check.engine_prefix), "-DUMA_BUILD_PLUGIN=ON",
                  "-DUMA_LAMMPS_SOURCE_DIR=%s/src" % check.lsrc] + mpi_hints(check),
                 ["cmake", "--build", b + "/engine", "-j%d" % check.jobs, "--target", "umaplugin", "mpi_thread_probe"],
                 ["ls", "-l", check.plugin, check.probe]):
        rc = stage.run(argv)
        if rc != 0:
            return rc
    return 0
