#!/usr/bin/env python3
"""Runs a command that must fail: passes only if it exits with the expected
code and its stderr contains the expected message (an exit code of 0, a crash
or another message fails).

usage: expect_error.py CODE MESSAGE -- COMMAND [ARG ...]
"""
import subprocess
import sys


def main():
    if len(sys.argv) < 5 or sys.argv[3] != "--":
        print(__doc__.strip())
        return 2
    code, message, cmd = int(sys.argv[1]), sys.argv[2], sys.argv[4:]
    p = subprocess.run(cmd, capture_output=True, text=True)
    ok = p.returncode == code and message in p.stderr
    print(f"exit code {p.returncode} (expected {code}); stderr: {p.stderr.strip()[-500:]!r}")
    print("PASS" if ok else f"FAIL: expected exit code {code} and a message containing {message!r}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
