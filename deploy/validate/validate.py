#!/usr/bin/env python3
"""Offline validation of deploy/k8s, run by tests/deploy_test.py:

  validate.py REPO_ROOT TGRAPH_SERVER_BIN TGRAPH_TRAIN_BIN

1. Every Kubernetes object validates against the Kubernetes OpenAPI schema of
   KUBERNETES_VERSION, strictly (an unknown field is an error, as kubectl's strict field
   validation makes it), from the schemas the pinned kubernetes-validate package ships;
   every YAML file under deploy/k8s is accounted for.
2. The objects agree with each other: Service and PDB selectors, HPA target, volumes
   (PVCs, generated ConfigMaps), named ports, probe ports and health service names,
   images, the drain timeout against the grace period, the Indexed Job's completions
   against --folds and the publish Job's --require_folds, the data-parallel Job's ranks,
   rendezvous Service and address.
3. They agree with the code: every flag in server.flags and in the Jobs' args is a flag
   of the binary (from its --help), the router hashes on the header the client library
   sets, and Envoy's upstream is the headless Service.
4. The TLS overlay (deploy/k8s-tls) patches objects that exist, validates after its
   strategic-merge patches, and is consistent: no plaintext gRPC probe is left, the
   probes run tgraph-client health with its own flags, every certificate path (the
   server's flags, the probes', Envoy's) lies in a mounted Secret, and Envoy checks the
   name the probes check.

Prints one line per check group and exits 1 with every problem listed (file, object,
field, what was expected); 2 on a usage error.
"""
import functools
import json
import math
import os
import re
import subprocess
import sys

import yaml

# The Kubernetes release whose API the manifests are written for.
KUBERNETES_VERSION = "1.34"


class Problems:
    def __init__(self, root):
        self.root = root
        self.items = []

    def fail(self, where, what):
        self.items.append(f"{where}: {what}")

    def rel(self, path):
        return os.path.relpath(path, self.root)


def dig(obj, *path):
    """obj[path[0]][path[1]]...; None where a key or an index is missing or the value is
    not a map or list, so that a manifest missing a field is a problem, not a crash."""
    for p in path:
        if isinstance(p, int):
            if not isinstance(obj, list) or not -len(obj) <= p < len(obj):
                return None
        elif not isinstance(obj, dict) or p not in obj:
            return None
        obj = obj[p]
    return obj


def number(value):
    """JavaScript's Number() as the checks need it: a float, NaN for what is not a number
    (a comparison with NaN is false, so a missing value fails the check that needs it)."""
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def load_yaml_file(problems, path):
    """The documents of a YAML file (empty ones dropped); a syntax error is a problem
    naming the file, line and column."""
    try:
        with open(path, encoding="utf-8") as f:
            return [d for d in yaml.safe_load_all(f) if d is not None]
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        at = f" line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problems.fail(f"{problems.rel(path)}{at}", f"YAML: {getattr(e, 'problem', None) or e}")
    except OSError as e:
        problems.fail(problems.rel(path), f"cannot read: {e.strerror}")
    return []


# ---- 1. schema ------------------------------------------------------------------------
class Schemas:
    """kubernetes-validate's strict JSON schemas of one Kubernetes release, each file read
    once (the definitions file is large and every object refers to it)."""

    def __init__(self, version):
        import importlib.resources

        import jsonschema
        import referencing

        self.jsonschema = jsonschema
        self.version = version
        self.dir = importlib.resources.files("kubernetes_validate") / "kubernetes-json-schema" / f"v{version}.0-local-strict"
        if not self.dir.is_dir():
            raise SystemExit(f"validate.py: kubernetes-validate has no schemas of Kubernetes {version} ({self.dir})")
        definitions = referencing.Resource.from_contents(json.loads((self.dir / "_definitions.json").read_text()))
        self.registry = definitions @ referencing.Registry()

    @functools.lru_cache(maxsize=None)
    def validator(self, api_version, kind):
        # rbac.authorization.k8s.io/v1 -> rbac-v1; v1 -> v1 (the package's file names).
        group_version = re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", api_version)
        path = self.dir / f"{kind.lower()}-{group_version}.json"
        if not path.is_file():
            return None
        schema = json.loads(path.read_text())
        return self.jsonschema.Draft202012Validator(schema, registry=self.registry)

    def errors(self, obj):
        """The schema errors of an object, each 'field.path: what'; None for an unknown
        apiVersion/kind."""
        validator = self.validator(str(obj.get("apiVersion")), str(obj.get("kind")))
        if validator is None:
            return None
        out = []
        for e in sorted(validator.iter_errors(obj), key=lambda e: list(map(str, e.absolute_path))):
            field = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in e.absolute_path).lstrip(".")
            out.append(f"{field or '(object)'}: {e.message}")
        return out


def object_id(problems, file, obj):
    return f"{problems.rel(file)} {obj.get('kind')}/{dig(obj, 'metadata', 'name')}"


