#!/usr/bin/env python3
"""Checks of deploy/ against the real tools, registered with ctest (tests/CMakeLists.txt).

  deploy_test.py manifests  --root R --bin-dir B   the Kubernetes manifests validate
      (deploy/validate/validate.py, the TLS overlay deploy/k8s-tls included), broken
      copies of them are refused with the right message, promtool accepts the scrape
      config and the alerting rules, tgraph-server starts with deploy/k8s/server.flags,
      and the TLS overlay's server arguments and probe commands work against a real
      server with mutual TLS;
  deploy_test.py dockerfile --root R --bin-dir B   the binaries the Dockerfile copies
      exist, and scripts/runtime-packages (its runtime stage's package list) resolves
      every library they load to an installed Debian package, with no -dev packages;
  deploy_test.py prometheus --root R --bin-dir B   a real Prometheus (Debian's package)
      on loopback scrapes a running tgraph-server that has ranked one graph; its query
      API returns the server's metrics with the expected values, every expression of
      the Grafana dashboard and every alerting rule evaluates, every metric the
      dashboard uses exists, and TgraphNoModelLoaded turns active for a second server
      that has no model (and for nothing else).

Everything runs on loopback with ephemeral ports and a temporary directory. The tools
(prometheus and promtool from Debian; kubernetes-validate and PyYAML in the test
environment, scripts/test-venv, whose python runs this file) are installed by
scripts/test; a missing one fails the test with what to run.
"""
import argparse
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request


def fail(msg):
    print(f"FAIL: {msg}", file=sys.stderr)
    sys.exit(1)


def check(cond, msg, detail=""):
    """Prints ok: msg, or fails with msg and the detail (a log, a tool's output)."""
    if not cond:
        fail(f"{msg}\n{detail}")
    print(f"ok: {msg}")


def need(tool, hint):
    path = shutil.which(tool)
    if not path:
        fail(f"{tool} not found; {hint}")
    return path


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """tgraph-server on ephemeral loopback ports; ports read from --port_file."""

    def __init__(self, bin_dir, tmp, registry, extra=(), name="server"):
        self.port_file = os.path.join(tmp, f"{name}.ports")
        self.log = open(os.path.join(tmp, f"{name}.log"), "w+")
        args = [os.path.join(bin_dir, "server", "tgraph-server"), *extra, f"--registry={registry}",
                "--address=127.0.0.1:0", "--metrics_address=127.0.0.1:0", f"--port_file={self.port_file}",
                "--poll_interval_s=0.5", "--intra_op_threads=1"]
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT)
        for _ in range(300):
            if os.path.exists(self.port_file) or self.proc.poll() is not None:
                break
            time.sleep(0.1)
        if not os.path.exists(self.port_file):
            fail(f"tgraph-server did not start:\n{self.text()}")
        self.grpc_port, self.metrics_port = (int(x) for x in open(self.port_file).read().split())

    def text(self):
        self.log.flush()
        self.log.seek(0)
        return self.log.read()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                return self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        return self.proc.wait()


# ---------------------------------------------------------------------------------
def validate(root, work_root, bin_dir):
    try:
        import kubernetes_validate  # noqa: F401
        import yaml  # noqa: F401
    except ImportError as e:
        fail(f"{e.name} is missing from {sys.executable}: run scripts/install-deps --test and test with "
             "its environment (scripts/test does)")
    return run([sys.executable, os.path.join(root, "deploy", "validate", "validate.py"), work_root,
                os.path.join(bin_dir, "server", "tgraph-server"), os.path.join(bin_dir, "model", "train", "tgraph-train")])


def broken_copy(root, tmp, name, path, old, new):
    """A copy of deploy/ and client/client.cc with one text replacement in one file."""
    dst = os.path.join(tmp, name)
    shutil.copytree(os.path.join(root, "deploy"), os.path.join(dst, "deploy"))
    os.makedirs(os.path.join(dst, "client"))
    shutil.copy(os.path.join(root, "client", "client.cc"), os.path.join(dst, "client", "client.cc"))
    target = os.path.join(dst, path)
    text = open(target).read()
    if old not in text:
        fail(f"mutation {name}: '{old}' not found in {path}")
    open(target, "w").write(text.replace(old, new, 1))
    return dst


