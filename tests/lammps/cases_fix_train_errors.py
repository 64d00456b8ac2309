"""fix uma/train's refusals through real LAMMPS: bad input refused with a message that says what is
wrong, and a failure on one rank stopping every rank.

CASES: name -> case(host_dir, root_dir), run by run_case.py --suite train (each a ctest,
lammps.fix_uma_train.NAME).
"""
import os
import shutil

import harness
from cases_fix_train import POTENTIALS, head, write_frames
from harness import MODEL, check, in_root, lammps


def case_errors(h, r):
    """Bad input is refused with a message that says what is wrong."""
    write_frames(h, 2)
    with open(os.path.join(h, "bad_forces.extxyz"), "w") as f:
        f.write('2\nLattice="5 0 0 0 5 0 0 0 5" Properties=species:S:1:pos:R:3:forces:R:2 energy=1 task=omat\n'
                "Cu 0 0 0 1 2\nCu 1.8 1.8 0 1 2\n")
    with open(os.path.join(h, "no_labels.extxyz"), "w") as f:
        f.write('2\nLattice="5 0 0 0 5 0 0 0 5" Properties=species:S:1:pos:R:3 task=omat\nCu 0 0 0\nCu 1.8 1.8 0\n')
    with open(os.path.join(h, "bad_task.extxyz"), "w") as f:
        f.write('2\nLattice="5 0 0 0 5 0 0 0 5" Properties=species:S:1:pos:R:3 energy=1 task=spice\n'
                "Cu 0 0 0\nCu 1.8 1.8 0\n")
    cases = [
        ("no_pair", head().replace("pair_style uma task omat", "pair_style eam").replace(
            f"pair_coeff * * {MODEL} Cu", "pair_coeff 1 1 Cu_u3.eam") +
         "fix t all uma/train 1 data frames.extxyz\nrun 1\n", "requires pair_style uma"),
        ("bad_reference", head() + "fix t all uma/train 1 label 1 reference nosuchstyle coeff * *\nrun 1\n",
         "the reference pair style failed"),
        ("bad_reference_coeff", head() + "fix t all uma/train 1 label 1 reference eam coeff 1 1 missing.eam\nrun 1\n",
         "the reference pair style failed"),
        ("no_reference", head() + "fix t all uma/train 1 label 5\nrun 1\n", "needs a reference pair style"),
        ("nothing", head() + "fix t all uma/train 1 lr 1e-3\nrun 1\n", "nothing to train on"),
        # output files that cannot be written: refused before any step (a checkpoint every 1000 steps
        # or a state file written with restarts would otherwise fail after the work)
        ("checkpoint_path", head() + "fix t all uma/train 1 data frames.extxyz checkpoint /no/such/dir/m.safetensors "
         "1000\nrun 1\n", "cannot write '/no/such/dir/m.safetensors': there is no folder '/no/such/dir'"),
        ("state_path", head() + "fix t all uma/train 1 data frames.extxyz state /no/such/dir/t.state\nrun 1\n",
         "cannot write '/no/such/dir/t.state'"),
        ("calibration_path", head() + "fix t all uma/train 1 data frames.extxyz committee 2 calibration /no/c.txt\n"
         "run 1\n", "cannot write '/no/c.txt'"),
        ("frames_path", head() + "fix t all uma/train 1 data frames.extxyz write_frames . label 5 "
         "reference eam coeff 1 1 Cu_u3.eam\nrun 1\n", "cannot write '.': it is a folder"),
        ("frames_are_data", head() + "fix t all uma/train 1 data frames.extxyz write_frames frames.extxyz label 5 "
         "reference eam coeff 1 1 Cu_u3.eam\nrun 1\n", "write_frames frames.extxyz is also a data file"),
        # counts and intervals are integers >= 1 (a fraction became 0 and divided by it)
        ("print_fraction", head() + "fix t all uma/train 1 data frames.extxyz print 0.5\nrun 1\n",
         "Expected integer parameter instead of '0.5'"),
        ("check_zero", head() + "fix t all uma/train 1 label auto 0.05 check 0 reference eam coeff 1 1 Cu_u3.eam\n"
         "run 1\n", "check must be an integer >= 1, got 0"),
        ("steps_huge", head() + "fix t all uma/train 1 data frames.extxyz steps 1e10\nrun 1\n",
         "Expected integer parameter instead of '1e10'"),
        ("max_atoms_zero", head() + "fix t all uma/train 1 data frames.extxyz max_atoms 0\nrun 1\n",
         "max_atoms must be an integer >= 1, got 0"),
        ("bad_forces", head() + "fix t all uma/train 1 data bad_forces.extxyz\nrun 1\n",
         "column 'forces' must have 3 components"),
        ("bad_task", head() + "fix t all uma/train 1 data bad_task.extxyz\nrun 1\n", "unknown task 'spice'"),
        ("fix_task", head() + "fix t all uma/train 1 data frames.extxyz task omatt\nrun 1\n",
         "unknown task 'omatt'; the model has: "),
        ("no_labels", head() + "fix t all uma/train 1 data no_labels.extxyz\nrun 1\n",
         "no_labels.extxyz: no frame carries a label (energy, forces or stress)"),
        ("keyword", head() + "fix t all uma/train 1 data frames.extxyz learning_rate 3\nrun 1\n",
         "unknown keyword 'learning_rate'"),
        ("ema_use", head() + "fix t all uma/train 1 data frames.extxyz ema 0 use ema\nrun 1\n", "needs an ema decay"),
        # the option table shared with `uma train` (tests/tool/check_train.py sees the same messages)
        ("option_table", head() + "fix t all uma/train 1 data frames.extxyz lr -1\nrun 1\n",
         "Fix uma/train: lr must be > 0, got '-1'"),
        ("option_table_precision", head() + "fix t all uma/train 1 data frames.extxyz precision tf32\nrun 1\n",
         "Fix uma/train: precision must be fp32 or fp64, got 'tf32'"),
        ("option_table_recompute", head() + "fix t all uma/train 1 data frames.extxyz recompute -5\nrun 1\n",
         "Fix uma/train: recompute must be an integer >= 0, got '-5'"),
        ("max_atoms", head() + "fix t all uma/train 1 data frames.extxyz max_atoms 10\nrun 1\n",
         "no frame has at most max_atoms 10 atoms"),
        # frames larger than a batch are left out of training, and the log says so when they are read
        ("max_atoms_warning", head() + "fix t all uma/train 1 data frames.extxyz max_atoms 10\nrun 1\n",
         "2 of 2 frames from frames.extxyz have more than max_atoms 10 atoms and are left out of training"),
    ]
    for name, text, msg in cases:
        out = lammps(h, r, "in." + name, text, env=POTENTIALS, fail=True)
        check(msg in out, f"{name}: expected the error to say \"{msg}\"; got:\n{out[-1500:]}")
        print(f"  {name}: refused with \"{msg}\"")
    # a checkpoint over the model file pair_coeff read (a copy here): allowed, with a warning
    shutil.copy(harness.ROOT + MODEL, os.path.join(h, "start.safetensors"))
    out = lammps(h, r, "in.checkpoint_is_model", head().replace(MODEL, "start.safetensors") +
                 "fix t all uma/train 1 data frames.extxyz checkpoint ./start.safetensors 10\nrun 1\n")
    msg = "checkpoint ./start.safetensors is the model file pair_coeff read: the first checkpoint overwrites its weights"
    check(msg in out, f"checkpoint_is_model: expected the warning \"{msg}\"; got:\n{out[-1500:]}")
    print(f"  checkpoint_is_model: warned \"{msg}\"")


