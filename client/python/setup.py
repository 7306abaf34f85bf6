"""pip install client/python (no network: no pyproject.toml, so pip builds in place with
the setuptools it already has). The protobuf and gRPC modules are generated from
../../proto while building (gen_stubs.py; Debian's python3-grpc-tools)."""
import os

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))


class BuildWithStubs(build_py):
    def run(self):
        import gen_stubs  # noqa: E402  (this folder is on sys.path while setup.py runs)
        proto = os.path.join(HERE, "..", "..", "proto")
        if not os.path.isdir(proto):
            raise SystemExit(f"setup.py: {proto} not found: build from a tgraph checkout (client/python)")
        super().run()
        gen_stubs.generate(proto, self.build_lib)


setup(
    name="tgraph",
    version="0.1.0",
    description="Python client of tgraph-server: rank tensor-compiler configurations",
    packages=["tgraph"],
    python_requires=">=3.9",
    install_requires=["grpcio", "protobuf>=3.20", "numpy"],
    cmdclass={"build_py": BuildWithStubs},
)