def test_manifests(root, bin_dir):
    r = validate(root, root, bin_dir)
    print(r.stdout, end="")
    check(r.returncode == 0 and "deploy/k8s: OK" in r.stdout, "the manifests in deploy/k8s validate", r.stderr)

    # Each broken copy must be refused, naming the problem.
    mutations = [
        ("schema", "deploy/k8s/deployment.yaml", "containerPort: 50051", "containerPort: grpc-port",
         "containers[0].ports[0].containerPort: 'grpc-port' is not of type 'integer'"),
        ("unknown-field", "deploy/k8s/deployment.yaml", "terminationGracePeriodSeconds: 45",
         "terminationGracePeriodSecond: 45",
         "spec.template.spec: Additional properties are not allowed ('terminationGracePeriodSecond' was unexpected)"),
        ("yaml-syntax", "deploy/k8s/pdb.yaml", "  maxUnavailable: 1\n", "  maxUnavailable: [1\n",
         "deploy/k8s/pdb.yaml line 10, column 11: YAML: expected ',' or ']'"),
        ("probe-port", "deploy/k8s/deployment.yaml", "port: 50051\n              service: tgraph.v1.Ranker",
         "port: 50052\n              service: tgraph.v1.Ranker", "gRPC port 50052 is not a container port"),
        ("liveness-needs-model", "deploy/k8s/deployment.yaml", "port: 50051\n              service: liveness\n            periodSeconds: 10",
         "port: 50051\n              service: tgraph.v1.Ranker\n            periodSeconds: 10", 'expected "liveness"'),
        ("grace", "deploy/k8s/server.flags", "--drain_timeout_s=30", "--drain_timeout_s=60",
         "must exceed --drain_timeout_s 60"),
        ("unknown-flag", "deploy/k8s/server.flags", "--queue_size=16", "--queue_sise=16",
         "--queue_sise is not a tgraph-server flag"),
        ("folds", "deploy/k8s/training/train-job.yaml", "completions: 5", "completions: 4",
         "completions 4 must equal --folds 5"),
        ("publish-early", "deploy/k8s/training/publish-job.yaml", "--require_folds=5", "--require_folds=1",
         "--require_folds 1 must equal"),
        ("selector", "deploy/k8s/service.yaml", "  type: ClusterIP\n  selector:\n    app.kubernetes.io/name: tgraph-server",
         "  type: ClusterIP\n  selector:\n    app.kubernetes.io/name: tgraph-srv", "selector matches 0 Deployments"),
        ("metrics-exposed", "deploy/k8s/service.yaml",
         "      appProtocol: grpc\n---\n# One DNS record",
         "      appProtocol: grpc\n    - name: metrics\n      port: 9090\n      targetPort: metrics\n---\n# One DNS record",
         "exposes the metrics port: only tgraph-server-metrics may"),
        ("sa-token", "deploy/k8s/training/train-job.yaml", "      automountServiceAccountToken: false\n", "",
         "automountServiceAccountToken must be false"),
        ("no-networkpolicy", "deploy/k8s/kustomization.yaml", "  - networkpolicy.yaml\n", "",
         "no NetworkPolicy selects the tgraph-server pods"),
        ("pvc", "deploy/k8s/deployment.yaml", "claimName: tgraph-registry", "claimName: tgraph-reg",
         "no PersistentVolumeClaim tgraph-reg"),
        ("routing-header", "deploy/k8s/envoy/envoy.yaml", "header_name: x-graph-hash", "header_name: x-graph-id",
         "hashes on x-graph-id but the client sets x-graph-hash"),
        ("finetune-store", "deploy/k8s/training/finetune-cronjob.yaml", "--measurements=/var/lib/tgraph/measurements",
         "--measurements=/var/lib/tgraph/measurement", "is not the servers' --measurement_store"),
        ("finetune-overlap", "deploy/k8s/training/finetune-cronjob.yaml", "concurrencyPolicy: Forbid",
         "concurrencyPolicy: Allow", "concurrencyPolicy must be Forbid"),
        ("stray-file", "deploy/k8s/kustomization.yaml", "  - pdb.yaml\n", "", "pdb.yaml: not a kustomization resource"),
        ("dist-world", "deploy/k8s/training/train-distributed-job.yaml", "  parallelism: 4 ", "  parallelism: 2 ",
         "parallelism 2 must both equal WORLD_SIZE 4"),
        ("dist-master", "deploy/k8s/training/train-distributed-job.yaml",
         "value: tgraph-train-dist-nlp-random-001-f0-0.", "value: tgraph-train-dist-nlp-random-001-f0-1.",
         "expected rank 0's name tgraph-train-dist-nlp-random-001-f0-0.tgraph-train-dist-nlp-random-001-f0"),
        ("dist-rank", "deploy/k8s/training/train-distributed-job.yaml",
         "fieldPath: metadata.annotations['batch.kubernetes.io/job-completion-index']\n            - name: MASTER_ADDR",
         "fieldPath: metadata.name\n            - name: MASTER_ADDR", "RANK must come from the job-completion-index"),
        ("dist-headless", "deploy/k8s/training/train-distributed-job.yaml", "  clusterIP: None ", "  clusterIP: 10.0.0.9 ",
         "must be headless"),
        ("dist-steps", "deploy/k8s/training/train-distributed-job.yaml", "            - --graphs_per_step=4\n", "",
         "--graphs_per_step must be set"),
        ("tls-plaintext-probe", "deploy/k8s-tls/server-tls.yaml", "          readinessProbe:\n            grpc: null\n",
         "          readinessProbe:\n", "readinessProbe: a gRPC probe speaks plaintext"),
        ("tls-unmounted", "deploy/k8s-tls/server-tls.yaml", "              mountPath: /etc/tgraph-tls/client\n",
         "              mountPath: /etc/tgraph-tls/probe\n", "--tls_ca /etc/tgraph-tls/client/ca.crt is not in a mounted Secret"),
        ("tls-probe-no-cert", "deploy/k8s-tls/server-tls.yaml",
         "--tls_key=/etc/tgraph-tls/client/tls.key, --tls_server_name=tgraph]\n          livenessProbe:",
         "--tls_server_name=tgraph]\n          livenessProbe:", "the probe needs --tls_cert and --tls_key"),
        ("tls-sni", "deploy/k8s-tls/envoy/envoy.yaml", "sni: tgraph", "sni: tgraph-server",
         "upstream sni tgraph-server is not the name the probes check"),
        ("tls-upstream-plaintext", "deploy/k8s-tls/envoy/envoy.yaml", "      transport_socket:\n        name: envoy.transport_sockets.tls",
         "      transport_socket_unused:\n        name: envoy.transport_sockets.tls",
         "the upstream cluster has no TLS transport socket"),
        ("tls-patch-target", "deploy/k8s-tls/router-tls.yaml", "name: tgraph-router", "name: tgraph-proxy",
         "patches an object deploy/k8s does not have"),
    ]
    tmp = tempfile.mkdtemp(prefix="tgraph-deploy-")
    try:
        for name, path, old, new, expect in mutations:
            work = broken_copy(root, tmp, name, path, old, new)
            r = validate(root, work, bin_dir)
            check(r.returncode == 1 and expect in r.stderr,
                  f"a broken copy ({name}: {path}) is refused with '{expect}'", r.stdout + r.stderr)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    promtool = need("promtool", "run scripts/install-deps --test (Debian package prometheus)")
    r = run([promtool, "check", "config", os.path.join(root, "deploy", "k8s", "prometheus", "scrape-tgraph.yml")])
    check(r.returncode == 0, "promtool accepts deploy/k8s/prometheus/scrape-tgraph.yml and its rules", r.stdout + r.stderr)

    with tempfile.TemporaryDirectory(prefix="tgraph-flags-") as tmp:
        os.makedirs(os.path.join(tmp, "registry"))
        s = Server(bin_dir, tmp, os.path.join(tmp, "registry"),
                   [f"--flagfile={os.path.join(root, 'deploy', 'k8s', 'server.flags')}"])
        code = s.stop()
        log = s.text()
        check(code == 0 and "queue_size=16" in log and "drain_timeout_s=30" in log,
              "tgraph-server starts with deploy/k8s/server.flags, shows its values, and drains on SIGTERM", log)

    test_tls_overlay_probes(root, bin_dir)