def case_one_rank_fails(h, r):
    """A training step that fails on one rank only (on a GPU typically out of memory; injected here on rank 1
    by UMA_TEST_FAIL_TRAINING_STEP=1 in that rank's environment) stops both ranks with that rank's message,
    where the other would wait for it in the gradient reduction forever."""
    write_frames(h, 4)
    text = head() + "fix t all uma/train 1 data frames.extxyz max_atoms 32 print 1\nrun 2\n"
    with open(os.path.join(h, "in.fails"), "w") as f:
        f.write(text)
    lmp = f"{harness.LMP} -in in.fails -log log.fails -screen none"
    p = in_root(f"cd {r} && OMP_NUM_THREADS=1 timeout 120 mpirun --oversubscribe -np 1 {lmp} : "
                f"-np 1 -x UMA_TEST_FAIL_TRAINING_STEP=1 {lmp}")
    check(p.returncode != 124, "one rank failed and the run hung (killed after 120 s)")
    log = open(os.path.join(h, "log.fails")).read() if os.path.exists(os.path.join(h, "log.fails")) else ""
    out = log + p.stdout + p.stderr
    check(p.returncode != 0, "the run with a failing rank exited with status 0")
    msg = "training step failed: a failure injected by UMA_TEST_FAIL_TRAINING_STEP"
    check(msg in out, f"expected rank 1's message \"{msg}\" from the run; got:\n{out[-2000:]}")
    print(f"  rank 1 failed alone: both ranks stopped (exit status {p.returncode}) with \"{msg}\"")


CASES = {"one_rank_fails": case_one_rank_fails, "errors": case_errors}
