"""A stage while it runs: its log, its time limit and the commands that share it.

`deadline(WANT_S)` at the stage's start sets its limit to WANT_S, cut to what is left of the
budget, so that the stage ends by its limit and still writes its details.  Its commands share
that limit: `plan(R)` at the start of the stage (or of a group of its commands) gives the sum R
of the reserves (seconds) of the commands to come, and each command runs as
`limited(RESERVE, LABEL, ARGV)`: under `timeout` with what is left beyond the reserves of the
commands after it (the last gets all the rest), or, where less is left than all the reserves,
with its reserve's proportional part of what is left.  So one slow command cannot cut the others
to nothing.  Each command's limit, time and exit status go to details/STAGE.commands.jsonl (into
the summary); one stopped by its limit (exit 124 or 137) is marked cut."""
import contextlib
import json
import os
import threading

from .report.common import CUT


class LogText:
    """The stage's log as a text stream (what the bookkeeping prints goes there)."""

    def __init__(self, log):
        self.log = log

    def write(self, text):
        self.log.write(text.encode())
        return len(text)

    def flush(self):
        self.log.flush()


class Stage:
    def __init__(self, check, name, log):
        self.check, self.name, self.log = check, name, log   # log: the stage's log, a binary file
        self.end = self.limit = self.plan_left = 0
        self.commands = os.path.join(check.details, name + ".commands.jsonl")
        self.lock = threading.Lock()

    def say(self, *lines):
        for line in lines:
            self.log.write((line + "\n").encode())

    def show(self, path, last=None):
        """PATH's text (its LAST lines only, where given) into the log."""
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError as e:
            self.say("cat: %s: %s" % (path, e.strerror))
            return
        if last is not None:
            data = b"".join(data.splitlines(keepends=True)[-last:])
        self.log.write(data)

    def now(self):
        return int(self.check.runner.now())

    def deadline(self, want):
        """Sets the stage's limit: WANT seconds, cut to what is left of the budget."""
        check, limit = self.check, want
        if check.budget_on:
            limit = max(min(want, int(check.budget_s_left())), 1)
        self.end = self.now() + limit
        if limit < want:
            self.say("time limit %d s (%d s, cut to what is left of the budget of %s s)" % (limit, want, check.budget))
        else:
            self.say("time limit %d s" % limit)
        self.limit = limit
        self.plan_left = 0

    def left(self):
        return max(self.end - self.now(), 1)

    def plan(self, reserves):
        self.plan_left = reserves

    def share(self, reserve):
        """This command's limit; takes its reserve off the plan."""
        left = self.left()
        rest = max(self.plan_left - reserve, 0)
        share = left - rest if left >= self.plan_left else left * reserve // self.plan_left
        self.plan_left = rest
        return max(min(share, left), 1)

    def limited(self, reserve, label, argv, *, stdout=None, stderr=None, env=None, cwd=None):
        """ARGV (a program) under its share of the stage's time; its exit status.  Output: the log
        where stdout (stderr) is None."""
        label = label.replace('"', "")
        with self.lock:
            share = self.share(reserve)
            self.say("[limit %d s of %d s left: %s]" % (share, self.left(), label))
        runner = self.check.runner
        t0 = runner.now()
        rc = runner.run(argv, stdout=self.log if stdout is None else stdout,
                        stderr=self.log if stderr is None else stderr, env=self.check.env if env is None else env,
                        cwd=cwd, limit_s=share, kill_after_s=5)
        seconds = float("%.1f" % (runner.now() - t0))
        with self.lock:
            if rc in CUT:
                self.say("[CUT: %s at its limit of %d s (exit %d)]" % (label, share, rc))
            with open(self.commands, "a") as f:
                f.write(json.dumps({"command": label, "limit_s": share, "seconds": seconds, "exit": rc,
                                    "cut": rc in CUT}) + "\n")
        return rc

    def run(self, argv, *, stdout=None, stderr=None, env=None, cwd=None, limit_s=None):
        """ARGV with no share of the stage's limit (a build, a probe under its own LIMIT_S)."""
        return self.check.runner.run(argv, stdout=self.log if stdout is None else stdout,
                                     stderr=self.log if stderr is None else stderr,
                                     env=self.check.env if env is None else env, cwd=cwd, limit_s=limit_s)

    def capture(self, argv, *, env=None, cwd=None, limit_s=None):
        """(exit status, ARGV's stdout); its stderr into the log."""
        return self.check.runner.capture(argv, stderr=self.log, env=self.check.env if env is None else env, cwd=cwd,
                                         limit_s=limit_s)

    def report(self, reader, *args):
        """READER(*ARGS) (a check of report/) with what it prints in the log; its exit status."""
        with contextlib.redirect_stdout(LogText(self.log)):
            return reader(*args) or 0
