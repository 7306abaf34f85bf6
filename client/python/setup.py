"""Builds the tgraph package: pip install client/python (pyproject.toml declares what
building needs; pip fetches it). The protobuf and gRPC modules are generated from
../../proto while building (gen_stubs.py), and the protobuf and grpcio runtimes the
package requires are read from what was generated: modules from a newer protoc check
at import that the runtime is at least their version, so the wheel must say so.
Nothing is written into the checkout: setuptools' build/ and egg-info go to a temporary
folder."""
import atexit
import os
import shutil
import sys
import tempfile

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
PROTO = os.path.join(HERE, "..", "..", "proto")
sys.path.insert(0, HERE)
import gen_stubs  # noqa: E402

if not os.path.isdir(PROTO):
    raise SystemExit(f"setup.py: {PROTO} not found: build from a tgraph checkout (client/python)")
SCRATCH = tempfile.mkdtemp(prefix="tgraph-build-")
atexit.register(shutil.rmtree, SCRATCH, ignore_errors=True)
STUBS = os.path.join(SCRATCH, "stubs")
gen_stubs.generate(PROTO, STUBS)


class BuildWithStubs(build_py):
    def run(self):
        super().run()
        shutil.copytree(os.path.join(STUBS, "tgraph"), os.path.join(self.build_lib, "tgraph"), dirs_exist_ok=True)


setup(
    name="tgraph",
    version="0.1.0",
    description="Python client of tgraph-server: rank tensor-compiler configurations",
    packages=["tgraph"],
    python_requires=">=3.9",
    install_requires=gen_stubs.requirements(STUBS) + ["numpy"],
    cmdclass={"build_py": BuildWithStubs},
    options={"build": {"build_base": os.path.join(SCRATCH, "build")},
             "egg_info": {"egg_base": SCRATCH}},
)
