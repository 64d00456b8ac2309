"""The CPU proof runs with the network cut off where it can (a new network namespace without
interfaces, `unshare -n`), which proves it needs none.  mpirun's PMIx server listens on a local
socket: it needs the loopback interface, which a new network namespace has down, so that one is
brought up (only loopback: no route leaves the machine)."""
import fcntl
import os
import shutil
import socket
import struct
import subprocess

SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP = 0x8913, 0x8914, 1
NOT_CUT = "not cut off (no unshare -n); no network command is used"


def can_unshare():
    return bool(shutil.which("unshare")) and subprocess.call(["unshare", "-n", "true"], stdout=subprocess.DEVNULL,
                                                             stderr=subprocess.DEVNULL) == 0


def rerun_without_network(script, quick, prep):
    """Runs SCRIPT --cpu [--quick] PREP again inside `unshare -n` (does not return)."""
    argv = ["unshare", "-n", "env", "UMA_GPU_CHECK_NONET=1", "bash", script, "--cpu"] + (["--quick"] if quick else [])
    os.execvp("unshare", argv + [prep])


def loopback_up():
    """Brings the loopback interface up; whether it could."""
    if shutil.which("ip") and subprocess.call(["ip", "link", "set", "lo", "up"], stderr=subprocess.DEVNULL) == 0:
        return True
    try:
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        flags = struct.unpack("16sH", fcntl.ioctl(s, SIOCGIFFLAGS, struct.pack("16sH", b"lo", 0))[:18])[1]
        fcntl.ioctl(s, SIOCSIFFLAGS, struct.pack("16sH", b"lo", flags | IFF_UP))
        return True
    except OSError:
        return False


def network_state():
    """How the network stands for this run, for the environment record."""
    if not os.environ.get("UMA_GPU_CHECK_NONET"):
        return NOT_CUT
    if loopback_up():
        return "cut off (unshare -n: loopback only)"
    return "cut off (unshare -n: no interfaces; loopback could not be brought up, mpirun will fail)"