def check_schema(problems, schemas, file, obj):
    """True when the object validates; otherwise its errors are problems."""
    where = object_id(problems, file, obj)
    errors = schemas.errors(obj)
    if errors is None:
        problems.fail(where, f"unknown apiVersion/kind {obj.get('apiVersion')}/{obj.get('kind')}")
        return False
    for e in errors:
        problems.fail(where, f"schema: {e}")
    return not errors


class Base:
    """deploy/k8s as kustomize and kubectl apply -f training/ would read it."""

    def __init__(self, problems, root):
        self.k8s = os.path.join(root, "deploy", "k8s")
        self.training_dir = os.path.join(self.k8s, "training")
        self.objects = []        # (file, object)
        self.generated = {}      # ConfigMap generator name -> the keys it holds
        kfile = os.path.join(self.k8s, "kustomization.yaml")
        docs = load_yaml_file(problems, kfile)
        self.kustomization = docs[0] if docs and isinstance(docs[0], dict) else {}
        accounted = {kfile}
        for r in self.kustomization.get("resources") or []:
            file = os.path.join(self.k8s, r)
            if not os.path.exists(file):
                problems.fail("deploy/k8s/kustomization.yaml", f"resource {r} does not exist")
                continue
            accounted.add(file)
            self.objects += [(file, o) for o in load_yaml_file(problems, file)]
        for g in self.kustomization.get("configMapGenerator") or []:
            keys = []
            for f in g.get("files") or []:
                file = os.path.join(self.k8s, f)
                if not os.path.exists(file):
                    problems.fail("deploy/k8s/kustomization.yaml", f"configMapGenerator {g.get('name')}: {f} does not exist")
                elif re.search(r"\.ya?ml$", f):
                    load_yaml_file(problems, file)  # must at least parse
                accounted.add(file)
                keys.append(os.path.basename(f))
            self.generated[g.get("name")] = keys
        for f in sorted(os.listdir(self.training_dir)):
            if re.search(r"\.ya?ml$", f):
                file = os.path.join(self.training_dir, f)
                accounted.add(file)
                self.objects += [(file, o) for o in load_yaml_file(problems, file)]
        for file in walk(self.k8s):
            if re.search(r"\.(ya?ml|flags)$", file) and file not in accounted:
                problems.fail(problems.rel(file),
                              "not a kustomization resource, generator file or training/ manifest: nothing deploys it")
        image = next((i for i in self.kustomization.get("images") or [] if i.get("name") == "tgraph"), {})
        self.image_name = str(image.get("newName", ""))
        self.full_image = f"{image.get('newName')}:{image.get('newTag')}"
        self.namespace = self.kustomization.get("namespace")
        try:
            with open(os.path.join(self.k8s, "server.flags"), encoding="utf-8") as f:
                self.flags_text = f.read()
        except OSError as e:
            problems.fail("deploy/k8s/server.flags", f"cannot read: {e.strerror}")
            self.flags_text = ""

    def by_kind(self, kind):
        return [(f, o) for f, o in self.objects if o.get("kind") == kind]

    def flag(self, flag):
        """The value of --flag=value in server.flags, or None."""
        m = re.search(rf"^--{flag}=(.*)$", self.flags_text, re.M)
        return m.group(1).strip() if m else None


def walk(top):
    for dirpath, _, files in os.walk(top):
        for f in sorted(files):
            yield os.path.join(dirpath, f)


def name(obj):
    return dig(obj, "metadata", "name")


def template_of(obj):
    if obj.get("kind") == "CronJob":
        return dig(obj, "spec", "jobTemplate", "spec", "template") or {}
    return dig(obj, "spec", "template") or {}


def pod_spec(obj):
    return template_of(obj).get("spec") or {}


def pod_labels(obj):
    return dig(template_of(obj), "metadata", "labels") or {}


def matches(selector, labels):
    return all(labels.get(k) == v for k, v in (selector or {}).items())


def env_of(container, var):
    return next((e for e in container.get("env") or [] if e.get("name") == var), None)


def arg_of(container, flag):
    """The value of --flag=value among a container's args, or None."""
    prefix = f"--{flag}="
    return next((a[len(prefix):] for a in container.get("args") or [] if str(a).startswith(prefix)), None)


# ---- 2. cross-references --------------------------------------------------------------
def workloads(base):
    return base.by_kind("Deployment") + base.by_kind("Job") + base.by_kind("CronJob")


def check_volumes(problems, base, where, spec, c):
    pvcs = {name(o) for _, o in base.by_kind("PersistentVolumeClaim")}
    config_maps = set(base.generated) | {name(o) for _, o in base.by_kind("ConfigMap")}
    volumes = spec.get("volumes") or []
    for v in volumes:
        claim = dig(v, "persistentVolumeClaim", "claimName")
        if v.get("persistentVolumeClaim") is not None and claim not in pvcs:
            problems.fail(where, f"volume {v.get('name')}: no PersistentVolumeClaim {claim} in pvc.yaml")
        cm = dig(v, "configMap", "name")
        if v.get("configMap") is not None and cm not in config_maps:
            problems.fail(where, f"volume {v.get('name')}: no ConfigMap or configMapGenerator named {cm}")
    mounts = {m.get("name") for m in c.get("volumeMounts") or []}
    for v in volumes:
        if v.get("name") not in mounts:
            problems.fail(where, f"volume {v.get('name')} is never mounted")
    for m in c.get("volumeMounts") or []:
        if not any(v.get("name") == m.get("name") for v in volumes):
            problems.fail(where, f"mount of undefined volume {m.get('name')}")


