#!/usr/bin/env python3
"""Clang's thread-safety analysis (-Wthread-safety) over the sources whose shared state is
guarded by absl::Mutex with ABSL_GUARDED_BY: the server's request path and the
measurement store. GCC builds the project and ignores the annotations; this pass
compiles each of those files with clang for syntax and the analysis only (no code),
with the flags the build gave it (compile_commands.json), and fails on any warning the
analysis gives: a guarded member read or written without its mutex, a lock not held
that a function requires.

Usage: thread_safety_test.py SOURCE_DIR BUILD_DIR [CLANG]. Prints each file's warnings;
exits 1 when there is one, 2 when clang or the compile commands are missing."""
import concurrent.futures
import json
import os
import shlex
import shutil
import subprocess
import sys

# The folders whose .cc files are analysed.
FOLDERS = ("server", "model/store")
# GCC's flags that clang does not take, or that need more than syntax.
DROP = {"-fopenmp", "-fno-trapping-math"}
DROP_PREFIX = ("-fdiagnostics-color", "-o", "-MF", "-MT", "-MD", "-MQ")


def clang_args(entry, clang):
    args = shlex.split(entry["command"]) if "command" in entry else list(entry["arguments"])
    out, skip = [clang], False
    for a in args[1:]:
        if skip:
            skip = False
            continue
        if a in ("-o", "-MF", "-MT", "-MQ", "-c"):
            skip = a != "-c"
            continue
        if a in DROP or a.startswith(DROP_PREFIX) or a == entry["file"]:
            continue
        out.append(a)
    return out + ["-fsyntax-only", "-Wno-everything", "-Wthread-safety", "-Werror=thread-safety", entry["file"]]


def check(src, build, clang):
    commands = os.path.join(build, "compile_commands.json")
    if not os.path.exists(commands):
        print(f"thread_safety_test.py: {commands} is missing (configure with CMAKE_EXPORT_COMPILE_COMMANDS)")
        return 2
    if not shutil.which(clang):
        print(f"thread_safety_test.py: {clang} is not installed (scripts/install-deps --test installs clang)")
        return 2
    entries = [e for e in json.load(open(commands))
               if os.path.relpath(e["file"], src).startswith(tuple(f + "/" for f in FOLDERS))]
    if not entries:
        print("thread_safety_test.py: no source of " + ", ".join(FOLDERS) + " in the compile commands")
        return 1

    def run(e):
        p = subprocess.run(clang_args(e, clang), cwd=e["directory"], capture_output=True, text=True)
        return os.path.relpath(e["file"], src), p.returncode, p.stderr

    failed = 0
    with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        for rel, rc, err in sorted(pool.map(run, entries)):
            if rc != 0:
                failed += 1
                print(f"{rel}:\n{err}")
    if failed:
        print(f"thread_safety_test.py: {failed} of {len(entries)} files fail the analysis")
        return 1
    print(f"thread_safety_test.py: {len(entries)} files of {', '.join(FOLDERS)} pass clang's -Wthread-safety")
    return 0


if __name__ == "__main__":
    if len(sys.argv) not in (3, 4):
        print(__doc__)
        sys.exit(2)
    sys.exit(check(os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2]),
                   sys.argv[3] if len(sys.argv) == 4 else "clang++"))