def test_tls_overlay_probes(root, bin_dir):
    """The TLS overlay's server arguments and probe commands, run as written with the
    Secrets' paths pointed at scripts/dev-certs files: the server starts with mutual
    TLS, the startup and liveness probes pass, and the readiness probe fails with
    NOT_SERVING while no model is loaded (not with a handshake error)."""
    import yaml
    with open(os.path.join(root, "deploy", "k8s-tls", "server-tls.yaml")) as f:
        container = yaml.safe_load(f)["spec"]["template"]["spec"]["containers"][0]
    with tempfile.TemporaryDirectory(prefix="tgraph-tls-") as tmp:
        r = run([os.path.join(root, "scripts", "dev-certs"), os.path.join(tmp, "certs")])
        check(r.returncode == 0, "scripts/dev-certs makes the certificates", r.stdout + r.stderr)
        secrets = {"server": {"tls.crt": "server.pem", "tls.key": "server.key", "ca.crt": "ca.pem"},
                   "client": {"tls.crt": "client.pem", "tls.key": "client.key", "ca.crt": "ca.pem"}}
        for secret, files in secrets.items():
            os.makedirs(os.path.join(tmp, secret))
            for key, src in files.items():
                shutil.copy(os.path.join(tmp, "certs", src), os.path.join(tmp, secret, key))
        local = lambda a: a.replace("/etc/tgraph-tls/", tmp + "/")  # noqa: E731
        args = [local(a) for a in container["args"] if not a.startswith("--flagfile=")]
        os.makedirs(os.path.join(tmp, "registry"))
        s = Server(bin_dir, tmp, os.path.join(tmp, "registry"), args)
        try:
            check("mutual TLS" in s.text(), "tgraph-server starts with the overlay's TLS arguments (mutual TLS)", s.text())
            for probe, want in [("startupProbe", 0), ("livenessProbe", 0), ("readinessProbe", 1)]:
                cmd = [local(a).replace("127.0.0.1:50051", f"127.0.0.1:{s.grpc_port}")
                       for a in container[probe]["exec"]["command"]]
                cmd[0] = os.path.join(bin_dir, "client", "tgraph-client")
                r = run(cmd, timeout=30)
                said = (r.stdout + r.stderr).strip()
                ok = r.returncode == want and (want == 0 or "NOT_SERVING" in said)
                check(ok, f"the overlay's {probe} exits {want} ({said.splitlines()[-1] if said else ''})", said)
        finally:
            s.stop()