def check_probes(problems, where, c, is_tgraph):
    ports = {p.get("name"): p.get("containerPort") for p in c.get("ports") or []}
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        p = c.get(probe)
        if not p:
            continue
        if p.get("grpc") is not None:
            port = dig(p, "grpc", "port")
            if port not in ports.values():
                problems.fail(where, f"{probe}: gRPC port {port} is not a container port")
            want = "tgraph.v1.Ranker" if probe == "readinessProbe" else "liveness"
            if is_tgraph and dig(p, "grpc", "service") != want:
                problems.fail(where, f'{probe}: health service "{dig(p, "grpc", "service")}", expected "{want}" '
                              "(docs/api.md, Health)")
        tcp = dig(p, "tcpSocket", "port")
        if isinstance(tcp, str) and tcp not in ports:
            problems.fail(where, f"{probe}: no container port named {tcp}")


def check_server_container(problems, base, where, spec, c):
    """The serving Deployment's container: probes, memory limit, drain against grace,
    the flag file, the read-only registry and the ports of the flags."""
    ports = {p.get("name"): p.get("containerPort") for p in c.get("ports") or []}
    if not all(x.get("livenessProbe") and x.get("readinessProbe") for x in spec.get("containers") or []):
        problems.fail(where, "needs liveness and readiness probes")
    if not dig(c, "resources", "limits", "memory"):
        problems.fail(where, "needs a memory limit")
    drain = number(base.flag("drain_timeout_s"))
    command = dig(c, "lifecycle", "preStop", "exec", "command")
    pre_stop = number(dig(command, 1)) if command else 0
    grace = spec.get("terminationGracePeriodSeconds")
    if not number(grace) > drain + pre_stop:
        problems.fail(where, f"terminationGracePeriodSeconds {grace} must exceed --drain_timeout_s "
                      f"{base.flag('drain_timeout_s')} + preStop {dig(command, 1) or 0} s")
    if "--flagfile=/etc/tgraph/server.flags" not in (c.get("args") or []):
        problems.fail(where, "args must pass --flagfile=/etc/tgraph/server.flags")
    mounts = c.get("volumeMounts") or []
    if not any(m.get("mountPath") == "/etc/tgraph" for m in mounts):
        problems.fail(where, "server.flags must be mounted at /etc/tgraph")
    reg = next((m for m in mounts if m.get("mountPath") == base.flag("registry")), None)
    if not reg:
        problems.fail(where, f"nothing is mounted at the registry path {base.flag('registry')} of server.flags")
    elif not reg.get("readOnly"):
        problems.fail(where, "servers must mount the registry read-only")
    for flag, port_name in (("address", "grpc"), ("metrics_address", "metrics")):
        port = number((base.flag(flag) or "").split(":")[-1])
        if ports.get(port_name) != port:
            problems.fail(where, f"container port {port_name} is not the port of --{flag} ({base.flag(flag)})")


def check_workloads(problems, base):
    for file, w in workloads(base):
        where = object_id(problems, file, w)
        spec = pod_spec(w)
        in_training = file.startswith(base.training_dir + os.sep)
        for c in spec.get("containers") or []:
            check_volumes(problems, base, where, spec, c)
            image = str(c.get("image", ""))
            is_tgraph = image == "tgraph" or (base.image_name and image.startswith(base.image_name))
            if is_tgraph and not in_training and image != "tgraph":
                problems.fail(where, f'image {image}: kustomized manifests use "tgraph" (set by the images entry)')
            if is_tgraph and in_training and image != base.full_image:
                problems.fail(where, f"image {image}: applied without kustomize, it must be the images entry {base.full_image}")
            check_probes(problems, where, c, is_tgraph)
            if name(w) == "tgraph-server":
                check_server_container(problems, base, where, spec, c)


def check_services(problems, base):
    deployments = base.by_kind("Deployment")
    for file, s in base.by_kind("Service"):
        selector = dig(s, "spec", "selector") or {}
        if "job-name" in selector:
            continue  # a Job's rendezvous Service: checked with its Job
        where = object_id(problems, file, s)
        targets = [d for _, d in deployments if matches(selector, pod_labels(d))]
        if len(targets) != 1:
            problems.fail(where, f"selector matches {len(targets)} Deployments, expected 1")
            continue
        named = {p.get("name") for c in pod_spec(targets[0]).get("containers") or [] for p in c.get("ports") or []}
        for p in dig(s, "spec", "ports") or []:
            if isinstance(p.get("targetPort"), str) and p["targetPort"] not in named:
                problems.fail(where, f"targetPort {p['targetPort']}: no such named container port")
    for file, p in base.by_kind("PodDisruptionBudget"):
        n = sum(matches(dig(p, "spec", "selector", "matchLabels"), pod_labels(d)) for _, d in deployments)
        if n != 1:
            problems.fail(f"{problems.rel(file)} PodDisruptionBudget/{name(p)}", f"selector matches {n} Deployments, expected 1")
    for file, h in base.by_kind("HorizontalPodAutoscaler"):
        t = dig(h, "spec", "scaleTargetRef") or {}
        if not any(name(d) == t.get("name") for _, d in base.by_kind(t.get("kind"))):
            problems.fail(f"{problems.rel(file)} HPA/{name(h)}", f"target {t.get('kind')}/{t.get('name')} does not exist")
    for file, d in deployments:
        if not matches(dig(d, "spec", "selector", "matchLabels"), pod_labels(d)):
            problems.fail(object_id(problems, file, d), "selector does not match the pod labels")


