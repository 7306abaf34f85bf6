#!/usr/bin/env node
// Offline validation of deploy/k8s, run by tests/deploy_test.py:
//   node deploy/validate/validate.js REPO_ROOT TGRAPH_SERVER_BIN TGRAPH_TRAIN_BIN
//
// 1. Every Kubernetes object validates against the Kubernetes OpenAPI schema
//    (kubernetes-models), and every YAML file under deploy/k8s is accounted for.
// 2. The objects agree with each other: Service and PDB selectors, HPA target,
//    volumes (PVCs, generated ConfigMaps), named ports, probe ports and health
//    service names, images, the drain timeout against the grace period, the Indexed
//    Job's completions against --folds and the publish Job's --require_folds, the
//    data-parallel Job's ranks, rendezvous Service and address.
// 3. They agree with the code: every flag in server.flags and in the Jobs' args is a
//    flag of the binary (from its --help), the router hashes on the header the
//    client library sets, and Envoy's upstream is the headless Service.
// 4. The TLS overlay (deploy/k8s-tls) patches objects that exist, validates after its
//    strategic-merge patches, and is consistent: no plaintext gRPC probe is left, the
//    probes run tgraph-client health with its own flags, every certificate path (the
//    server's flags, the probes', Envoy's) lies in a mounted Secret, and Envoy checks
//    the name the probes check.
// Prints one line per check group and exits 1 with every problem listed.
"use strict";

const fs = require("fs");
const path = require("path");
const { execFileSync } = require("child_process");
const YAML = require("yaml");

const [root, serverBin, trainBin] = process.argv.slice(2);
if (!root || !serverBin || !trainBin) {
  console.error("usage: validate.js REPO_ROOT TGRAPH_SERVER_BIN TGRAPH_TRAIN_BIN");
  process.exit(2);
}
const k8s = path.join(root, "deploy", "k8s");
const problems = [];
const fail = (where, what) => problems.push(`${where}: ${what}`);
const rel = (p) => path.relative(root, p);

function parseYamlFile(file) {
  const docs = YAML.parseAllDocuments(fs.readFileSync(file, "utf8"));
  const out = [];
  docs.forEach((d, i) => {
    if (d.errors.length) fail(`${rel(file)} document ${i + 1}`, `YAML: ${d.errors[0].message}`);
    else if (d.contents !== null) out.push(d.toJS());
  });
  return out;
}

// ---- 1. schema ------------------------------------------------------------------
function modelClass(apiVersion, kind) {
  const [group, version] = apiVersion.includes("/") ? apiVersion.split("/") : ["", apiVersion];
  const mod = group ? `kubernetes-models/${group}/${version}/${kind}` : `kubernetes-models/${version}/${kind}`;
  try {
    return require(mod)[kind];
  } catch (e) {
    return null;
  }
}

const kustomization = YAML.parse(fs.readFileSync(path.join(k8s, "kustomization.yaml"), "utf8"));
const objects = [];  // {file, obj}
const accounted = new Set([path.join(k8s, "kustomization.yaml")]);
const generated = new Map();  // ConfigMap name -> {keys}
for (const r of kustomization.resources || []) {
  const file = path.join(k8s, r);
  if (!fs.existsSync(file)) { fail("deploy/k8s/kustomization.yaml", `resource ${r} does not exist`); continue; }
  accounted.add(file);
  for (const obj of parseYamlFile(file)) objects.push({ file, obj });
}
for (const g of kustomization.configMapGenerator || []) {
  const keys = [];
  for (const f of g.files || []) {
    const file = path.join(k8s, f);
    if (!fs.existsSync(file)) fail("deploy/k8s/kustomization.yaml", `configMapGenerator ${g.name}: ${f} does not exist`);
    accounted.add(file);
    keys.push(path.basename(f));
    if (/\.ya?ml$/.test(f) && fs.existsSync(file)) parseYamlFile(file);  // must at least parse
  }
  generated.set(g.name, { keys });
}
const trainingDir = path.join(k8s, "training");
for (const f of fs.readdirSync(trainingDir).filter((f) => /\.ya?ml$/.test(f))) {
  const file = path.join(trainingDir, f);
  accounted.add(file);
  for (const obj of parseYamlFile(file)) objects.push({ file, obj });
}
(function walk(dir) {
  for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) walk(p);
    else if (/\.(ya?ml|flags)$/.test(e.name) && !accounted.has(p))
      fail(rel(p), "not a kustomization resource, generator file or training/ manifest: nothing deploys it");
  }
})(k8s);

