#!/usr/bin/env python3
"""Sources a reader can hold in their head: in model/, server/ and client/, no .h or .cc
file over 700 lines and no function over 80 (a namespace-level function or method
definition, from its signature's first line to its closing brace; lambdas count toward
the function that holds them; methods defined inside a class are not counted); the same
for the Python client's package and build files (client/python, its tests aside): no .py
file over 700 lines and no function or method over 80, from its `def` line to its last
(functions defined inside another count toward it).

Usage: size_test.py SOURCE_DIR. Prints every file and function over its limit; exits 1
when there is one."""
import ast
import os
import re
import sys

import repo_check

FOLDERS = ("model", "server", "client")
MAX_FILE_LINES = 700
MAX_FUNCTION_LINES = 80
NOT_FUNCTIONS = re.compile(r"^(namespace|extern|struct|class|enum|union)\b")


def strip(text):
    """`text` with comments, string and character literals emptied (newlines kept), so
    that braces are only the code's."""
    out, i, n = [], 0, len(text)
    while i < n:
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("\n" * text.count("\n", i, j))
            i = j
        elif (m := re.match(r'R"([^(\s]*)\(', text[i:i + 20])):
            end = ")" + m.group(1) + '"'
            j = text.find(end, i)
            j = n if j < 0 else j + len(end)
            out.append('""' + "\n" * text.count("\n", i, j))
            i = j
        elif text[i] in "\"'":
            quote, j = text[i], i + 1
            while j < n and text[j] != quote and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            out.append(quote * 2)
            i = j + 1
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def functions(text):
    """(first line, lines, signature) of every function defined at namespace level."""
    lines = strip(text).split("\n")
    found, depth, start, is_function = [], 0, None, False
    for number, line in enumerate(lines, 1):
        if depth == 0 and start is None and line.strip() and not line.strip().startswith("#"):
            start = number
        for ch in line:
            if ch == ";" and depth == 0:
                start = None
            elif ch == "{":
                if depth == 0:
                    head = " ".join(l.strip() for l in lines[(start or number) - 1:number])
                    if NOT_FUNCTIONS.match(head) and not re.match(r"^(struct|class|enum|union)\b.*\)\s*(const\s*)?\{", head):
                        if head.startswith(("namespace", "extern")):
                            start = None
                            continue  # a namespace's body is namespace level
                        is_function = False
                    else:
                        is_function = "(" in head
                    first = start or number
                depth += 1
            elif ch == "}":
                if depth == 0:  # a namespace closing
                    start = None
                    continue
                depth -= 1
                if depth == 0:
                    if is_function:
                        found.append((first, number - first + 1, lines[first - 1].strip()))
                    start, is_function = None, False
    return found


def python_functions(text):
    """(first line, lines, name) of every function and method not inside another function."""
    found = []

    def visit(node, inside_function):
        for child in ast.iter_child_nodes(node):
            is_function = isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef))
            if is_function and not inside_function:
                found.append((child.lineno, child.end_lineno - child.lineno + 1, f"def {child.name}"))
            visit(child, inside_function or is_function)
    visit(ast.parse(text), False)
    return found


def python_files(src):
    top = os.path.join(src, "client", "python")
    for root, dirs, files in os.walk(top):
        dirs[:] = sorted(d for d in dirs if d not in ("tests", "build", "__pycache__") and not d.endswith(".egg-info"))
        for name in sorted(files):
            if name.endswith(".py") and not name.endswith(("_pb2.py", "_pb2_grpc.py")):
                yield os.path.join(root, name)


def check(src):
    errors = []
    for path in python_files(src):
        rel = os.path.relpath(path, src)
        text = open(path, encoding="utf-8").read()
        count = text.count("\n")
        if count > MAX_FILE_LINES:
            errors.append(f"{rel}: {count} lines, at most {MAX_FILE_LINES}: split it")
        for first, length, signature in python_functions(text):
            if length > MAX_FUNCTION_LINES:
                errors.append(f"{rel}:{first}: {signature} is {length} lines, at most {MAX_FUNCTION_LINES}: split it")
    for top in FOLDERS:
        for root, _, files in os.walk(os.path.join(src, top)):
            for name in sorted(files):
                if not name.endswith((".h", ".cc")):
                    continue
                path = os.path.join(root, name)
                rel = os.path.relpath(path, src)
                text = open(path, encoding="utf-8").read()
                count = text.count("\n")
                if count > MAX_FILE_LINES:
                    errors.append(f"{rel}: {count} lines, at most {MAX_FILE_LINES}: split it")
                for first, length, signature in functions(text):
                    if length > MAX_FUNCTION_LINES:
                        errors.append(f"{rel}:{first}: {signature[:70]} is {length} lines, at most "
                                      f"{MAX_FUNCTION_LINES}: split it")
    return errors


if __name__ == "__main__":
    sys.exit(repo_check.run(__doc__, check, f"sizes: no file over {MAX_FILE_LINES} lines and no function over "
                                            f"{MAX_FUNCTION_LINES} in {', '.join(FOLDERS)}"))
