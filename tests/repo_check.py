"""The command line that the repository checks (layers_test.py, layout_test.py) share:
one argument, the repository root; print every error and exit 1, or print what held."""
import sys


def run(doc, check, what_held):
    if len(sys.argv) != 2:
        print(doc)
        return 2
    errors = check(sys.argv[1])
    for e in errors:
        print(e)
    if errors:
        return 1
    print(what_held)
    return 0