def test_dockerfile(root, bin_dir):
    """The Dockerfile's build stage copies binaries the build makes, and the runtime
    stage's package list (scripts/runtime-packages) covers what they load."""
    text = open(os.path.join(root, "Dockerfile")).read()
    runs = [l for l in text.splitlines() if not l.lstrip().startswith("#")]
    test_env = [l for l in runs if re.search(r"install-deps\s+--test|test-venv|test-requirements|\.cache/tgraph", l)]
    check(not test_env, "the Dockerfile never installs or copies the tests' Python environment", "\n".join(test_env))
    copied = re.findall(r"/build/([\w/.-]+/tgraph-[\w-]+)", text)
    check(len(copied) == 6, f"the Dockerfile copies 6 binaries: {copied}")
    bins = [os.path.join(bin_dir, c) for c in copied]
    missing = [b for b in bins if not os.access(b, os.X_OK)]
    check(not missing, "every binary the Dockerfile copies is a build target", f"missing: {missing}")
    r = run([os.path.join(root, "scripts", "runtime-packages"), *bins])
    check(r.returncode == 0, "scripts/runtime-packages resolves every shared library to a Debian package", r.stderr)
    pkgs = r.stdout.split()
    for want in (r"libtorch\d", r"libgrpc\+\+\d", r"libprotobuf\d", r"libabsl\d", r"libprometheus-cpp-core",
                 r"libopenblas0-pthread", r"libzip\d"):
        check(any(re.match(want, p) for p in pkgs), f"the runtime package list includes {want}", r.stdout)
    check(not any(p.endswith("-dev") or p in ("cmake", "g++", "gcc") for p in pkgs),
          "the runtime package list has no -dev packages or compilers", r.stdout)
    r = run(["dpkg-query", "-W", "-f=${Package} ${Status}\n", *pkgs])
    installed = [l for l in r.stdout.splitlines() if l.endswith("install ok installed")]
    check(len(installed) == len(pkgs), f"all {len(pkgs)} runtime packages are real, installed packages", r.stdout + r.stderr)
    bad = run([os.path.join(root, "scripts", "runtime-packages"), os.path.join(root, "README.md")])
    check(bad.returncode == 2 and "not an executable file" in bad.stderr, "runtime-packages refuses a non-binary", bad.stderr)