let validated = 0;
for (const { file, obj } of objects) {
  const where = `${rel(file)} ${obj.kind}/${obj.metadata && obj.metadata.name}`;
  const Model = obj.apiVersion && obj.kind ? modelClass(obj.apiVersion, obj.kind) : null;
  if (!Model) { fail(where, `unknown apiVersion/kind ${obj.apiVersion}/${obj.kind}`); continue; }
  try {
    new Model(obj).validate();
    validated++;
  } catch (e) {
    fail(where, `schema: ${e.message}`);
  }
}
console.log(`schema: ${validated} of ${objects.length} objects valid (kubernetes-models)`);

// ---- 2. cross-references --------------------------------------------------------
const byKind = (kind) => objects.filter((o) => o.obj.kind === kind);
const name = (o) => o.obj.metadata.name;
const matches = (selector, labels) => Object.entries(selector || {}).every(([k, v]) => labels && labels[k] === v);
const workloads = [...byKind("Deployment"), ...byKind("Job"), ...byKind("CronJob")];
const templateOf = (o) => (o.obj.kind === "CronJob" ? o.obj.spec.jobTemplate.spec.template : o.obj.spec.template);
const podSpec = (o) => templateOf(o).spec;
const podLabels = (o) => (templateOf(o).metadata || {}).labels || {};
const pvcs = new Set(byKind("PersistentVolumeClaim").map(name));
const configMaps = new Set([...generated.keys(), ...byKind("ConfigMap").map(name)]);
const image = kustomization.images.find((i) => i.name === "tgraph");
const fullImage = `${image.newName}:${image.newTag}`;
const flagsText = fs.readFileSync(path.join(k8s, "server.flags"), "utf8");
const flagValue = (text, flag) => {
  const m = text.match(new RegExp(`^--${flag}=(.*)$`, "m"));
  return m ? m[1].trim() : undefined;
};

for (const w of workloads) {
  const where = `${rel(w.file)} ${w.obj.kind}/${name(w)}`;
  const spec = podSpec(w);
  for (const v of spec.volumes || []) {
    if (v.persistentVolumeClaim && !pvcs.has(v.persistentVolumeClaim.claimName))
      fail(where, `volume ${v.name}: no PersistentVolumeClaim ${v.persistentVolumeClaim.claimName} in pvc.yaml`);
    if (v.configMap && !configMaps.has(v.configMap.name))
      fail(where, `volume ${v.name}: no ConfigMap or configMapGenerator named ${v.configMap.name}`);
  }
  for (const c of spec.containers) {
    const mounts = new Set((c.volumeMounts || []).map((m) => m.name));
    for (const v of spec.volumes || []) if (!mounts.has(v.name)) fail(where, `volume ${v.name} is never mounted`);
    for (const m of c.volumeMounts || [])
      if (!(spec.volumes || []).some((v) => v.name === m.name)) fail(where, `mount of undefined volume ${m.name}`);
    const isTgraph = c.image === "tgraph" || c.image.startsWith(image.newName);
    const inTraining = w.file.startsWith(trainingDir);
    if (isTgraph && !inTraining && c.image !== "tgraph")
      fail(where, `image ${c.image}: kustomized manifests use "tgraph" (set by the images entry)`);
    if (isTgraph && inTraining && c.image !== fullImage)
      fail(where, `image ${c.image}: applied without kustomize, it must be the images entry ${fullImage}`);
    const ports = new Map((c.ports || []).map((p) => [p.name, p.containerPort]));
    for (const probe of ["startupProbe", "readinessProbe", "livenessProbe"]) {
      const p = c[probe];
      if (!p) continue;
      if (p.grpc) {
        if (![...ports.values()].includes(p.grpc.port)) fail(where, `${probe}: gRPC port ${p.grpc.port} is not a container port`);
        const want = probe === "readinessProbe" ? "tgraph.v1.Ranker" : "liveness";
        if (isTgraph && p.grpc.service !== want)
          fail(where, `${probe}: health service "${p.grpc.service}", expected "${want}" (docs/api.md, Health)`);
      }
      if (p.tcpSocket && typeof p.tcpSocket.port === "string" && !ports.has(p.tcpSocket.port))
        fail(where, `${probe}: no container port named ${p.tcpSocket.port}`);
    }
    if (name(w) === "tgraph-server") {
      if (!spec.containers.every((x) => x.livenessProbe && x.readinessProbe)) fail(where, "needs liveness and readiness probes");
      if (!c.resources || !c.resources.limits || !c.resources.limits.memory) fail(where, "needs a memory limit");
      const drain = Number(flagValue(flagsText, "drain_timeout_s"));
      const preStop = c.lifecycle && c.lifecycle.preStop && c.lifecycle.preStop.exec
        ? Number(c.lifecycle.preStop.exec.command[1]) : 0;
      if (!(spec.terminationGracePeriodSeconds > drain + preStop))
        fail(where, `terminationGracePeriodSeconds ${spec.terminationGracePeriodSeconds} must exceed --drain_timeout_s ${drain} + preStop ${preStop} s`);
      if (!(c.args || []).some((a) => a === "--flagfile=/etc/tgraph/server.flags"))
        fail(where, "args must pass --flagfile=/etc/tgraph/server.flags");
      if (!(c.volumeMounts || []).some((m) => m.mountPath === "/etc/tgraph"))
        fail(where, "server.flags must be mounted at /etc/tgraph");
      const reg = (c.volumeMounts || []).find((m) => m.mountPath === flagValue(flagsText, "registry"));
      if (!reg) fail(where, `nothing is mounted at the registry path ${flagValue(flagsText, "registry")} of server.flags`);
      else if (!reg.readOnly) fail(where, "servers must mount the registry read-only");
      for (const [flag, portName] of [["address", "grpc"], ["metrics_address", "metrics"]]) {
        const port = Number((flagValue(flagsText, flag) || "").split(":").pop());
        if (ports.get(portName) !== port) fail(where, `container port ${portName} is not the port of --${flag} (${port})`);
      }
    }
  }
}

