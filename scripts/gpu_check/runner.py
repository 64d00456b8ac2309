"""How the check starts programs and reads the clock: the one place that runs a process, so that
the fast test (tests/gpu_check/) can put a fake in its stead.  A command's output goes where its
caller says: inherited (None), an open file, a path (written anew; STDOUT for stderr: with
stdout); a command under a limit runs under `timeout -k 5 LIMIT`, which exits 124 (or 137, where
it had to kill) when the limit stops it."""
import subprocess
import sys
import time

STDOUT = subprocess.STDOUT
DEVNULL = subprocess.DEVNULL


def exit_status(rc):
    """A process's exit status as a shell gives it (128 + N for a death by signal N)."""
    return 128 - rc if rc < 0 else rc


class Runner:
    """Starts processes (run, capture, output) and reads the clock (now)."""

    def now(self):
        return time.time()

    def run(self, argv, *, stdout=None, stderr=None, cwd=None, env=None, limit_s=None, kill_after_s=None):
        """ARGV's exit status (127 where it cannot be started)."""
        if limit_s is not None:
            argv = ["timeout"] + (["-k", str(kill_after_s)] if kill_after_s else []) + [str(limit_s)] + list(argv)
        opened = []

        def target(where):
            if isinstance(where, str):
                opened.append(open(where, "wb"))
                return opened[-1]
            if hasattr(where, "flush"):
                where.flush()
            return where

        try:
            out, err = target(stdout), target(stderr)
            try:
                return exit_status(subprocess.call(list(argv), stdout=out, stderr=err, cwd=cwd, env=env))
            except OSError as e:
                sink = out if err is STDOUT else err
                message = "%s: %s\n" % (argv[0], e.strerror)
                if hasattr(sink, "write"):
                    sink.write(message.encode())
                else:
                    sys.stderr.write(message)
                return 126 if isinstance(e, PermissionError) else 127
        finally:
            for f in opened:
                f.close()

    def capture(self, argv, *, stderr=None, cwd=None, env=None, limit_s=None):
        """(exit status, ARGV's stdout as text); stderr as for run (None: inherited)."""
        if limit_s is not None:
            argv = ["timeout", str(limit_s)] + list(argv)
        err = open(stderr, "wb") if isinstance(stderr, str) else stderr
        try:
            if hasattr(err, "flush"):
                err.flush()
            r = subprocess.run(list(argv), stdout=subprocess.PIPE, stderr=err, cwd=cwd, env=env)
            return exit_status(r.returncode), r.stdout.decode(errors="replace")
        except OSError as e:
            return (126 if isinstance(e, PermissionError) else 127), ""
        finally:
            if isinstance(stderr, str):
                err.close()

    def output(self, argv, *, env=None, limit_s=None):
        """(exit status, stdout, stderr) of ARGV, both as text."""
        if limit_s is not None:
            argv = ["timeout", str(limit_s)] + list(argv)
        try:
            r = subprocess.run(list(argv), capture_output=True, env=env)
        except OSError as e:
            return (126 if isinstance(e, PermissionError) else 127), "", str(e)
        return exit_status(r.returncode), r.stdout.decode(errors="replace"), r.stderr.decode(errors="replace")
