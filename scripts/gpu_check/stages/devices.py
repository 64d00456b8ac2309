"""The devices stage: the same fp64 input on the CPU and on the device (cuda; the CPU again in a
CPU proof, a rehearsal only): run 0's energy, virial and forces must agree to 1e-10 (relative to
each quantity's largest value), the thermo rows of 100 NVE steps to 1e-8, and the device's energy
drift over them must be within 2x the CPU's plus 1e-6 eV/atom.  The tiny model, the ranks stage's
108-atom data file, 1 rank."""
import os
import shutil

from ..report.devices import devices_check
from .inputs import cu108, write_nve_input


def devices_run(stage, d, data, label, device, threads):
    check = stage.check
    stage.say("== %s: device %s, %s thread(s)" % (label, device, threads))
    return stage.limited(10, "%s: device %s" % (label, device),
                         check.mpirun + ["-np", "1", "-x", "OMP_NUM_THREADS=%s" % threads, check.linst + "/bin/lmp",
                                         "-in", d + "/in.devices", "-screen", "none", "-log", "%s/log.%s" % (d, label),
                                         "-var", "plugin", check.plugin, "-var", "model", check.tiny_model,
                                         "-var", "device", device, "-var", "data", data,
                                         "-var", "dumpfile", "%s/%s.dump" % (d, label)], env=check.lammps_env())


def st_devices(stage):
    check = stage.check
    stage.deadline(check.limits["devices"])
    d = check.build + "/devices"
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    data = cu108(check, d)
    write_nve_input(d + "/in.devices")
    # (the CPU reference on every core: 100 fp64 steps took 50 s on one core of a 2-core machine)
    stage.plan(20)
    rc_cpu = devices_run(stage, d, data, "reference", "cpu", check.jobs)
    rc_dev = devices_run(stage, d, data, "device", check.device, 1)
    return stage.report(devices_check, check.details + "/devices.json", "cpu", rc_cpu, d + "/log.reference",
                        d + "/reference.dump", check.device, rc_dev, d + "/log.device", d + "/device.dump")