const isJobService = (s) => s.obj.spec.selector && s.obj.spec.selector["job-name"] !== undefined;
for (const s of byKind("Service").filter((x) => !isJobService(x))) {
  const where = `${rel(s.file)} Service/${name(s)}`;
  const targets = workloads.filter((w) => w.obj.kind === "Deployment" && matches(s.obj.spec.selector, podLabels(w)));
  if (targets.length !== 1) { fail(where, `selector matches ${targets.length} Deployments, expected 1`); continue; }
  const ports = new Set(podSpec(targets[0]).containers.flatMap((c) => (c.ports || []).map((p) => p.name)));
  for (const p of s.obj.spec.ports)
    if (typeof p.targetPort === "string" && !ports.has(p.targetPort)) fail(where, `targetPort ${p.targetPort}: no such named container port`);
}
// Least privilege: no pod gets a service account token (none calls the Kubernetes API),
// the metrics port is only in the Service Prometheus discovers, and a NetworkPolicy
// limits who reaches the servers to gRPC and metrics.
for (const w of workloads)
  if (podSpec(w).automountServiceAccountToken !== false)
    fail(`${rel(w.file)} ${w.obj.kind}/${name(w)}`, "automountServiceAccountToken must be false");
for (const s of byKind("Service"))
  if (name(s) !== "tgraph-server-metrics" && s.obj.spec.ports.some((p) => p.targetPort === "metrics"))
    fail(`${rel(s.file)} Service/${name(s)}`, "exposes the metrics port: only tgraph-server-metrics may");
{
  const server = workloads.find((w) => w.obj.kind === "Deployment" && name(w) === "tgraph-server");
  const policies = byKind("NetworkPolicy").filter((n) => server && matches(n.obj.spec.podSelector.matchLabels, podLabels(server)));
  if (policies.length === 0) fail("deploy/k8s", "no NetworkPolicy selects the tgraph-server pods");
  for (const n of policies) {
    const ports = (n.obj.spec.ingress || []).flatMap((r) => (r.ports || []).map((p) => p.port)).sort();
    if (JSON.stringify(ports) !== JSON.stringify([50051, 9090].sort()))
      fail(`${rel(n.file)} NetworkPolicy/${name(n)}`, `ingress ports ${ports}: expected the gRPC and metrics ports only`);
  }
}
for (const p of byKind("PodDisruptionBudget")) {
  const n = workloads.filter((w) => w.obj.kind === "Deployment" && matches(p.obj.spec.selector.matchLabels, podLabels(w))).length;
  if (n !== 1) fail(`${rel(p.file)} PodDisruptionBudget/${name(p)}`, `selector matches ${n} Deployments, expected 1`);
}
for (const h of byKind("HorizontalPodAutoscaler")) {
  const t = h.obj.spec.scaleTargetRef;
  if (!byKind(t.kind).some((d) => name(d) === t.name)) fail(`${rel(h.file)} HPA/${name(h)}`, `target ${t.kind}/${t.name} does not exist`);
}
for (const d of byKind("Deployment")) {
  if (!matches(d.obj.spec.selector.matchLabels, podLabels(d))) fail(`${rel(d.file)} Deployment/${name(d)}`, "selector does not match the pod labels");
}