def check_least_privilege(problems, base):
    """No pod gets a service account token (none calls the Kubernetes API), the metrics
    port is only in the Service Prometheus discovers, and a NetworkPolicy limits who
    reaches the servers to gRPC and metrics."""
    for file, w in workloads(base):
        if pod_spec(w).get("automountServiceAccountToken") is not False:
            problems.fail(object_id(problems, file, w), "automountServiceAccountToken must be false")
    for file, s in base.by_kind("Service"):
        if name(s) != "tgraph-server-metrics" and any(p.get("targetPort") == "metrics" for p in dig(s, "spec", "ports") or []):
            problems.fail(object_id(problems, file, s), "exposes the metrics port: only tgraph-server-metrics may")
    server = next((d for _, d in base.by_kind("Deployment") if name(d) == "tgraph-server"), None)
    policies = [(f, n) for f, n in base.by_kind("NetworkPolicy")
                if server is not None and matches(dig(n, "spec", "podSelector", "matchLabels"), pod_labels(server))]
    if not policies:
        problems.fail("deploy/k8s", "no NetworkPolicy selects the tgraph-server pods")
    for file, n in policies:
        ports = sorted(str(p.get("port")) for r in dig(n, "spec", "ingress") or [] for p in r.get("ports") or [])
        if ports != sorted(["50051", "9090"]):
            problems.fail(object_id(problems, file, n), f"ingress ports {','.join(ports)}: expected the gRPC and metrics ports only")


def is_distributed(job):
    containers = pod_spec(job).get("containers") or [{}]
    return dig(job, "spec", "completionMode") == "Indexed" and env_of(containers[0], "WORLD_SIZE") is not None


def first_container(obj):
    return dig(pod_spec(obj), "containers", 0) or {}


def check_training_jobs(problems, base):
    """One pod per fold; publish waits for all of them and writes where servers read."""
    jobs = base.by_kind("Job")
    train = next(((f, j) for f, j in jobs if dig(j, "spec", "completionMode") == "Indexed" and not is_distributed(j)), None)
    publish = next(((f, j) for f, j in jobs if "publish" in (first_container(j).get("command") or [])), None)
    if not train or not publish:
        problems.fail("deploy/k8s/training", "needs an Indexed training Job and a publish Job")
        return
    (tfile, tj), (pfile, pj) = train, publish
    tc, pc = first_container(tj), first_container(pj)
    where = object_id(problems, tfile, tj)
    completions = dig(tj, "spec", "completions")
    if str(completions) != arg_of(tc, "folds"):
        problems.fail(where, f"completions {completions} must equal --folds {arg_of(tc, 'folds')}")
    if arg_of(tc, "fold") != "$(JOB_COMPLETION_INDEX)":
        problems.fail(where, "--fold must be $(JOB_COMPLETION_INDEX)")
    if env_of(tc, "JOB_COMPLETION_INDEX") is None:
        problems.fail(where, "JOB_COMPLETION_INDEX must be in env for $(JOB_COMPLETION_INDEX) to expand")
    run_name = (env_of(tc, "RUN_NAME") or {}).get("value")
    run_dir = (arg_of(tc, "run_dir") or "").replace("$(RUN_NAME)", str(run_name), 1)
    pwhere = object_id(problems, pfile, pj)
    if arg_of(pc, "run_dir") != run_dir:
        problems.fail(pwhere, f"--run_dir {arg_of(pc, 'run_dir')} is not the training Job's {run_dir}")
    if arg_of(pc, "require_folds") != str(completions):
        problems.fail(pwhere, f"--require_folds {arg_of(pc, 'require_folds')} must equal the training Job's completions {completions}")
    if arg_of(pc, "registry") != base.flag("registry"):
        problems.fail(pwhere, "--registry differs from the servers' (server.flags)")


