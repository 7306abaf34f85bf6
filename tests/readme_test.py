#!/usr/bin/env python3
"""The pages a newcomer reads first stay short and current: the README under 1,200 words,
its "What works" table one row per capability (at most 15 words, a link to the doc that
covers it, whose file exists), no issue numbers anywhere in it; docs/results.md opens
with its headline table and stays one page of current figures (at most 400 lines;
experiments go to the notebook); every notebook entry is in the notebook's index.

Usage: readme_test.py SOURCE_DIR. Prints what is wrong; exits 1 when anything is."""
import os
import re
import sys

import repo_check

MAX_WORDS = 1200
MAX_ROW_WORDS = 15


def what_works_rows(readme):
    text = readme.split("\n## What works\n", 1)[1].split("\n## ", 1)[0]
    return [line for line in text.splitlines() if line.startswith("| ") and not line.startswith("| capability")]


def check(src):
    errors = []
    readme = open(os.path.join(src, "README.md"), encoding="utf-8").read()
    words = len(readme.split())
    if words > MAX_WORDS:
        errors.append(f"README.md: {words} words, at most {MAX_WORDS}")
    for m in re.finditer(r"(?i)\bissues? \d+|#\d{2,}\b", readme):
        errors.append(f"README.md: names an issue ({m.group(0)}): history belongs in CHANGELOG.md")
    if "\n## What works\n" not in readme:
        return errors + ["README.md: no '## What works' section"]
    rows = what_works_rows(readme)
    if not 5 <= len(rows) <= 20:
        errors.append(f"README.md What works: {len(rows)} rows, expected one per capability (5-20)")
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split("|")]
        capability = cells[0]
        if len(capability.split()) > MAX_ROW_WORDS:
            errors.append(f"README.md What works: '{capability}' has {len(capability.split())} words, at most {MAX_ROW_WORDS}")
        links = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", row)
        if not links:
            errors.append(f"README.md What works: '{capability}' links no doc")
        for link in links:
            if not os.path.exists(os.path.join(src, link)):
                errors.append(f"README.md What works: '{capability}' links {link}, which does not exist")
    results = open(os.path.join(src, "docs", "results.md"), encoding="utf-8").read()
    first = re.search(r"^## (.*)$", results, re.M)
    if not first or first.group(1) != "Headline":
        errors.append("docs/results.md: its first section must be '## Headline'")
    if results.count("\n") > 400:
        errors.append(f"docs/results.md: {results.count(chr(10))} lines, at most 400: move experiments to the notebook")
    notebook = os.path.join(src, "docs", "notebook")
    index = open(os.path.join(notebook, "README.md"), encoding="utf-8").read()
    for name in sorted(os.listdir(notebook)):
        if name.endswith(".md") and name != "README.md" and f"({name})" not in index:
            errors.append(f"docs/notebook/README.md: no line for {name}")
    return errors


if __name__ == "__main__":
    sys.exit(repo_check.run(__doc__, check, "readme: short, one row per capability with its doc, results open with a headline"))