// The training Jobs: one pod per fold, publish waits for all of them.
const envOf = (c, n) => (c.env || []).find((x) => x.name === n);
const isDistributed = (j) => j.obj.spec.completionMode === "Indexed" && !!envOf(podSpec(j).containers[0], "WORLD_SIZE");
const train = byKind("Job").find((j) => j.obj.spec.completionMode === "Indexed" && !isDistributed(j));
const publish = byKind("Job").find((j) => (podSpec(j).containers[0].command || []).includes("publish"));
if (!train || !publish) fail("deploy/k8s/training", "needs an Indexed training Job and a publish Job");
else {
  const tc = podSpec(train).containers[0], pc = podSpec(publish).containers[0];
  const arg = (c, flag) => { const a = (c.args || []).find((x) => x.startsWith(`--${flag}=`)); return a && a.split("=").slice(1).join("="); };
  const env = (c, n) => { const e = (c.env || []).find((x) => x.name === n); return e && e.value; };
  const where = `${rel(train.file)} Job/${name(train)}`;
  if (String(train.obj.spec.completions) !== arg(tc, "folds")) fail(where, `completions ${train.obj.spec.completions} must equal --folds ${arg(tc, "folds")}`);
  if (arg(tc, "fold") !== "$(JOB_COMPLETION_INDEX)") fail(where, "--fold must be $(JOB_COMPLETION_INDEX)");
  const idx = (tc.env || []).find((e) => e.name === "JOB_COMPLETION_INDEX");
  if (!idx) fail(where, "JOB_COMPLETION_INDEX must be in env for $(JOB_COMPLETION_INDEX) to expand");
  const runDir = (arg(tc, "run_dir") || "").replace("$(RUN_NAME)", env(tc, "RUN_NAME"));
  const pwhere = `${rel(publish.file)} Job/${name(publish)}`;
  if (arg(pc, "run_dir") !== runDir) fail(pwhere, `--run_dir ${arg(pc, "run_dir")} is not the training Job's ${runDir}`);
  if (arg(pc, "require_folds") !== String(train.obj.spec.completions))
    fail(pwhere, `--require_folds ${arg(pc, "require_folds")} must equal the training Job's completions ${train.obj.spec.completions}`);
  if (arg(pc, "registry") !== flagValue(flagsText, "registry")) fail(pwhere, "--registry differs from the servers' (server.flags)");
}
// Data-parallel training: one rank per pod, all at once, RANK from the completion index,
// rank 0 reachable at <job>-0.<subdomain> through a headless Service of the Job's pods.
const distributed = byKind("Job").filter(isDistributed);
if (distributed.length === 0) fail("deploy/k8s/training", "needs a data-parallel training Job (WORLD_SIZE)");
for (const j of distributed) {
  const where = `${rel(j.file)} Job/${name(j)}`;
  const spec = podSpec(j), c = spec.containers[0];
  const world = Number(envOf(c, "WORLD_SIZE").value);
  if (!(world >= 2)) fail(where, `WORLD_SIZE ${envOf(c, "WORLD_SIZE").value}: expected an integer >= 2`);
  if (j.obj.spec.completions !== world || j.obj.spec.parallelism !== world)
    fail(where, `completions ${j.obj.spec.completions} and parallelism ${j.obj.spec.parallelism} must both equal WORLD_SIZE ${world}`);
  const rank = envOf(c, "RANK");
  if (!rank || !rank.valueFrom || !rank.valueFrom.fieldRef ||
      rank.valueFrom.fieldRef.fieldPath !== "metadata.annotations['batch.kubernetes.io/job-completion-index']")
    fail(where, "RANK must come from the job-completion-index annotation");
  const svc = byKind("Service").find((s) => name(s) === spec.subdomain);
  if (!svc) fail(where, `subdomain ${spec.subdomain}: no Service of that name`);
  else {
    if (svc.obj.spec.clusterIP !== "None") fail(where, `Service ${name(svc)} must be headless (clusterIP: None)`);
    if (!svc.obj.spec.publishNotReadyAddresses) fail(where, `Service ${name(svc)} must publish not-ready addresses (ranks start unready)`);
    if ((svc.obj.spec.selector || {})["job-name"] !== name(j)) fail(where, `Service ${name(svc)} does not select this Job's pods`);
  }
  const master = (envOf(c, "MASTER_ADDR") || {}).value || "";
  const wantMaster = `${name(j)}-0.${spec.subdomain}.${j.obj.metadata.namespace || kustomization.namespace}.svc.cluster.local`;
  if (master !== wantMaster) fail(where, `MASTER_ADDR ${master}: expected rank 0's name ${wantMaster}`);
  const port = Number((envOf(c, "MASTER_PORT") || {}).value);
  if (!(c.ports || []).some((p) => p.containerPort === port)) fail(where, `MASTER_PORT ${port} is not a container port`);
  if ((c.args || []).some((a) => a.startsWith("--registry"))) fail(where, "ranks never publish: publish-job.yaml does");
  const gps = ((c.args || []).find((a) => a.startsWith("--graphs_per_step=")) || "").split("=")[1];
  if (!gps || Number(gps) < 1) fail(where, "--graphs_per_step must be set (> 0), so that the run's steps do not depend on the number of pods");
  const spill = ((c.args || []).find((a) => a.startsWith("--spill_dir=")) || "").split("=")[1];
  if (spill && !(c.volumeMounts || []).some((m) => m.mountPath === spill)) fail(where, `--spill_dir ${spill} is not a mounted volume`);
}
console.log(`references: ${objects.length} objects cross-checked`);