def check_distributed_jobs(problems, base):
    """One rank per pod, all at once, RANK from the completion index, rank 0 reachable at
    <job>-0.<subdomain> through a headless Service of the Job's pods."""
    distributed = [(f, j) for f, j in base.by_kind("Job") if is_distributed(j)]
    if not distributed:
        problems.fail("deploy/k8s/training", "needs a data-parallel training Job (WORLD_SIZE)")
    for file, j in distributed:
        where = object_id(problems, file, j)
        spec, c = pod_spec(j), first_container(j)
        world_text = env_of(c, "WORLD_SIZE").get("value")
        world = number(world_text)
        if not (world >= 2 and world == int(world)):
            problems.fail(where, f"WORLD_SIZE {world_text}: expected an integer >= 2")
        completions, parallelism = dig(j, "spec", "completions"), dig(j, "spec", "parallelism")
        if number(completions) != world or number(parallelism) != world:
            problems.fail(where, f"completions {completions} and parallelism {parallelism} must both equal WORLD_SIZE {world_text}")
        if dig(env_of(c, "RANK"), "valueFrom", "fieldRef", "fieldPath") != \
                "metadata.annotations['batch.kubernetes.io/job-completion-index']":
            problems.fail(where, "RANK must come from the job-completion-index annotation")
        subdomain = spec.get("subdomain")
        svc = next((s for _, s in base.by_kind("Service") if name(s) == subdomain), None)
        if svc is None:
            problems.fail(where, f"subdomain {subdomain}: no Service of that name")
        else:
            if dig(svc, "spec", "clusterIP") != "None":
                problems.fail(where, f"Service {name(svc)} must be headless (clusterIP: None)")
            if not dig(svc, "spec", "publishNotReadyAddresses"):
                problems.fail(where, f"Service {name(svc)} must publish not-ready addresses (ranks start unready)")
            if dig(svc, "spec", "selector", "job-name") != name(j):
                problems.fail(where, f"Service {name(svc)} does not select this Job's pods")
        master = (env_of(c, "MASTER_ADDR") or {}).get("value") or ""
        namespace = dig(j, "metadata", "namespace") or base.namespace
        want = f"{name(j)}-0.{subdomain}.{namespace}.svc.cluster.local"
        if master != want:
            problems.fail(where, f"MASTER_ADDR {master}: expected rank 0's name {want}")
        port = number((env_of(c, "MASTER_PORT") or {}).get("value"))
        if not any(p.get("containerPort") == port for p in c.get("ports") or []):
            problems.fail(where, f"MASTER_PORT {(env_of(c, 'MASTER_PORT') or {}).get('value')} is not a container port")
        if any(str(a).startswith("--registry") for a in c.get("args") or []):
            problems.fail(where, "ranks never publish: publish-job.yaml does")
        if not number(arg_of(c, "graphs_per_step")) >= 1:
            problems.fail(where, "--graphs_per_step must be set (> 0), so that the run's steps do not depend on the number of pods")
        spill = arg_of(c, "spill_dir")
        if spill and not any(m.get("mountPath") == spill for m in c.get("volumeMounts") or []):
            problems.fail(where, f"--spill_dir {spill} is not a mounted volume")


