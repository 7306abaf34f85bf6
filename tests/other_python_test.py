"""The Python client on a CPython that is not Debian's, as a user installs it: a plain
virtual environment (no system packages) builds the wheel from client/python with pip's
build isolation, so only what pyproject.toml declares is there to build with (from the
wheelhouse scripts/wheelhouse downloads from PyPI at install time; --no-index here),
installs it with the dependencies it declares, and runs the client's tests from there,
importing the installed package rather than the build's. The checkout is left as it was.

Run by ctest (python_client_other_python) with pytest; skipped, saying why, where the
machine has no such CPython (scripts/wheelhouse --python).
"""
import os
import re
import subprocess
import sys
import zipfile

import pytest

sys.path.insert(0, os.path.join(os.environ.get("TGRAPH_SOURCE_DIR", "."), "client", "python", "tests"))
sys.path.insert(0, os.path.join(os.environ.get("TGRAPH_SOURCE_DIR", "."), "client", "python"))
from conftest import BIN, SRC, run  # noqa: E402
import gen_stubs  # noqa: E402

PACKAGE = os.path.join(SRC, "client", "python")


def script(*args):
    return run([os.path.join(SRC, "scripts", "wheelhouse"), *args]).stdout.strip()


def snapshot(root):
    """Every file and folder under root but bytecode caches, with sizes and times."""
    seen = {}
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        for name in dirs + files:
            path = os.path.join(folder, name)
            st = os.stat(path)
            seen[os.path.relpath(path, root)] = (st.st_size, st.st_mtime_ns)
    return seen


@pytest.fixture(scope="module")
def other():
    python, house = script("--python"), script("--path")
    if not python:
        pytest.skip("no CPython other than Debian's on this machine (scripts/wheelhouse --python)")
    if not os.path.exists(os.path.join(house, ".tgraph-stamp")):
        pytest.fail(f"{house} was not made: run scripts/install-deps --test (scripts/wheelhouse)", pytrace=False)
    return python, house


def test_the_runtime_requirements_follow_the_generated_modules(tmp_path):
    """protoc 3.x writes no version check: protobuf 3.20 and any grpcio; a newer protoc's
    check and the stubs' generating version become the wheel's lower bounds (text as
    grpcio-tools 1.85.4 writes it)."""
    v1 = tmp_path / "tgraph" / "v1"
    v1.mkdir(parents=True)
    (v1 / "ranker_pb2.py").write_text("_sym_db = _symbol_database.Default()\n")
    (v1 / "ranker_pb2_grpc.py").write_text("import grpc\n")
    assert gen_stubs.requirements(str(tmp_path)) == ["grpcio", "protobuf>=3.20"]
    (v1 / "ranker_pb2.py").write_text(
        "_runtime_version.ValidateProtobufRuntimeVersion(\n    _runtime_version.Domain.PUBLIC,\n    7,\n    35,\n"
        "    1,\n    '',\n    'tgraph/v1/ranker.proto'\n)\n")
    (v1 / "ranker_pb2_grpc.py").write_text("GRPC_GENERATED_VERSION = '1.85.4'\nGRPC_VERSION = grpc.__version__\n")
    assert gen_stubs.requirements(str(tmp_path)) == ["grpcio>=1.85.4", "protobuf>=7.35.1"]


def test_a_plain_venv_of_another_python_builds_installs_and_passes_the_client_tests(tmp_path, other):
    python, house = other
    venv = tmp_path / "venv"
    run([python, "-m", "venv", str(venv)])
    pip = [str(venv / "bin" / "python"), "-m", "pip", "--disable-pip-version-check", "--no-input"]
    offline = ["--no-index", "--find-links", house]
    before = snapshot(PACKAGE)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PIP_NO_BUILD_ISOLATION")}
    built = subprocess.run(pip + ["wheel", "--no-deps", *offline, PACKAGE, "-w", str(tmp_path / "dist")],
                           capture_output=True, text=True, env=env, cwd=tmp_path)
    assert built.returncode == 0, built.stdout + built.stderr
    assert snapshot(PACKAGE) == before, "building wrote into the checkout"
    wheel, = (tmp_path / "dist").glob("tgraph-*-py3-none-any.whl")
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        metadata = z.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    assert {"tgraph/v1/ranker_pb2.py", "tgraph/v1/ranker_pb2_grpc.py", "tgraph/hlo/tuning_pb2.py",
            "tgraph/triton.py"} <= set(names)
    requires = sorted(re.findall(r"^Requires-Dist: (\S+)", metadata, re.M))
    assert [re.split(r"[<>=]", r)[0] for r in requires] == ["grpcio", "numpy", "protobuf"]

    # grpcio-tools for the tests that generate stubs the way docs/api.md tells other languages to.
    run(pip + ["install", "--quiet", *offline, str(wheel), "pytest", "grpcio-tools"], env=env)
    where = run([str(venv / "bin" / "python"), "-c", "import tgraph; print(tgraph.__file__)"], env=env,
                cwd=tmp_path).stdout.strip()
    assert where.startswith(str(venv)), where
    tests = os.path.join(PACKAGE, "tests")
    r = subprocess.run([str(venv / "bin" / "python"), "-m", "pytest", "-q", "-p", "no:cacheprovider",
                        "-m", "not debian_python", os.path.join(tests, "test_client.py")],
                       capture_output=True, text=True, cwd=tmp_path,
                       env=dict(env, TGRAPH_BIN_DIR=BIN, TGRAPH_SOURCE_DIR=SRC, PYTHONDONTWRITEBYTECODE="1"))
    assert r.returncode == 0, r.stdout[-6000:] + r.stderr[-2000:]
    summary = r.stdout.strip().splitlines()[-1]
    passed = int(re.search(r"(\d+) passed", summary).group(1))
    assert passed >= 25 and "failed" not in summary, summary
