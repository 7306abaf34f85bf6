#!/usr/bin/env python3
"""The README's Layout (its indented block under "## Layout") against the tree: every
source file of the listed folders is named under its folder (by its name, or its stem
for a .h/.cc pair; a tool's main file by its file name), every script of scripts/ too,
and every file the block names exists.

Usage: layout_test.py SOURCE_DIR. Prints what is missing or stale; exits 1 when anything is."""
import os
import repo_check
import re
import sys

# The folders whose files the Layout must name (client/python has its own docs).
FOLDERS = ["model/core", "model/tile", "model/store", "model/tools", "proto/tgraph/hlo", "model/hlo", "model/synth", "model/nn",
           "model/search", "model/train", "model/bench", "proto", "server", "client", "scripts", "docs", "fuzz"]
SOURCE = (".h", ".cc", ".proto", ".md")


def layout_entries(readme):
    """folder -> the text of its entry in the Layout block."""
    text = readme.split("\n## Layout\n", 1)[1].split("\n## ", 1)[0]
    entries, current = {}, None
    for line in text.splitlines():
        if not line.startswith("    "):
            continue
        m = re.match(r"^    (\S+)\s", line + " ")
        if m and not line.startswith("     "):
            current = m.group(1).rstrip("/")
            entries[current] = line[len(m.group(0)):]
        elif current:
            entries[current] += " " + line.strip()
    return entries


def names(entry):
    return set(re.findall(r"[A-Za-z0-9_./{},-]+", entry))


def mentioned(stem, name, words):
    return name in words or stem in words or any(w.startswith(stem + ".") or w.startswith(stem + " ") for w in words)


def check(src):
    readme = open(os.path.join(src, "README.md"), encoding="utf-8").read()
    entries = layout_entries(readme)
    errors = []
    for folder in FOLDERS:
        if folder not in entries:
            errors.append(f"README Layout: no entry for {folder}/")
            continue
        words = {w.strip(",.()") for w in names(entries[folder])}
        path = os.path.join(src, folder)
        for name in sorted(os.listdir(path)):
            full = os.path.join(path, name)
            if os.path.isdir(full) or name == "CMakeLists.txt":
                continue
            if folder != "scripts" and not name.endswith(SOURCE):
                continue
            if folder == "proto" and name.endswith(".proto"):
                continue
            stem = name.split(".")[0]
            if not mentioned(stem, name, words):
                errors.append(f"README Layout: {folder}/{name} is not named in the {folder}/ entry")
        # Every file-like name the entry gives exists (in the folder, or under it).
        for w in words:
            if re.fullmatch(r"[A-Za-z0-9_]+\.(h|cc|proto|md)", w):
                found = any(w in files for _, _, files in os.walk(path))
                if not found:
                    errors.append(f"README Layout: the {folder}/ entry names {w}, which does not exist there")
    return errors


if __name__ == "__main__":
    sys.exit(repo_check.run(__doc__, check, "layout: the README names every source file, and only existing ones"))