# ---- 3. agreement with the code -------------------------------------------------------
def known_flags(problems, binary):
    """The flags a binary's --help lists (model/tools/tool.h: one '  --name=default' line
    per flag); None, and one problem, when it cannot say (the flags are then unchecked,
    not each reported unknown)."""
    try:
        r = subprocess.run([binary, "--help"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        problems.fail(binary, f"cannot run --help: {getattr(e, 'strerror', None) or e}")
        return None
    flags = set(re.findall(r"^  --([a-z0-9_]+)=", r.stdout + r.stderr, re.M))
    if len(flags) < 5:
        problems.fail(binary, "--help listed no flags")
        return None
    return flags


def check_flags(problems, base, server_flags, train_flags):
    for line in base.flags_text.split("\n"):
        m = re.match(r"^--([a-z0-9_]+)=", line)
        if line.strip() and not line.startswith("#") and not m:
            problems.fail("deploy/k8s/server.flags", f"not a --flag=value line: {line}")
        if m and server_flags is not None and m.group(1) not in server_flags:
            problems.fail("deploy/k8s/server.flags", f"--{m.group(1)} is not a tgraph-server flag")
    for file, j in base.by_kind("Job") + base.by_kind("CronJob"):
        for a in first_container(j).get("args") or []:
            m = re.match(r"^--([a-z0-9_]+)", str(a))
            if m and train_flags is not None and m.group(1) not in train_flags:
                problems.fail(object_id(problems, file, j), f"--{m.group(1)} is not a tgraph-train flag")


def check_finetune(problems, base):
    """Fine-tuning reads the store the servers write and publishes where they read."""
    for file, f in base.by_kind("CronJob"):
        c = first_container(f)
        if "finetune" not in (c.get("command") or []):
            continue
        where = object_id(problems, file, f)
        if arg_of(c, "registry") != base.flag("registry"):
            problems.fail(where, "--registry differs from the servers' (server.flags)")
        if arg_of(c, "measurements") != base.flag("measurement_store"):
            problems.fail(where, f"--measurements {arg_of(c, 'measurements')} is not the servers' --measurement_store "
                          f"{base.flag('measurement_store')}")
        for path in (arg_of(c, "registry"), arg_of(c, "measurements")):
            if not any(m.get("mountPath") == path for m in c.get("volumeMounts") or []):
                problems.fail(where, f"nothing is mounted at {path}")
        if dig(f, "spec", "concurrencyPolicy") != "Forbid":
            problems.fail(where, "concurrencyPolicy must be Forbid: two fine-tunes would publish twice")


def routing_header(root):
    """The header client/client.cc sets for the router to hash on."""
    with open(os.path.join(root, "client", "client.cc"), encoding="utf-8") as f:
        m = re.search(r'AddMetadata\("([a-z0-9-]+)"', f.read())
    return m.group(1) if m else None


def check_envoy(problems, base, file, envoy, header):
    """An Envoy configuration routes as the client library expects; returns its listener
    filter chain and upstream cluster (None where missing)."""
    where = problems.rel(file)
    listener = dig(envoy, "static_resources", "listeners", 0, "filter_chains", 0)
    route = dig(listener, "filters", 0, "typed_config", "route_config", "virtual_hosts", 0, "routes", 0, "route")
    if route is None:
        problems.fail(where, "no static_resources.listeners[0].filter_chains[0] route (filters[0] ... routes[0].route)")
        return listener, None
    hash_header = dig(route, "hash_policy", 0, "header", "header_name")
    if not header or hash_header != header:
        problems.fail(where, f"hashes on {hash_header} but the client sets {header}")
    cluster = next((c for c in dig(envoy, "static_resources", "clusters") or [] if c.get("name") == route.get("cluster")), None)
    if cluster is None:
        problems.fail(where, f"route cluster {route.get('cluster')} is not defined")
        return listener, None
    if cluster.get("lb_policy") not in ("RING_HASH", "MAGLEV"):
        problems.fail(where, f"lb_policy {cluster.get('lb_policy')} does not use the hash")
    address = str(dig(cluster, "load_assignment", "endpoints", 0, "lb_endpoints", 0, "endpoint", "address",
                      "socket_address", "address"))
    svc, ns = (address.split(".") + [None])[:2]
    headless = next((s for _, s in base.by_kind("Service") if name(s) == svc), None)
    if headless is None or dig(headless, "spec", "clusterIP") != "None":
        problems.fail(where, f"upstream {svc} is not a headless Service")
    if ns != base.namespace:
        problems.fail(where, f"upstream namespace {ns} is not the kustomization's {base.namespace}")
    hc = dig(cluster, "health_checks", 0, "grpc_health_check", "service_name")
    if hc != "tgraph.v1.Ranker":
        problems.fail(where, f"health check service {hc}, expected tgraph.v1.Ranker")
    return listener, cluster


# ---- 4. the TLS overlay ---------------------------------------------------------------
# Kubernetes' strategic merge, as far as these patches use it: maps merge, null deletes a
# key, lists of objects merge on their merge key, other lists are replaced.
MERGE_KEYS = {"containers": "name", "initContainers": "name", "volumes": "name", "env": "name",
              "volumeMounts": "mountPath", "ports": "containerPort"}
DELETE = object()


def strategic_merge(base, patch, field=None):
    if patch is None:
        return DELETE
    if isinstance(patch, list):
        key = MERGE_KEYS.get(field)
        if not key or not isinstance(base, list):
            return patch
        out = list(base)
        for p in patch:
            i = next((k for k, b in enumerate(out) if isinstance(b, dict) and isinstance(p, dict) and b.get(key) == p.get(key)), None)
            if i is None:
                out.append(p)
            else:
                out[i] = strategic_merge(out[i], p)
        return out
    if isinstance(patch, dict):
        out = dict(base) if isinstance(base, dict) else {}
        for k, v in patch.items():
            merged = strategic_merge(out.get(k), v, k)
            if merged is DELETE:
                out.pop(k, None)
            else:
                out[k] = merged
        return out
    return patch


def flag_in(args, flag):
    prefix = f"--{flag}="
    return next((str(a)[len(prefix):] for a in args if str(a).startswith(prefix)), None)


def secret_mounts(spec, c):
    secrets = {v.get("name") for v in spec.get("volumes") or [] if v.get("secret") is not None}
    return [m.get("mountPath") for m in c.get("volumeMounts") or [] if m.get("name") in secrets]


def in_secret(problems, where, what, file, mounts):
    if not any(str(file).startswith(m.rstrip("/") + "/") for m in mounts):
        problems.fail(where, f"{what} {file} is not in a mounted Secret")


class Overlay:
    """deploy/k8s-tls: the base's objects after the overlay's patches."""

    def __init__(self, problems, root, base):
        self.dir = os.path.join(root, "deploy", "k8s-tls")
        self.rel = "deploy/k8s-tls/kustomization.yaml"
        self.patched = {}       # "Kind/name" -> patched object
        self.envoy_file = None
        kfile = os.path.join(self.dir, "kustomization.yaml")
        docs = load_yaml_file(problems, kfile)
        overlay = docs[0] if docs and isinstance(docs[0], dict) else {}
        accounted = {kfile}
        if overlay.get("resources") != ["../k8s"]:
            problems.fail(self.rel, f"resources {overlay.get('resources')}: expected ../k8s only")
        if overlay.get("namespace") != base.namespace:
            problems.fail(self.rel, f"namespace {overlay.get('namespace')} is not the base's {base.namespace}")
        for pt in overlay.get("patches") or []:
            file = os.path.join(self.dir, str(pt.get("path")))
            if not os.path.exists(file):
                problems.fail(self.rel, f"patch {pt.get('path')} does not exist")
                continue
            accounted.add(file)
            for patch in load_yaml_file(problems, file):
                pid = f"{patch.get('kind')}/{name(patch)}"
                target = self.patched.get(pid) or next(
                    (o for _, o in base.objects if o.get("kind") == patch.get("kind") and name(o) == name(patch)), None)
                if target is None:
                    problems.fail(f"{problems.rel(file)} {pid}", "patches an object deploy/k8s does not have")
                    continue
                self.patched[pid] = strategic_merge(target, patch)
        for g in overlay.get("configMapGenerator") or []:
            if g.get("behavior") != "replace" or g.get("name") not in base.generated:
                problems.fail(self.rel, f"configMapGenerator {g.get('name')}: must replace one of the base's generators")
            for f in g.get("files") or []:
                file = os.path.join(self.dir, f)
                if not os.path.exists(file):
                    problems.fail(self.rel, f"configMapGenerator {g.get('name')}: {f} does not exist")
                    continue
                accounted.add(file)
                if g.get("name") == "tgraph-envoy-config":
                    self.envoy_file = file
        for file in walk(self.dir):
            if re.search(r"\.(ya?ml|flags)$", file) and file not in accounted:
                problems.fail(problems.rel(file), "not a patch or generator file of deploy/k8s-tls: nothing deploys it")


def check_tls_server(problems, server, server_flags, client_flags):
    """The patched server: its TLS flags in Secrets, and probes that run tgraph-client
    health over TLS. Returns the name the probes check (--tls_server_name)."""
    where = "deploy/k8s-tls Deployment/tgraph-server"
    spec = pod_spec(server)
    c = next((x for x in spec.get("containers") or [] if x.get("name") == "tgraph-server"), {})
    mounts, args = secret_mounts(spec, c), c.get("args") or []
    if "--flagfile=/etc/tgraph/server.flags" not in args:
        problems.fail(where, "args must still pass --flagfile=/etc/tgraph/server.flags")
    for a in args:
        m = re.match(r"^--([a-z0-9_]+)=(.*)$", str(a))
        if m and m.group(1) != "flagfile" and server_flags is not None and m.group(1) not in server_flags:
            problems.fail(where, f"--{m.group(1)} is not a tgraph-server flag")
        if m and re.match(r"^tls_(cert|key|client_ca)$", m.group(1)):
            in_secret(problems, where, f"--{m.group(1)}", m.group(2), mounts)
    if not flag_in(args, "tls_cert") or not flag_in(args, "tls_key"):
        problems.fail(where, "args need --tls_cert and --tls_key")
    grpc_port = next((p.get("containerPort") for p in c.get("ports") or [] if p.get("name") == "grpc"), None)
    probe_name = None
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        p = c.get(probe)
        if not p:
            problems.fail(where, f"{probe} is missing")
            continue
        if p.get("grpc") is not None:
            problems.fail(where, f"{probe}: a gRPC probe speaks plaintext, which a TLS server refuses; "
                          "probe with exec and tgraph-client health")
            continue
        cmd = [str(x) for x in dig(p, "exec", "command") or []]
        if cmd[:2] != ["tgraph-client", "health"]:
            problems.fail(where, f"{probe}: expected exec tgraph-client health, got {' '.join(cmd)}")
            continue
        for a in cmd[2:]:
            m = re.match(r"^--([a-z0-9_]+)=(.*)$", a)
            if not m:
                problems.fail(where, f"{probe}: {a} is not a --flag=value argument")
                continue
            if client_flags is not None and m.group(1) not in client_flags:
                problems.fail(where, f"{probe}: --{m.group(1)} is not a tgraph-client flag")
            if re.match(r"^tls_(ca|cert|key)$", m.group(1)):
                in_secret(problems, where, f"{probe}: --{m.group(1)}", m.group(2), mounts)
        want = "tgraph.v1.Ranker" if probe == "readinessProbe" else "liveness"
        if flag_in(cmd, "service") != want:
            problems.fail(where, f"{probe}: --service={flag_in(cmd, 'service')}, expected {want} (docs/api.md, Health)")
        if flag_in(cmd, "server") != f"127.0.0.1:{grpc_port}":
            problems.fail(where, f"{probe}: --server={flag_in(cmd, 'server')}, expected 127.0.0.1:{grpc_port}")
        if not flag_in(cmd, "tls_ca"):
            problems.fail(where, f"{probe}: needs --tls_ca (the server's certificate is checked)")
        if flag_in(args, "tls_client_ca") and not (flag_in(cmd, "tls_cert") and flag_in(cmd, "tls_key")):
            problems.fail(where, f"{probe}: the server asks for client certificates (--tls_client_ca); "
                          "the probe needs --tls_cert and --tls_key")
        probe_name = flag_in(cmd, "tls_server_name") or probe_name
    return probe_name


def check_tls_envoy(problems, base, overlay, header, probe_name):
    """The overlay's Envoy: routes as the base's does, its certificate files in mounted
    Secrets, TLS both ways, and the upstream checks the name the probes check."""
    router = overlay.patched.get("Deployment/tgraph-router")
    server = overlay.patched.get("Deployment/tgraph-server")
    if not overlay.envoy_file:
        problems.fail(overlay.rel, "does not replace tgraph-envoy-config")
        return
    if router is None:
        problems.fail(overlay.rel, "does not patch Deployment/tgraph-router to mount the certificates")
        return
    where = problems.rel(overlay.envoy_file)
    docs = load_yaml_file(problems, overlay.envoy_file)
    envoy = docs[0] if docs else {}
    listener, cluster = check_envoy(problems, base, overlay.envoy_file, envoy, header)
    spec = pod_spec(router)
    c = next((x for x in spec.get("containers") or [] if x.get("name") == "envoy"), {})
    mounts = secret_mounts(spec, c)
    with open(overlay.envoy_file, encoding="utf-8") as f:
        for m in re.finditer(r"filename:\s*([^\s}]+)", f.read()):
            in_secret(problems, where, "certificate file", m.group(1), mounts)

    def tls_of(socket):
        return dig(socket, "typed_config") if dig(socket, "name") == "envoy.transport_sockets.tls" else None

    down = tls_of(dig(listener, "transport_socket"))
    up = tls_of(dig(cluster, "transport_socket")) if cluster else None
    if not down:
        problems.fail(where, "the listener has no TLS transport socket")
    elif down.get("require_client_certificate") is not True and server is not None and any(
            flag_in(x.get("args") or [], "tls_client_ca") for x in pod_spec(server).get("containers") or []):
        problems.fail(where, "the servers ask for client certificates but the listener does not")
    if not up:
        problems.fail(where, "the upstream cluster has no TLS transport socket: it would speak plaintext to TLS servers")
        return
    if up.get("sni") != probe_name:
        problems.fail(where, f"upstream sni {up.get('sni')} is not the name the probes check (--tls_server_name={probe_name})")
    sans = [dig(x, "matcher", "exact") for x in dig(up, "common_tls_context", "validation_context",
                                                    "match_typed_subject_alt_names") or []]
    if probe_name not in sans:
        problems.fail(where, f"the upstream does not check that the servers' certificate names {probe_name}")


def check_tls_overlay(problems, root, base, schemas, server_flags, client_flags, header):
    if not os.path.exists(os.path.join(root, "deploy", "k8s-tls", "kustomization.yaml")):
        problems.fail("deploy/k8s-tls/kustomization.yaml", "does not exist")
        return 0
    overlay = Overlay(problems, root, base)
    valid = 0
    for pid, obj in overlay.patched.items():
        errors = schemas.errors(obj) or []
        for e in errors:
            problems.fail(f"deploy/k8s-tls {pid}", f"schema after the patches: {e}")
        valid += not errors
    server = overlay.patched.get("Deployment/tgraph-server")
    probe_name = None
    if server is None:
        problems.fail(overlay.rel, "does not patch Deployment/tgraph-server")
    else:
        probe_name = check_tls_server(problems, server, server_flags, client_flags)
    check_tls_envoy(problems, base, overlay, header, probe_name)
    return valid


def main(argv):
    if len(argv) != 4:
        print("usage: validate.py REPO_ROOT TGRAPH_SERVER_BIN TGRAPH_TRAIN_BIN", file=sys.stderr)
        return 2
    root, server_bin, train_bin = argv[1:]
    problems = Problems(root)
    schemas = Schemas(KUBERNETES_VERSION)
    base = Base(problems, root)

    valid = sum(check_schema(problems, schemas, f, o) for f, o in base.objects)
    print(f"schema: {valid} of {len(base.objects)} objects valid (Kubernetes {KUBERNETES_VERSION}, strict)")

    check_workloads(problems, base)
    check_services(problems, base)
    check_least_privilege(problems, base)
    check_training_jobs(problems, base)
    check_distributed_jobs(problems, base)
    print(f"references: {len(base.objects)} objects cross-checked")

    server_flags, train_flags = known_flags(problems, server_bin), known_flags(problems, train_bin)
    client_flags = known_flags(problems, os.path.join(os.path.dirname(os.path.dirname(server_bin)), "client", "tgraph-client"))
    check_flags(problems, base, server_flags, train_flags)
    check_finetune(problems, base)
    header = routing_header(root)
    envoy_file = os.path.join(base.k8s, "envoy", "envoy.yaml")
    docs = load_yaml_file(problems, envoy_file)
    check_envoy(problems, base, envoy_file, docs[0] if docs else {}, header)
    print(f"code: {len(server_flags or ())} server flags, {len(train_flags or ())} trainer flags, routing header {header}")

    tls_valid = check_tls_overlay(problems, root, base, schemas, server_flags, client_flags, header)
    print(f"tls overlay: {tls_valid} patched objects valid, probes and certificate paths checked")

    if problems.items:
        print(f"\n{len(problems.items)} problem(s):", file=sys.stderr)
        for p in problems.items:
            print(f"  {p}", file=sys.stderr)
        return 1
    print("deploy/k8s: OK")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
