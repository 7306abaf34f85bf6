#!/usr/bin/env python3
"""The folder rule of the source tree: each folder of model/ is a library and a layer
(model/CMakeLists.txt lists them), and a file may include only the folders its layer
may use, each dependency one way: the layers below, never above. Generated headers
count as the layer of their .proto files: tgraph/hlo/ (the HLO messages, below
model/hlo) and tgraph/v1/ and grpc/health/ (the API, proto's). LibTorch (torch/, ATen/,
c10/) only in nn and what is built on it, so that the torch-free libraries and tools
build fast and never pull LibTorch in.

Usage: layers_test.py SOURCE_DIR. Prints every offending include with its file and line;
exits 1 when there is one."""
import os
import repo_check
import re
import sys

# The layers, lowest first, and the project folders each may include (its own always
# allowed). A layer may use only layers before it in this list (checked below).
MAY_USE = {
    "model/core": set(),
    "model/tile": {"model/core"},
    "model/store": {"model/core", "model/tile"},
    "model/tools": set(),
    "proto/tgraph/hlo": set(),
    "model/hlo": {"model/core", "model/tile", "model/tools", "proto/tgraph/hlo"},
    "model/synth": {"model/core", "model/tile", "model/tools", "model/hlo"},
    "model/nn": {"model/core", "model/tile", "model/store"},
    "model/search": {"model/core", "model/tile", "model/store", "model/nn"},
    "model/train": {"model/core", "model/tile", "model/store", "model/tools", "model/nn"},
    "model/bench": {"model/core", "model/tile", "model/store", "model/tools", "model/nn", "model/search", "model/synth",
                    "model/train"},
    "proto": {"model/core", "model/tile", "model/store", "model/hlo", "proto/tgraph/hlo"},
    "client": {"model/core", "model/tile", "model/tools", "proto"},
    "server": {"model/core", "model/tile", "model/store", "model/tools", "model/nn", "model/search", "proto"},
}
# Folders whose files may include LibTorch.
TORCH = {"model/nn", "model/search", "model/train", "model/bench", "server"}
# The server's headers stay torch-free (only its .cc files run the network), so that the
# gRPC layer and the tests that include them build without LibTorch's headers.
TORCH_FREE_HEADERS = {"server"}

INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')
PROJECT = re.compile(r"^(model/[a-z_]+|proto|client|server)/")
# Generated headers, by the layer of their .proto files.
GENERATED = {"tgraph/hlo/": "proto/tgraph/hlo", "tgraph/v1/": "proto", "grpc/health/": "proto"}


def folder_of(rel):
    parts = rel.split("/")
    if rel.startswith("proto/tgraph/hlo/"):
        return "proto/tgraph/hlo"
    return "/".join(parts[:2]) if parts[0] == "model" else parts[0]


def layer_of_include(path):
    for prefix, layer in GENERATED.items():
        if path.startswith(prefix):
            return layer
    pm = PROJECT.match(path)
    return pm.group(1) if pm else None


def order_errors():
    """Every layer uses only layers listed before it: the rule has one direction."""
    order = list(MAY_USE)
    return [f"layers_test.py: {layer} may use {used}, which is not below it"
            for layer, uses in MAY_USE.items() for used in sorted(uses) if order.index(used) > order.index(layer)]


def check(src):
    errors = order_errors()
    for top in ("model", "proto", "client", "server"):
        for root, _, files in os.walk(os.path.join(src, top)):
            for name in sorted(files):
                if not name.endswith((".h", ".cc")):
                    continue
                rel = os.path.relpath(os.path.join(root, name), src)
                folder = folder_of(rel)
                if folder not in MAY_USE:
                    errors.append(f"{rel}: folder {folder} is not a layer of layers_test.py (add it)")
                    continue
                with open(os.path.join(src, rel), encoding="utf-8") as f:
                    for line_no, line in enumerate(f, 1):
                        m = INCLUDE.match(line)
                        if not m:
                            continue
                        path = m.group(2)
                        header_rule = folder in TORCH_FREE_HEADERS and rel.endswith(".h")
                        if path.split("/")[0] in ("torch", "ATen", "c10"):
                            if folder not in TORCH or header_rule:
                                what = f"the headers of {folder} are" if header_rule else f"{folder} is"
                                errors.append(f"{rel}:{line_no}: includes LibTorch ({path}); {what} torch-free")
                            continue
                        used = layer_of_include(path) if m.group(1) == '"' else None
                        if not used:
                            continue
                        if header_rule and used == "model/nn":
                            errors.append(f"{rel}:{line_no}: includes {path}; the headers of {folder} are "
                                          "torch-free (include it in the .cc file)")
                        if used != folder and used not in MAY_USE[folder]:
                            errors.append(f"{rel}:{line_no}: includes {path}, but {folder} may use only "
                                          f"{', '.join(sorted(MAY_USE[folder] | {folder}))}")
    return errors


if __name__ == "__main__":
    sys.exit(repo_check.run(__doc__, check, "layers: every include follows the folder rule"))
