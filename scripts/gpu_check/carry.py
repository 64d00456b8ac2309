"""The prepared folder travels with the working tree as a named carry path: git must ignore it
(--prepare adds it to .git/info/exclude when it lies in the repository), and together with what
git would carry of the tree (tracked files and the untracked ones it does not ignore) it must stay
under the 64 MiB a run carries."""
import os
import subprocess

from .check import die, log

CARRY_LIMIT = 67108864   # 64 MiB


def folder_bytes(path):
    """du -sb PATH."""
    out = subprocess.run(["du", "-sb", path], capture_output=True, text=True).stdout
    return int(out.split()[0]) if out.split() else 0


def tree_bytes(root):
    """The bytes of what git would carry of the working tree; 0 where git cannot say."""
    try:
        names = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=root,
                               capture_output=True, check=True).stdout.split(b"\0")
    except (OSError, subprocess.CalledProcessError):
        return 0
    return sum(os.lstat(os.path.join(root.encode(), n)).st_size for n in names
               if n and os.path.lexists(os.path.join(root.encode(), n)))


def check_carry(root, folder):
    """Dies where the working tree and FOLDER together are over what a run carries."""
    total, tree = folder_bytes(folder), tree_bytes(root)
    if tree <= 0:
        return
    log("with the working tree (%.1f MB): %.1f MB of the 67.1 MB (64 MiB) a run carries" % (tree / 1e6,
                                                                                           (tree + total) / 1e6))
    if tree + total >= CARRY_LIMIT:
        die("the working tree and %s are over 64 MiB together: they cannot travel" % folder)


def ignore_in_git(root, folder):
    """Adds FOLDER, where it lies in the repository and git does not ignore it yet, to
    .git/info/exclude (a carry path must be ignored by git)."""
    if subprocess.run(["git", "-C", root, "rev-parse", "--git-dir"], capture_output=True).returncode != 0:
        return
    if not (folder + "/").startswith(root + "/"):
        return
    rel = folder[len(root) + 1:]
    if subprocess.run(["git", "-C", root, "check-ignore", "-q", rel + "/"], capture_output=True).returncode == 0:
        return
    exclude = subprocess.run(["git", "-C", root, "rev-parse", "--git-path", "info/exclude"], capture_output=True,
                             text=True).stdout.strip()
    exclude = exclude if exclude.startswith("/") else os.path.join(root, exclude)
    os.makedirs(os.path.dirname(exclude), exist_ok=True)
    with open(exclude, "a") as f:
        f.write("/%s/\n" % rel)
    log("added /%s/ to %s (DIR must be ignored by git to travel as a carry path)" % (rel, exclude))