// ---- 3. agreement with the code -------------------------------------------------
function knownFlags(bin) {
  let out;
  try {
    out = execFileSync(bin, ["--help"], { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
  } catch (e) {
    out = (e.stdout || "") + (e.stderr || "");
  }
  // model/tools/tool.h's help: one "  --name=default" line per flag.
  const flags = new Set([...out.matchAll(/^  --([a-z0-9_]+)=/gm)].map((m) => m[1]));
  if (flags.size < 5) fail(bin, "--help listed no flags");
  return flags;
}
const serverFlags = knownFlags(serverBin), trainFlags = knownFlags(trainBin);
for (const line of flagsText.split("\n")) {
  const m = line.match(/^--([a-z0-9_]+)=/);
  if (line.trim() && !line.startsWith("#") && !m) fail("deploy/k8s/server.flags", `not a --flag=value line: ${line}`);
  if (m && !serverFlags.has(m[1])) fail("deploy/k8s/server.flags", `--${m[1]} is not a tgraph-server flag`);
}
for (const j of [...byKind("Job"), ...byKind("CronJob")]) {
  for (const a of podSpec(j).containers[0].args || []) {
    const m = a.match(/^--([a-z0-9_]+)/);
    if (m && !trainFlags.has(m[1])) fail(`${rel(j.file)} ${j.obj.kind}/${name(j)}`, `--${m[1]} is not a tgraph-train flag`);
  }
}
// Fine-tuning reads the store the servers write and publishes where they read.
for (const f of byKind("CronJob").filter((j) => (podSpec(j).containers[0].command || []).includes("finetune"))) {
  const where = `${rel(f.file)} CronJob/${name(f)}`;
  const c = podSpec(f).containers[0];
  const argOf = (flag) => ((c.args || []).find((a) => a.startsWith(`--${flag}=`)) || "").split("=")[1];
  if (argOf("registry") !== flagValue(flagsText, "registry")) fail(where, "--registry differs from the servers' (server.flags)");
  if (argOf("measurements") !== flagValue(flagsText, "measurement_store"))
    fail(where, `--measurements ${argOf("measurements")} is not the servers' --measurement_store ${flagValue(flagsText, "measurement_store")}`);
  for (const path of [argOf("registry"), argOf("measurements")])
    if (!(c.volumeMounts || []).some((m) => m.mountPath === path)) fail(where, `nothing is mounted at ${path}`);
  if (f.obj.spec.concurrencyPolicy !== "Forbid") fail(where, "concurrencyPolicy must be Forbid: two fine-tunes would publish twice");
}
const clientSrc = fs.readFileSync(path.join(root, "client", "client.cc"), "utf8");
const headerSet = (clientSrc.match(/AddMetadata\("([a-z0-9-]+)"/) || [])[1];
// An Envoy configuration routes as the client library expects; returns its parts.
function checkEnvoy(file, envoy) {
  const where = rel(file);
  const listener = envoy.static_resources.listeners[0].filter_chains[0];
  const routes = listener.filters[0].typed_config.route_config.virtual_hosts[0].routes;
  const hashHeader = routes[0].route.hash_policy[0].header.header_name;
  if (!headerSet || hashHeader !== headerSet) fail(where, `hashes on ${hashHeader} but the client sets ${headerSet}`);
  const cluster = envoy.static_resources.clusters.find((c) => c.name === routes[0].route.cluster);
  if (!cluster) { fail(where, `route cluster ${routes[0].route.cluster} is not defined`); return { listener }; }
  if (cluster.lb_policy !== "RING_HASH" && cluster.lb_policy !== "MAGLEV") fail(where, `lb_policy ${cluster.lb_policy} does not use the hash`);
  const addr = cluster.load_assignment.endpoints[0].lb_endpoints[0].endpoint.address.socket_address;
  const [svc, ns] = addr.address.split(".");
  const headless = byKind("Service").find((s) => name(s) === svc);
  if (!headless || headless.obj.spec.clusterIP !== "None") fail(where, `upstream ${svc} is not a headless Service`);
  if (ns !== kustomization.namespace) fail(where, `upstream namespace ${ns} is not the kustomization's ${kustomization.namespace}`);
  const hc = cluster.health_checks[0].grpc_health_check.service_name;
  if (hc !== "tgraph.v1.Ranker") fail(where, `health check service ${hc}, expected tgraph.v1.Ranker`);
  return { listener, cluster };
}
checkEnvoy(path.join(k8s, "envoy", "envoy.yaml"), YAML.parse(fs.readFileSync(path.join(k8s, "envoy", "envoy.yaml"), "utf8")));
console.log(`code: ${serverFlags.size} server flags, ${trainFlags.size} trainer flags, routing header ${headerSet}`);


// ---- 4. the TLS overlay -----------------------------------------------------------
// Kubernetes' strategic merge, as far as these patches use it: maps merge, null
// deletes a key, lists of objects merge on their merge key, other lists are replaced.
const mergeKeys = { containers: "name", initContainers: "name", volumes: "name", env: "name", volumeMounts: "mountPath", ports: "containerPort" };
function strategicMerge(base, patch, field) {
  if (patch === null) return undefined;
  if (Array.isArray(patch)) {
    const key = mergeKeys[field];
    if (!key || !Array.isArray(base)) return patch;
    const out = base.slice();
    for (const p of patch) {
      const i = out.findIndex((b) => b[key] === p[key]);
      if (i >= 0) out[i] = strategicMerge(out[i], p); else out.push(p);
    }
    return out;
  }
  if (patch && typeof patch === "object") {
    const out = Object.assign({}, base && typeof base === "object" && !Array.isArray(base) ? base : {});
    for (const [k, v] of Object.entries(patch)) {
      const m = strategicMerge(out[k], v, k);
      if (m === undefined) delete out[k]; else out[k] = m;
    }
    return out;
  }
  return patch;
}
const tlsDir = path.join(root, "deploy", "k8s-tls");
const tlsRel = "deploy/k8s-tls/kustomization.yaml";
const clientFlags = knownFlags(path.join(path.dirname(path.dirname(serverBin)), "client", "tgraph-client"));
let tlsObjects = 0;
if (!fs.existsSync(path.join(tlsDir, "kustomization.yaml"))) fail(tlsRel, "does not exist");
else {
  const overlay = YAML.parse(fs.readFileSync(path.join(tlsDir, "kustomization.yaml"), "utf8"));
  const tlsAccounted = new Set([path.join(tlsDir, "kustomization.yaml")]);
  if (JSON.stringify(overlay.resources) !== JSON.stringify(["../k8s"])) fail(tlsRel, `resources ${overlay.resources}: expected ../k8s only`);
  if (overlay.namespace !== kustomization.namespace) fail(tlsRel, `namespace ${overlay.namespace} is not the base's ${kustomization.namespace}`);
  const patched = new Map();  // "Kind/name" -> patched object
  for (const pt of overlay.patches || []) {
    const file = path.join(tlsDir, pt.path);
    if (!fs.existsSync(file)) { fail(tlsRel, `patch ${pt.path} does not exist`); continue; }
    tlsAccounted.add(file);
    for (const patch of parseYamlFile(file)) {
      const id = `${patch.kind}/${patch.metadata.name}`;
      const base = patched.get(id) || (objects.find((o) => o.obj.kind === patch.kind && name(o) === patch.metadata.name) || {}).obj;
      if (!base) { fail(`${rel(file)} ${id}`, "patches an object deploy/k8s does not have"); continue; }
      patched.set(id, strategicMerge(base, patch));
    }
  }
  let envoyFile = null;
  for (const g of overlay.configMapGenerator || []) {
    if (g.behavior !== "replace" || !generated.has(g.name)) fail(tlsRel, `configMapGenerator ${g.name}: must replace one of the base's generators`);
    for (const f of g.files || []) {
      const file = path.join(tlsDir, f);
      if (!fs.existsSync(file)) { fail(tlsRel, `configMapGenerator ${g.name}: ${f} does not exist`); continue; }
      tlsAccounted.add(file);
      if (g.name === "tgraph-envoy-config") envoyFile = file;
    }
  }
  (function walk(dir) {
    for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
      const p = path.join(dir, e.name);
      if (e.isDirectory()) walk(p);
      else if (/\.(ya?ml|flags)$/.test(e.name) && !tlsAccounted.has(p)) fail(rel(p), "not a patch or generator file of deploy/k8s-tls: nothing deploys it");
    }
  })(tlsDir);
  for (const [id, obj] of patched) {
    try { new (modelClass(obj.apiVersion, obj.kind))(obj).validate(); tlsObjects++; } catch (e) { fail(`deploy/k8s-tls ${id}`, `schema after the patches: ${e.message}`); }
  }
  // Paths that must lie in a Secret the container mounts.
  const secretMounts = (spec, c) => (c.volumeMounts || []).filter((m) => (spec.volumes || []).some((v) => v.name === m.name && v.secret)).map((m) => m.mountPath);
  const inSecret = (where, what, file, mounts) => {
    if (!mounts.some((m) => file.startsWith(m.replace(/\/?$/, "/")))) fail(where, `${what} ${file} is not in a mounted Secret`);
  };
  const flagOf = (args, flag) => { const a = args.find((x) => x.startsWith(`--${flag}=`)); return a && a.slice(flag.length + 3); };
  let probeName = null;
  const server = patched.get("Deployment/tgraph-server");
  if (!server) fail(tlsRel, "does not patch Deployment/tgraph-server");
  else {
    const where = "deploy/k8s-tls Deployment/tgraph-server";
    const spec = server.spec.template.spec, c = spec.containers.find((x) => x.name === "tgraph-server") || {};
    const mounts = secretMounts(spec, c), args = c.args || [];
    if (!args.includes("--flagfile=/etc/tgraph/server.flags")) fail(where, "args must still pass --flagfile=/etc/tgraph/server.flags");
    for (const a of args) {
      const m = a.match(/^--([a-z0-9_]+)=(.*)$/);
      if (m && m[1] !== "flagfile" && !serverFlags.has(m[1])) fail(where, `--${m[1]} is not a tgraph-server flag`);
      if (m && /^tls_(cert|key|client_ca)$/.test(m[1])) inSecret(where, `--${m[1]}`, m[2], mounts);
    }
    if (!flagOf(args, "tls_cert") || !flagOf(args, "tls_key")) fail(where, "args need --tls_cert and --tls_key");
    const grpcPort = ((c.ports || []).find((p) => p.name === "grpc") || {}).containerPort;
    for (const probe of ["startupProbe", "readinessProbe", "livenessProbe"]) {
      const p = c[probe];
      if (!p) { fail(where, `${probe} is missing`); continue; }
      if (p.grpc) { fail(where, `${probe}: a gRPC probe speaks plaintext, which a TLS server refuses; probe with exec and tgraph-client health`); continue; }
      const cmd = (p.exec && p.exec.command) || [];
      if (cmd[0] !== "tgraph-client" || cmd[1] !== "health") { fail(where, `${probe}: expected exec tgraph-client health, got ${cmd.join(" ")}`); continue; }
      for (const a of cmd.slice(2)) {
        const m = a.match(/^--([a-z0-9_]+)=(.*)$/);
        if (!m) { fail(where, `${probe}: ${a} is not a --flag=value argument`); continue; }
        if (!clientFlags.has(m[1])) fail(where, `${probe}: --${m[1]} is not a tgraph-client flag`);
        if (/^tls_(ca|cert|key)$/.test(m[1])) inSecret(where, `${probe}: --${m[1]}`, m[2], mounts);
      }
      const want = probe === "readinessProbe" ? "tgraph.v1.Ranker" : "liveness";
      if (flagOf(cmd, "service") !== want) fail(where, `${probe}: --service=${flagOf(cmd, "service")}, expected ${want} (docs/api.md, Health)`);
      if (flagOf(cmd, "server") !== `127.0.0.1:${grpcPort}`) fail(where, `${probe}: --server=${flagOf(cmd, "server")}, expected 127.0.0.1:${grpcPort}`);
      if (!flagOf(cmd, "tls_ca")) fail(where, `${probe}: needs --tls_ca (the server's certificate is checked)`);
      if (flagOf(args, "tls_client_ca") && !(flagOf(cmd, "tls_cert") && flagOf(cmd, "tls_key")))
        fail(where, `${probe}: the server asks for client certificates (--tls_client_ca); the probe needs --tls_cert and --tls_key`);
      probeName = flagOf(cmd, "tls_server_name") || probeName;
    }
  }
  const router = patched.get("Deployment/tgraph-router");
  if (!envoyFile) fail(tlsRel, "does not replace tgraph-envoy-config");
  else if (!router) fail(tlsRel, "does not patch Deployment/tgraph-router to mount the certificates");
  else {
    const where = rel(envoyFile);
    const envoy = YAML.parse(fs.readFileSync(envoyFile, "utf8"));
    const { listener, cluster } = checkEnvoy(envoyFile, envoy);
    const spec = router.spec.template.spec, c = spec.containers.find((x) => x.name === "envoy") || {};
    const mounts = secretMounts(spec, c);
    for (const m of fs.readFileSync(envoyFile, "utf8").matchAll(/filename:\s*([^\s}]+)/g)) inSecret(where, "certificate file", m[1], mounts);
    const tlsOf = (t) => t && t.name === "envoy.transport_sockets.tls" && t.typed_config;
    const down = tlsOf(listener.transport_socket), up = cluster && tlsOf(cluster.transport_socket);
    if (!down) fail(where, "the listener has no TLS transport socket");
    else if (down.require_client_certificate !== true && server &&
             server.spec.template.spec.containers.some((x) => flagOf(x.args || [], "tls_client_ca")))
      fail(where, "the servers ask for client certificates but the listener does not");
    if (!up) fail(where, "the upstream cluster has no TLS transport socket: it would speak plaintext to TLS servers");
    else {
      if (up.sni !== probeName) fail(where, `upstream sni ${up.sni} is not the name the probes check (--tls_server_name=${probeName})`);
      const sans = (((up.common_tls_context || {}).validation_context || {}).match_typed_subject_alt_names || []).map((x) => (x.matcher || {}).exact);
      if (!sans.includes(probeName)) fail(where, `the upstream does not check that the servers' certificate names ${probeName}`);
    }
  }
}
console.log(`tls overlay: ${tlsObjects} patched objects valid, probes and certificate paths checked`);

if (problems.length) {
  console.error(`\n${problems.length} problem(s):`);
  for (const p of problems) console.error(`  ${p}`);
  process.exit(1);
}
console.log("deploy/k8s: OK");
