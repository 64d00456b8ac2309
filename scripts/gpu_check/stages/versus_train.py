"""The versus_train stage: fairchem's training step beside ours on the same device
(bench/train_step.py --device): the K4L2 batch (71 atoms, 4 blocks, 64 experts, 5 heads) and the
350-atom batch (perf_check's max_atoms per rank); our step with the lean kernels and with the
composition, fairchem's MLIPTrainEvalUnit sequence, in fp32; fails where our lean step reads the
host.  In the CPU proof: the K4L2 batch, one timed step each."""
from ..report.train import versus_train
from ..runner import STDOUT
from .versus_setup import SETUP_RESERVE, Versus, versus_setup


def train_step_args(check):
    if check.mode == "cpu":
        return ["--steps", "1", "--rounds", "1", "--batches", "k4l2", "--threads", str(check.jobs)]
    return ["--steps", "5", "--rounds", "1", "--batches", "k4l2", "large"]


def st_versus_train(stage):
    check = stage.check
    stage.deadline(check.limits["versus_train"])
    args = train_step_args(check)
    vs = Versus(check)
    stage.plan(SETUP_RESERVE + 60)
    if versus_setup(stage, vs) != 0:
        return 1
    stage.say("== bench/train_step.py %s --device %s" % (" ".join(args), check.device))
    r = stage.limited(60, "train_step.py", vs.python + [check.root + "/bench/train_step.py", check.uma,
                                                       vs.dir + "/train.json"] + args + ["--device", check.device],
                      stdout=vs.dir + "/train.out", stderr=STDOUT, env=vs.env)
    stage.show(vs.dir + "/train.out")
    return stage.report(versus_train, check.details + "/versus_train.json", vs.dir + "/train.json", r)
