#!/usr/bin/env python3
"""Generates the tgraph Python package's protobuf and gRPC modules from proto/.

Usage: gen_stubs.py PROTO_DIR OUT_DIR

The modules land inside the `tgraph` package (OUT_DIR/tgraph/v1/ranker_pb2.py, ...), so
nothing is generated into a top-level `grpc` or `google` package that would shadow
grpcio or protobuf. Messages come from protoc (Debian's protobuf-compiler: code for the
protobuf >= 3.20 runtime) when it is installed, else from grpc_tools; the gRPC stubs
from Debian's python3-grpc-tools. The health service is not generated: the client
speaks grpc.health.v1 itself (tgraph/_client.py), so that a process that also imports
grpcio-health-checking never sees the same message defined twice.
"""
import os
import re
import shutil
import subprocess
import sys

MESSAGES = ["tgraph/v1/ranker.proto", "tgraph/hlo/hlo.proto", "tgraph/hlo/tuning.proto"]
SERVICES = ["tgraph/v1/ranker.proto"]


def generate(proto_dir, out_dir):
    try:
        import grpc_tools.protoc  # noqa: F401
    except ImportError:
        sys.exit("gen_stubs.py: grpc_tools is missing: install Debian's python3-grpc-tools, or pip install grpcio-tools")
    os.makedirs(out_dir, exist_ok=True)
    grpc_tools = [sys.executable, "-m", "grpc_tools.protoc", f"-I{proto_dir}"]
    protoc = shutil.which("protoc")
    messages = [protoc, f"-I{proto_dir}"] if protoc else grpc_tools
    for cmd in (messages + [f"--python_out={out_dir}"] + MESSAGES,
                grpc_tools + [f"--grpc_python_out={out_dir}"] + SERVICES):
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit(f"gen_stubs.py: {' '.join(cmd)} failed:\n{r.stderr}")
    for sub in ("tgraph/v1", "tgraph/hlo"):
        open(os.path.join(out_dir, sub, "__init__.py"), "a").close()


def requirements(out_dir):
    """What the generated modules need at run time: protobuf at least the version the
    messages were generated for (their import checks it; 3.20 when they carry no check,
    as protoc 3.x writes them) and grpcio at least the version that wrote the stubs."""
    with open(os.path.join(out_dir, "tgraph", "v1", "ranker_pb2.py")) as f:
        messages = f.read()
    with open(os.path.join(out_dir, "tgraph", "v1", "ranker_pb2_grpc.py")) as f:
        stubs = f.read()
    check = re.search(r"ValidateProtobufRuntimeVersion\(\s*_runtime_version\.Domain\.\w+,\s*(\d+),\s*(\d+),\s*(\d+),",
                      messages)
    made_by = re.search(r"GRPC_GENERATED_VERSION = '([0-9.]+)'", stubs)
    return ["grpcio>=" + made_by.group(1) if made_by else "grpcio",
            "protobuf>=" + (".".join(check.groups()) if check else "3.20")]


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    generate(sys.argv[1], sys.argv[2])