# ---------------------------------------------------------------------------------
def http_json(url, timeout=5):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return json.loads(r.read().decode())


def query(prom, expr):
    return http_json(f"{prom}/api/v1/query?" + urllib.parse.urlencode({"query": expr}))


def scalar(prom, expr):
    d = query(prom, expr)
    res = d["data"]["result"]
    return float(res[0]["value"][1]) if res else None


def test_prometheus(root, bin_dir):
    prometheus = need("prometheus", "run scripts/install-deps --test (Debian package prometheus)")
    tmp = tempfile.mkdtemp(prefix="tgraph-prom-")
    server = idle = prom_proc = None
    try:
        # A model to serve: the tiny preset and a one-epoch training run (about a second).
        data, registry = os.path.join(tmp, "data"), os.path.join(tmp, "registry")
        r = run([os.path.join(bin_dir, "model", "synth", "tgraph-synth"), "--out", data, "--preset", "tiny",
                 "--seed", "1", "--collections", "layout:xla:random"])
        check(r.returncode == 0, "tgraph-synth wrote the tiny dataset", r.stderr)
        r = run([os.path.join(bin_dir, "model", "train", "tgraph-train"), "--data", data, "--collection",
                 "layout:xla:random", "--run_dir", os.path.join(tmp, "run"), "--registry", registry, "--profile",
                 "quick", "--folds", "2", "--train_folds", "1", "--keep_folds", "1", "--epochs", "1", "--hidden", "16",
                 "--threads", "1", "--progress=false"])
        check(r.returncode == 0, "tgraph-train published version 1", r.stderr)

        server = Server(bin_dir, tmp, registry)
        # A second server with an empty registry: it must trip TgraphNoModelLoaded.
        os.makedirs(os.path.join(tmp, "empty-registry"))
        idle = Server(bin_dir, tmp, os.path.join(tmp, "empty-registry"), name="idle")
        client = os.path.join(bin_dir, "client", "tgraph-client")
        addr = f"--server=127.0.0.1:{server.grpc_port}"
        graph = sorted(os.listdir(os.path.join(data, "npz", "layout", "xla", "random", "valid")))[0]
        npz = os.path.join(data, "npz", "layout", "xla", "random", "valid", graph)
        for _ in range(2):  # twice: a cache miss, then a hit
            r = run([client, "rank", addr, "--collection=layout:xla:random", f"--npz={npz}", "--top_k=3"])
            check(r.returncode == 0, "tgraph-client ranked a graph through the server", r.stdout + r.stderr)
        m = re.search(r"(\d+) configurations", r.stdout)
        check(m is not None, "tgraph-client printed the number of configurations ranked", r.stdout)
        configs = int(m.group(1))
        run([client, "models", addr])

        # Prometheus: scrape every second, evaluate the deployment's alerting rules.
        prom_port = free_port()
        shutil.copy(os.path.join(root, "deploy", "k8s", "prometheus", "tgraph-rules.yml"), tmp)
        cfg = os.path.join(tmp, "prometheus.yml")
        with open(cfg, "w") as f:
            f.write("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
                    "rule_files:\n  - tgraph-rules.yml\n"
                    "scrape_configs:\n  - job_name: tgraph-server\n    metrics_path: /metrics\n"
                    f"    static_configs:\n      - targets: ['127.0.0.1:{server.metrics_port}', '127.0.0.1:{idle.metrics_port}']\n")
        prom_log = open(os.path.join(tmp, "prometheus.log"), "w+")
        prom_proc = subprocess.Popen([prometheus, f"--config.file={cfg}", f"--storage.tsdb.path={tmp}/tsdb",
                                      f"--web.listen-address=127.0.0.1:{prom_port}"],
                                     stdout=prom_log, stderr=subprocess.STDOUT)
        prom = f"http://127.0.0.1:{prom_port}"
        up = None
        for _ in range(120):
            try:
                up = scalar(prom, 'min(up{job="tgraph-server"}) and count(up{job="tgraph-server"}) == 2')
                if up == 1 and scalar(prom, "sum(tgraph_configs_scored_total)") is not None:
                    break
            except OSError:
                pass
            if prom_proc.poll() is not None:
                prom_log.seek(0)
                fail("prometheus exited:\n" + prom_log.read())
            time.sleep(0.5)
        prom_log.seek(0)
        check(up == 1, "Prometheus scrapes both servers (up == 1)", prom_log.read())
        # A third request while Prometheus watches, so that rates over time have a value.
        r = run([client, "rank", addr, "--collection=layout:xla:random", f"--npz={npz}", "--top_k=3"])
        check(r.returncode == 0, "a third ranking while Prometheus scrapes", r.stdout + r.stderr)
        for _ in range(60):
            if scalar(prom, 'tgraph_requests_total{method="RankConfigs",code="OK"}') == 3:
                break
            time.sleep(0.5)
        time.sleep(2)  # two more scrapes after the increase

        # Values the test knows: 3 RankConfigs OK; every configuration scored once per request.
        check(scalar(prom, 'tgraph_requests_total{method="RankConfigs",code="OK"}') == 3,
              "tgraph_requests_total{method=RankConfigs,code=OK} is 3")
        check(scalar(prom, "sum(tgraph_configs_scored_total)") == 3 * configs,
              f"tgraph_configs_scored_total is 3 x {configs} configurations")
        check(scalar(prom, 'tgraph_model_version{collection="layout:xla:random"}') == 1,
              "tgraph_model_version{collection=layout:xla:random} is 1")
        check(scalar(prom, "sum(tgraph_cache_hits_total)") == 2 and scalar(prom, "sum(tgraph_cache_misses_total)") == 1,
              "the cache counters show one miss, then two hits")
        # The client's first RankConfigs for an unknown graph gets NOT_FOUND, registers, retries.
        check(scalar(prom, 'tgraph_requests_total{method="RankConfigs",code="NOT_FOUND"}') == 1 and
              scalar(prom, 'tgraph_requests_total{method="RegisterGraph",code="OK"}') == 1,
              "one NOT_FOUND then one RegisterGraph: the client registered the graph once, transparently")
        check(scalar(prom, 'sum(tgraph_request_latency_seconds_count{method="RankConfigs"})') == 4,
              "the latency histogram counted all 4 RankConfigs calls")
        check(scalar(prom, 'tgraph_model_loads_total{result="loaded"}') == 1, "one model load, result=loaded")

        # The Grafana dashboard: every metric exists, every expression evaluates.
        names = set(http_json(f"{prom}/api/v1/label/__name__/values")["data"])
        dash = json.load(open(os.path.join(root, "deploy", "grafana", "tgraph-server.json")))
        exprs = [t["expr"] for p in dash["panels"] for t in p.get("targets", [])]
        check(len(exprs) >= 15, f"the dashboard has {len(exprs)} queries")
        used = {n for e in exprs for n in re.findall(r"\btgraph_[a-z_]+", e)}
        missing = sorted(used - names)
        check(not missing, f"all {len(used)} metrics the dashboard uses exist in Prometheus", f"missing: {missing}")
        for e in exprs:
            q = e.replace("$__rate_interval", "1m").replace('"$instance"', '".*"')
            d = query(prom, q)
            if d.get("status") != "success":
                fail(f"dashboard query does not evaluate: {q}: {d}")
        print(f"ok: all {len(exprs)} dashboard queries evaluate")
        q = ('histogram_quantile(0.5, sum by (le) (rate(tgraph_request_latency_seconds_bucket'
             '{method="RankConfigs"}[1m])))')
        v = scalar(prom, q)
        check(v is not None and v > 0, f"the dashboard's RankConfigs p50 latency has a value ({v} s)")

        # Naming conventions: every counter ends in _total and nothing else does; the
        # build and the registered graph are visible without any RankConfigs refresh.
        meta = http_json(f"{prom}/api/v1/metadata")["data"]
        ours = {n: m[0]["type"] for n, m in meta.items() if n.startswith("tgraph_")}
        wrong = sorted(n for n, t in ours.items() if (t == "counter") != n.endswith("_total"))
        check(ours and not wrong, f"all {len(ours)} tgraph metrics: counters, and only counters, end in _total",
              f"wrong: {wrong}")
        check(scalar(prom, 'count(tgraph_build_info{version!="",commit!="",precision!=""} == 1)') == 2,
              "both servers export tgraph_build_info with version, commit and precision")
        check(scalar(prom, "sum(tgraph_registered_graphs)") == 1, "tgraph_registered_graphs counts the registered graph")
        rules_text = open(os.path.join(root, "deploy", "k8s", "prometheus", "tgraph-rules.yml")).read()
        # A labelled family appears with its first sample: store errors only on an error.
        rule_metrics = set(re.findall(r"\btgraph_[a-z_]+", rules_text)) - {"tgraph_measurement_store_errors_total"}
        missing = sorted(rule_metrics - names)
        check(not missing, f"all {len(rule_metrics)} metrics the alerting rules use exist", f"missing: {missing}")

        # The alerting rules load and evaluate without errors.
        groups = []
        for _ in range(20):
            groups = http_json(f"{prom}/api/v1/rules")["data"]["groups"]
            rules = [r for g in groups for r in g["rules"]]
            if rules and all(r.get("lastEvaluation", "").startswith("2") and not r["lastEvaluation"].startswith("0001")
                             for r in rules):
                break
            time.sleep(0.5)
        rules = [r for g in groups for r in g["rules"]]
        bad = [r["name"] for r in rules if r.get("health") != "ok"]
        check(len(rules) == 9 and not bad, f"Prometheus evaluates the {len(rules)} alerting rules, all healthy {bad}")
        active = sorted((r["name"], a["labels"].get("instance")) for r in rules for a in r.get("alerts", []))
        check(active == [("TgraphNoModelLoaded", f"127.0.0.1:{idle.metrics_port}")],
              "only TgraphNoModelLoaded is active, and only for the server without a model", str(active))
    finally:
        if prom_proc and prom_proc.poll() is None:
            prom_proc.terminate()
            prom_proc.wait(20)
        for s in (server, idle):
            if s:
                s.stop()
        shutil.rmtree(tmp, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=["manifests", "dockerfile", "prometheus"])
    ap.add_argument("--root", required=True, help="the repository root")
    ap.add_argument("--bin-dir", required=True, help="the CMake build directory")
    a = ap.parse_args()
    tests = {"manifests": test_manifests, "dockerfile": test_dockerfile, "prometheus": test_prometheus}
    tests[a.what](os.path.abspath(a.root), os.path.abspath(a.bin_dir))


if __name__ == "__main__":
    main()
