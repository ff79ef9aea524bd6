"""Tests of the Helm chart helm/neardup, rendered by the real helm binary.

Each values variant (the defaults and every helm/neardup/ci/*-values.yaml) is linted, rendered,
validated against the Kubernetes JSON schemas (and the custom resources against their CRDs'
schemas), and checked on the fields that matter when it runs: probes, ports, the config
checksum, the stage workloads, security, selectors, secrets. The rendered neardup.toml and the
container's arguments are fed to the neardup binary's own `--check-config`, so a key the chart
sets that neardup does not know fails here.

Run by tests/run-all.sh after `cargo test` (which builds target/debug/neardup):
    tests/helm/tools.sh install
    .ci/helm/venv/bin/python -m unittest discover -s tests/helm -v
Environment: HELM (default: the one tests/helm/tools.sh installs), NEARDUP_BIN (default:
target/debug/neardup).
"""

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

import kubernetes_validate
import yaml

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "helm" / "neardup"
TOOLS = ROOT / "tests" / "helm" / "tools.sh"
RELEASE = "crawl"
FULL = f"{RELEASE}-neardup"  # the chart's full name for this release
# The oldest Kubernetes the chart supports (Chart.yaml kubeVersion) and the newest schemas.
KUBE_VERSIONS = ("1.25.0", "1.37.0")
CRD_KINDS = {"ServiceMonitor", "PrometheusRule", "ScaledObject", "TriggerAuthentication"}
STAGES = ("sign", "index", "shard", "verify", "cluster", "mirror")


def tool(name):
    return subprocess.run([str(TOOLS), name], check=True, capture_output=True, text=True).stdout.strip()


HELM = os.environ.get("HELM") or tool("helm")
NEARDUP = Path(os.environ.get("NEARDUP_BIN") or ROOT / "target" / "debug" / "neardup")
VARIANTS = {"default": []}
VARIANTS.update({p.name.removesuffix("-values.yaml"): [p] for p in sorted((CHART / "ci").glob("*-values.yaml"))})


class Render:
    """One `helm template` of the chart: the text, per-source sections and parsed manifests."""

    def __init__(self, files=(), sets=()):
        cmd = [HELM, "template", RELEASE, str(CHART), "--namespace", "crawl"]
        for f in files:
            cmd += ["-f", str(f)]
        for s in sets:
            cmd += ["--set", s]
        out = subprocess.run(cmd, capture_output=True, text=True)
        if out.returncode != 0:
            raise RenderError(out.stderr)
        self.text = out.stdout
        self.docs = [d for d in yaml.safe_load_all(self.text) if d]
        # helm separates documents with "---\n# Source: <template>\n"
        self.sections = {}
        for part in self.text.split("---\n"):
            m = re.match(r"# Source: (\S+)\n", part)
            if m:
                self.sections.setdefault(m.group(1), []).append(part[m.end():])

    def of(self, kind):
        return [d for d in self.docs if d["kind"] == kind]

    def one(self, kind, name=None):
        found = [d for d in self.of(kind) if name is None or d["metadata"]["name"] == name]
        assert len(found) == 1, f"{len(found)} {kind} named {name}"
        return found[0]

    def workloads(self):
        return [d for d in self.docs if d["kind"] in ("Deployment", "StatefulSet")]

    def config_toml(self):
        """The release's configuration (not the topics Job's copy)."""
        (cm,) = [d for d in self.of("ConfigMap") if d["metadata"]["labels"].get("app.kubernetes.io/component") != "topics"]
        return cm["data"]["neardup.toml"]

    def topics_job(self):
        """The topics Job and its ConfigMap, or (None, None)."""
        jobs = self.of("Job")
        if not jobs:
            return None, None
        (job,) = jobs
        (cm,) = [d for d in self.of("ConfigMap") if d["metadata"]["name"] == job["metadata"]["name"]]
        return job, cm


class RenderError(Exception):
    pass


def container(workload):
    (c,) = workload["spec"]["template"]["spec"]["containers"]
    return c


def pod_env(workload, pod_ip="10.0.3.7"):
    """The container's environment as the kubelet gives it: secrets stood in for, the pod's IP
    from the downward API, and $(NAME) references to variables defined before expanded."""
    env = {}
    for e in container(workload).get("env", []):
        if "value" in e:
            env[e["name"]] = re.sub(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)", lambda m: env.get(m[1], m[0]), e["value"])
        elif e["valueFrom"].get("fieldRef", {}).get("fieldPath") == "status.podIP":
            env[e["name"]] = pod_ip
        else:
            env[e["name"]] = "from-a-secret"
    return env


def stage_of(workload):
    return workload["metadata"]["labels"]["app.kubernetes.io/component"]


def selects(selector, labels):
    return all(labels.get(k) == v for k, v in selector.items())


def toml_value(toml, key):
    m = re.search(rf'^{re.escape(key)} = "?([^"\n]*)"?$', toml, re.M)
    return m.group(1) if m else None


def seconds(duration):
    m = re.fullmatch(r"(\d+)(ms|s|m|h)", duration)
    assert m, f"unexpected duration {duration!r}"
    return int(m.group(1)) * {"ms": 0.001, "s": 1, "m": 60, "h": 3600}[m.group(2)]


RENDERS = {}


def render(variant):
    if variant not in RENDERS:
        RENDERS[variant] = Render(VARIANTS[variant])
    return RENDERS[variant]


class ChartTest(unittest.TestCase):
    maxDiff = None

    def test_lint_strict_every_variant(self):
        for variant, files in VARIANTS.items():
            cmd = [HELM, "lint", "--strict", str(CHART)]
            for f in files:
                cmd += ["-f", str(f)]
            out = subprocess.run(cmd, capture_output=True, text=True)
            self.assertEqual(out.returncode, 0, f"{variant}:\n{out.stdout}{out.stderr}")

    def test_every_manifest_validates_against_the_kubernetes_schemas(self):
        for variant in VARIANTS:
            for doc in render(variant).docs:
                if doc["kind"] in CRD_KINDS:
                    continue
                for version in KUBE_VERSIONS:
                    with self.subTest(variant=variant, kind=doc["kind"], version=version):
                        try:
                            kubernetes_validate.validate(doc, version, strict=True)
                        except kubernetes_validate.SchemaNotFoundError as e:
                            self.fail(f"no schema: {e.message}")
                        except kubernetes_validate.ValidationError as e:
                            path = ".".join(str(p) for p in e.path)
                            self.fail(f"{doc['kind']}/{doc['metadata']['name']}: {path}: {e.message}")

    def test_the_schema_check_catches_a_broken_manifest(self):
        sts = json.loads(json.dumps(render("default").one("StatefulSet")))
        container(sts)["livenessProbe"]["httpGet"]["port"] = {"name": "http"}
        with self.assertRaises(kubernetes_validate.ValidationError):
            kubernetes_validate.validate(sts, KUBE_VERSIONS[-1], strict=True)
        sts = json.loads(json.dumps(render("default").one("StatefulSet")))
        container(sts)["readinessProbe"]["httpGett"] = {}
        with self.assertRaises(kubernetes_validate.ValidationError):
            kubernetes_validate.validate(sts, KUBE_VERSIONS[-1], strict=True)

    def validate_crds(self, docs):
        node_dir = Path(tool("node-modules")).parent
        script = node_dir / "validate_crds.mjs"
        shutil.copy(Path(__file__).with_name("validate_crds.mjs"), script)
        out = subprocess.run(["node", str(script)], input=json.dumps(docs), capture_output=True, text=True)
        self.assertEqual(out.returncode, 0, out.stderr)
        return json.loads(out.stdout)

    def test_custom_resources_validate_against_their_crd_schemas(self):
        seen = set()
        for variant in VARIANTS:
            docs = [d for d in render(variant).docs if d["kind"] in CRD_KINDS]
            for r in self.validate_crds(docs):
                seen.add(r["kind"].rsplit("/", 1)[1])
                self.assertTrue(r["ok"], f"{variant}: {r}")
        self.assertEqual(seen, CRD_KINDS, "some variant must render every custom resource")
        # ... and the CRD check can fail.
        (so,) = render("keda").of("ScaledObject")
        broken = json.loads(json.dumps(so))
        del broken["spec"]["scaleTargetRef"]["name"]
        broken["spec"]["minReplicaCount"] = "two"
        (r,) = self.validate_crds([broken])
        self.assertFalse(r["ok"])
        self.assertIn("scaleTargetRef", r["error"])

    def promtool_test(self, rule):
        """`promtool check rules` and `promtool test rules` (tests/helm/alerts_test.yml) on the
        groups of `rule`, a rendered PrometheusRule; returns the test run's output."""
        promtool = tool("promtool")
        with tempfile.TemporaryDirectory() as tmp:
            rules = Path(tmp) / "rules.yml"
            rules.write_text(yaml.safe_dump({"groups": rule["spec"]["groups"]}, sort_keys=False))
            shutil.copy(Path(__file__).with_name("alerts_test.yml"), tmp)
            check = subprocess.run([promtool, "check", "rules", str(rules)], capture_output=True, text=True)
            self.assertEqual(check.returncode, 0, check.stdout + check.stderr)
            run = subprocess.run(
                [promtool, "test", "rules", "alerts_test.yml"], cwd=tmp, capture_output=True, text=True
            )
            return run.returncode, run.stdout + run.stderr

    def test_alerts_fire_when_they_should_and_not_otherwise(self):
        # The rendered rules are valid PromQL, and each alert fires on the series of
        # alerts_test.yml that should fire it, with its labels and texts, and on no other.
        (rule,) = render("servicemonitor").of("PrometheusRule")
        code, out = self.promtool_test(rule)
        self.assertEqual(code, 0, out)
        self.assertIn("SUCCESS", out)
        # The tests can fail: with a higher lag threshold the lagging stage raises no alert.
        (rule,) = Render([CHART / "ci" / "servicemonitor-values.yaml"], ["prometheusRule.consumerLagRecords=130000"]).of(
            "PrometheusRule"
        )
        code, out = self.promtool_test(rule)
        self.assertNotEqual(code, 0, out)
        self.assertIn("NeardupConsumerLagHigh", out)
        # Off by default.
        self.assertEqual(render("default").of("PrometheusRule"), [])

    def test_alerts_name_only_metrics_neardup_exports(self):
        (rule,) = render("servicemonitor").of("PrometheusRule")
        exprs = " ".join(r["expr"] for g in rule["spec"]["groups"] for r in g["rules"])
        used = set(re.findall(r"\bneardup_[a-z_]+", exprs))
        sources = "".join(p.read_text() for p in (ROOT / "consumer" / "src").rglob("*.rs"))
        exported = set(re.findall(r'"(neardup_[a-z_]+)"', sources))
        # A histogram's series: NAME_bucket, NAME_count, NAME_sum.
        used = {
            u.rsplit("_", 1)[0] if u not in exported and u.rsplit("_", 1)[-1] in ("bucket", "count", "sum") else u
            for u in used
        }
        self.assertGreaterEqual(len(used), 6, used)
        self.assertEqual(used - exported, set(), "alerts on metrics neardup does not export")
        # Each series the alerts select is the ServiceMonitor's: its job is the Service's name.
        service = render("servicemonitor").one("Service", FULL)
        self.assertIn(f'job="{service["metadata"]["name"]}", namespace="crawl"', exprs)
        self.assertEqual(rule["metadata"]["labels"]["release"], "kube-prometheus-stack")

    def test_probes_ports_and_grace_period(self):
        for variant in VARIANTS:
            r = render(variant)
            toml = r.config_toml()
            port = int(toml_value(toml, "http_listen").rsplit(":", 1)[1])
            drain = seconds(toml_value(toml, "drain_timeout"))
            for w in r.workloads():
                with self.subTest(variant=variant, workload=w["metadata"]["name"]):
                    c = container(w)
                    self.assertEqual(c["ports"], [{"name": "http", "containerPort": port, "protocol": "TCP"}])
                    self.assertEqual(c["livenessProbe"]["httpGet"], {"path": "/healthz", "port": "http"})
                    self.assertEqual(c["startupProbe"]["httpGet"], {"path": "/healthz", "port": "http"})
                    self.assertEqual(c["readinessProbe"]["httpGet"], {"path": "/readyz", "port": "http"})
                    grace = w["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
                    self.assertGreater(grace, drain, "the grace period must outlast the drain")
            svc = r.one("Service", f"{FULL}")
            self.assertEqual(svc["spec"]["ports"][0]["port"], port)
            self.assertEqual(svc["spec"]["ports"][0]["targetPort"], "http")

    def test_the_port_and_drain_follow_their_values(self):
        r = Render(sets=["http.port=8081", "shutdown.drainTimeoutSeconds=120"])
        toml = r.config_toml()
        self.assertEqual(toml_value(toml, "http_listen"), "0.0.0.0:8081")
        self.assertEqual(toml_value(toml, "drain_timeout"), "120s")
        (w,) = r.workloads()
        self.assertEqual(container(w)["ports"][0]["containerPort"], 8081)
        self.assertEqual(w["spec"]["template"]["spec"]["terminationGracePeriodSeconds"], 135)

    def test_the_config_checksum_is_the_rendered_configmap_and_rolls_the_pods(self):
        r = render("default")
        (cm_text,) = r.sections["neardup/templates/configmap.yaml"]
        want = hashlib.sha256(cm_text.encode()).hexdigest()
        for w in r.workloads():
            self.assertEqual(w["spec"]["template"]["metadata"]["annotations"]["checksum/config"], want)
        changed = Render(sets=["config.group=other"])
        (w2,) = changed.workloads()
        self.assertNotEqual(w2["spec"]["template"]["metadata"]["annotations"]["checksum/config"], want)
        unrelated = Render(sets=["podAnnotations.team=crawl"])
        (w3,) = unrelated.workloads()
        self.assertEqual(w3["spec"]["template"]["metadata"]["annotations"]["checksum/config"], want)
        self.assertEqual(w3["spec"]["template"]["metadata"]["annotations"]["team"], "crawl")

    def test_stage_workloads(self):
        default = render("default")
        (w,) = default.workloads()
        self.assertEqual((w["kind"], stage_of(w)), ("StatefulSet", "all"))
        self.assertNotIn("--stage", container(w)["args"])
        self.assertEqual(w["spec"]["volumeClaimTemplates"][0]["metadata"]["name"], "state")
        # the state volume holds the checkpoints
        args = container(w)["args"]
        self.assertEqual(args[args.index("--checkpoint-dir") + 1], "/var/lib/neardup")
        mounts = {m["name"]: m["mountPath"] for m in container(w)["volumeMounts"]}
        self.assertEqual(mounts["state"], "/var/lib/neardup")

        split = render("split")
        kinds = {stage_of(w): w for w in split.workloads()}
        self.assertEqual(sorted(kinds), sorted(STAGES))
        self.assertEqual(kinds["sign"]["kind"], "Deployment")
        self.assertEqual(kinds["sign"]["spec"]["replicas"], 3)
        for stage in ("index", "shard", "verify", "cluster", "mirror"):
            self.assertEqual(kinds[stage]["kind"], "StatefulSet", stage)
            self.assertEqual(kinds[stage]["spec"]["serviceName"], f"{FULL}-{stage}-headless")
            split.one("Service", f"{FULL}-{stage}-headless")
        for stage, w in kinds.items():
            args = container(w)["args"]
            self.assertEqual(args[args.index("--stage") + 1], stage)
            self.assertEqual("--checkpoint-dir" in args, stage != "sign", stage)
        index_pvc = kinds["index"]["spec"]["volumeClaimTemplates"][0]["spec"]
        self.assertEqual(index_pvc["storageClassName"], "fast-ssd")
        self.assertEqual(index_pvc["resources"]["requests"]["storage"], "20Gi")
        self.assertEqual(kinds["index"]["spec"]["replicas"], 1)
        # the key shards share the partitions of internal.steps
        self.assertEqual(kinds["shard"]["spec"]["replicas"], 2)
        self.assertEqual(kinds["verify"]["spec"]["replicas"], 1)
        self.assertEqual(kinds["mirror"]["spec"]["replicas"], 1)
        # no persistence: the state directory is an emptyDir, no claim
        self.assertNotIn("volumeClaimTemplates", kinds["sign"]["spec"])
        vols = {v["name"]: v for v in kinds["sign"]["spec"]["template"]["spec"]["volumes"]}
        self.assertEqual(vols["state"], {"name": "state", "emptyDir": {}})
        self.assertEqual(container(kinds["sign"])["resources"]["requests"]["cpu"], "1")
        self.assertEqual(container(kinds["index"])["resources"]["requests"]["cpu"], "500m")

    def test_keda_scales_only_the_stateless_sign_stage(self):
        r = render("keda")
        (so,) = r.of("ScaledObject")
        target = so["spec"]["scaleTargetRef"]
        sign = r.one("Deployment", target["name"])
        self.assertEqual(stage_of(sign), "sign")
        self.assertNotIn("replicas", sign["spec"], "KEDA owns the sign stage's replicas")
        for w in r.of("StatefulSet"):
            self.assertIn("replicas", w["spec"])
        (trigger,) = so["spec"]["triggers"]
        toml = r.config_toml()
        self.assertEqual(trigger["type"], "kafka")
        self.assertEqual(trigger["metadata"]["consumerGroup"], toml_value(toml, "group"))
        self.assertEqual(trigger["metadata"]["topic"], toml_value(toml, "input_topic"))
        self.assertEqual(trigger["metadata"]["bootstrapServers"], toml_value(toml, "brokers"))
        self.assertEqual((so["spec"]["minReplicaCount"], so["spec"]["maxReplicaCount"]), (2, 24))
        # config.scale_out: every pod of the all workload signs, so KEDA scales that workload
        r = Render(sets=["keda.enabled=true", "config.scale_out=true"])
        (so,) = r.of("ScaledObject")
        target = so["spec"]["scaleTargetRef"]
        self.assertEqual(target["kind"], "StatefulSet")
        all_ = r.one("StatefulSet", target["name"])
        self.assertEqual(stage_of(all_), "all")
        self.assertNotIn("replicas", all_["spec"], "KEDA owns the replicas")
        self.assertEqual(so["spec"]["triggers"][0]["metadata"]["consumerGroup"], toml_value(r.config_toml(), "group"))

    def test_security_defaults(self):
        for variant in VARIANTS:
            for w in render(variant).workloads():
                pod = w["spec"]["template"]["spec"]
                c = container(w)
                self.assertTrue(pod["securityContext"]["runAsNonRoot"])
                self.assertGreater(pod["securityContext"]["runAsUser"], 0)
                self.assertTrue(c["securityContext"]["readOnlyRootFilesystem"])
                self.assertFalse(c["securityContext"]["allowPrivilegeEscalation"])
                self.assertEqual(c["securityContext"]["capabilities"]["drop"], ["ALL"])
                self.assertFalse(pod["automountServiceAccountToken"])
                mounts = {m["mountPath"] for m in c["volumeMounts"]}
                self.assertTrue({"/tmp", "/etc/neardup", "/var/lib/neardup"} <= mounts)

    def test_selectors_match_the_pods_they_mean(self):
        for variant in VARIANTS:
            r = render(variant)
            pods = {w["metadata"]["name"]: w["spec"]["template"]["metadata"]["labels"] for w in r.workloads()}
            for w in r.workloads():
                self.assertTrue(selects(w["spec"]["selector"]["matchLabels"], pods[w["metadata"]["name"]]))
            pdbs = r.of("PodDisruptionBudget")
            self.assertEqual(len(pdbs), len(pods), variant)
            for pdb in pdbs:
                chosen = [n for n, labels in pods.items() if selects(pdb["spec"]["selector"]["matchLabels"], labels)]
                self.assertEqual(chosen, [pdb["metadata"]["name"]], variant)
            services = r.of("Service")
            for svc in services:
                self.assertTrue(any(selects(svc["spec"]["selector"], l) for l in pods.values()), svc["metadata"]["name"])
            metrics = r.one("Service", f"{FULL}")
            self.assertEqual(
                sorted(n for n, l in pods.items() if selects(metrics["spec"]["selector"], l)), sorted(pods),
                "the metrics Service fronts every stage",
            )
            # /clusters: only the pods that hold the cluster map
            clusters = r.one("Service", f"{FULL}-clusters")
            self.assertEqual(
                sorted(stage_of(w) for w in r.workloads() if selects(clusters["spec"]["selector"], pods[w["metadata"]["name"]])),
                ["cluster" if any(stage_of(w) == "cluster" for w in r.workloads()) else "all"],
                variant,
            )
            for sm in r.of("ServiceMonitor"):
                scraped = [s["metadata"]["name"] for s in services if selects(sm["spec"]["selector"]["matchLabels"], s["metadata"]["labels"])]
                self.assertEqual(scraped, [metrics["metadata"]["name"]], "each pod is scraped once")
                self.assertEqual(sm["spec"]["endpoints"][0]["port"], "http")
                self.assertEqual(sm["spec"]["endpoints"][0]["path"], "/metrics")
                self.assertEqual(sm["metadata"]["labels"]["release"], "kube-prometheus-stack")

    def test_sasl_credentials_come_from_the_secret_only(self):
        r = render("sasl")
        toml = r.config_toml()
        self.assertIn('"security.protocol" = "SASL_SSL"', toml)
        self.assertIn('"sasl.mechanism" = "SCRAM-SHA-512"', toml)
        self.assertNotIn("password", toml)
        for w in r.workloads():
            env = {e["name"]: e for e in container(w)["env"]}
            for var, key in (("NEARDUP_KAFKA_SASL_USERNAME", "username"), ("NEARDUP_KAFKA_SASL_PASSWORD", "password")):
                self.assertEqual(env[var]["valueFrom"]["secretKeyRef"], {"name": "kafka-neardup-user", "key": key})
            self.assertEqual(env["NEARDUP_LOG"]["value"], "info,neardup=debug")
            self.assertEqual(w["spec"]["template"]["spec"]["imagePullSecrets"], [{"name": "regcred"}])
            self.assertEqual(container(w)["image"], "registry.example.com/crawl/neardup:0.1.0")
        (auth,) = r.of("TriggerAuthentication")
        refs = {t["parameter"]: (t["name"], t["key"]) for t in auth["spec"]["secretTargetRef"]}
        self.assertEqual(
            refs,
            {
                "username": ("kafka-neardup-user", "username"),
                "password": ("kafka-neardup-user", "password"),
                "ca": ("kafka-cluster-ca-cert", "ca.crt"),
            },
        )
        (so,) = r.of("ScaledObject")
        self.assertEqual(so["spec"]["triggers"][0]["authenticationRef"]["name"], auth["metadata"]["name"])
        self.assertEqual(so["spec"]["triggers"][0]["metadata"]["sasl"], "scram_sha512")
        self.assertEqual(so["spec"]["triggers"][0]["metadata"]["tls"], "enable")

    def check_config(self, r, workload, toml=None, command="run"):
        """neardup's own --check-config on the rendered file, arguments and environment."""
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "neardup.toml"
            toml = toml if toml is not None else r.config_toml()
            # Files the pod gets from extra volumes (a CA certificate from a Secret) are stood in
            # for by the system's CA bundle, at a temporary path: librdkafka loads them.
            for mount in container(workload)["volumeMounts"]:
                if mount["name"] in ("config", "state", "tmp"):
                    continue
                for rel in set(re.findall(rf'"{re.escape(mount["mountPath"])}/([^"]+)"', toml)):
                    local = Path(tmp) / mount["name"] / rel
                    local.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy("/etc/ssl/certs/ca-certificates.crt", local)
                    toml = toml.replace(f'"{mount["mountPath"]}/{rel}"', json.dumps(str(local)))
            path.write_text(toml)
            args = list(container(workload)["args"])
            self.assertEqual(args[:3], [command, "--config", "/etc/neardup/neardup.toml"])
            args[2] = str(path)
            env = {k: v for k, v in os.environ.items() if not k.startswith("NEARDUP_")}
            env.update(pod_env(workload))
            return subprocess.run([str(NEARDUP), *args, "--check-config"], env=env, capture_output=True, text=True)

    def test_every_key_and_argument_the_chart_sets_is_known_to_neardup(self):
        self.assertTrue(NEARDUP.exists(), f"{NEARDUP} is missing: run cargo build first")
        for variant in VARIANTS:
            r = render(variant)
            for w in r.workloads():
                with self.subTest(variant=variant, workload=w["metadata"]["name"]):
                    out = self.check_config(r, w)
                    self.assertEqual(out.returncode, 0, out.stderr[-3000:])
        # ... and a key neardup does not know fails this check, naming it.
        r = Render(sets=["config.topology.windw=7d"])
        out = self.check_config(r, r.workloads()[0])
        self.assertNotEqual(out.returncode, 0)
        self.assertIn("windw", out.stderr)
        r = Render(sets=["config.max_inflight=5"])
        out = self.check_config(r, r.workloads()[0])
        self.assertNotEqual(out.returncode, 0)
        self.assertIn("max_inflight", out.stderr)

    def test_the_topics_job_runs_before_the_pods_and_reaches_kafka_as_they_do(self):
        self.assertEqual(render("default").topics_job(), (None, None))
        variants = {v: render(v) for v in VARIANTS if render(v).topics_job()[0]}
        self.assertIn("split", variants)
        self.assertIn("sasl", variants)
        variants["all-in-one"] = Render(sets=["topics.create=true", "topics.partitions=6", "topics.replicationFactor=3"])
        for variant, r in variants.items():
            with self.subTest(variant=variant):
                job, cm = r.topics_job()
                for obj in (job, cm):
                    self.assertEqual(obj["metadata"]["annotations"]["helm.sh/hook"], "pre-install,pre-upgrade")
                    # hook objects are not the release's: only these policies remove them
                    self.assertEqual(
                        obj["metadata"]["annotations"]["helm.sh/hook-delete-policy"], "before-hook-creation,hook-succeeded"
                    )
                # the configuration first, then the Job that reads it
                self.assertLess(
                    int(cm["metadata"]["annotations"]["helm.sh/hook-weight"]),
                    int(job["metadata"]["annotations"]["helm.sh/hook-weight"]),
                )
                # the same configuration, environment and extra volumes as the pods
                self.assertEqual(cm["data"]["neardup.toml"], r.config_toml())
                w = r.workloads()[0]
                # (but the pod's own URL, which the Job has no use for)
                own = ("POD_IP", "NEARDUP_HTTP_ADVERTISE")
                pod_env_ = [e for e in container(w).get("env", []) if e["name"] not in own]
                self.assertEqual(container(job).get("env") or [], pod_env_)
                self.assertEqual(container(job).get("envFrom"), container(w).get("envFrom"))
                pod = job["spec"]["template"]["spec"]
                for v in w["spec"]["template"]["spec"]["volumes"]:
                    if v["name"] not in ("config", "state", "tmp"):
                        self.assertIn(v, pod["volumes"])
                self.assertEqual(pod["restartPolicy"], "Never")
                # hooks run before the release's ServiceAccount exists
                self.assertNotIn("serviceAccountName", pod)
                args = container(job)["args"]
                self.assertIn("--create", args)
                self.assertEqual("--split" in args, any(stage_of(w) == "sign" for w in r.workloads()))
                out = self.check_config(r, job, toml=cm["data"]["neardup.toml"], command="topics")
                self.assertEqual(out.returncode, 0, out.stderr[-3000:])
                # the plan neardup prints names an internal topic for each split stage's input
                prefix = toml_value(r.config_toml(), "output_prefix")
                for w in r.workloads():
                    stage = stage_of(w)
                    internal = {"index": "signed", "shard": "steps", "verify": "answered", "cluster": "indexed", "mirror": "clustered"}
                    if stage in internal:
                        self.assertIn(f"{prefix}internal.{internal[stage]} ", out.stdout)
                if variant == "all-in-one":
                    self.assertNotIn("internal.", out.stdout)
                    self.assertEqual(args[args.index("--partitions") + 1], "6")
                    self.assertEqual(args[args.index("--replication-factor") + 1], "3")
        # config.scale_out: every pod runs every stage; the Job's plan has the split topology's
        # internal topics and the lease, and the pods' configuration passes neardup's check
        r = Render(sets=["topics.create=true", "config.scale_out=true", "stages.all.replicas=2"])
        job, cm = r.topics_job()
        out = self.check_config(r, job, toml=cm["data"]["neardup.toml"], command="topics")
        self.assertEqual(out.returncode, 0, out.stderr[-3000:])
        prefix = toml_value(r.config_toml(), "output_prefix")
        for topic in ("signed", "indexed", "lease"):
            self.assertIn(f"{prefix}internal.{topic} ", out.stdout)
        out = self.check_config(r, r.workloads()[0])
        self.assertEqual(out.returncode, 0, out.stderr[-3000:])
        self.assertIn("scale_out = true", out.stdout)
        with self.assertRaises(RenderError) as e:
            Render(sets=["topics.create=true", "topics.replicationFactor=0"])
        self.assertIn("replicationFactor", str(e.exception))

    def test_numbers_reach_neardup_as_numbers(self):
        # Helm's own toToml writes 20000 as 20000.0, which neardup's integer keys refuse.
        toml = render("split").config_toml()
        self.assertIn("max_in_flight = 20000\n", toml)
        self.assertIn("max_dead_letter_ratio = 0.25\n", toml)
        self.assertIn("collections = true\n", toml)
        self.assertIn('max_body_bytes = "4MiB"\n', toml)

    def test_a_leased_stateful_stage_may_have_a_standby_replica(self):
        # config.lease runs the stage in the lease's holder only: a second replica stands by.
        for sets, stage in [
            (["config.lease=true", "stages.all.replicas=2"], "all"),
            (["config.lease=true", "split=true", "stages.cluster.replicas=2"], "cluster"),
            # every stage in each pod: the replicas share the signing, the rest runs leased
            (["config.scale_out=true", "stages.all.replicas=2"], "all"),
        ]:
            with self.subTest(sets=sets):
                r = Render(sets=sets)
                kinds = {d["metadata"]["labels"]["app.kubernetes.io/component"]: d for d in r.docs if d["kind"] in ("StatefulSet", "Deployment")}
                self.assertEqual(kinds[stage]["spec"]["replicas"], 2)
                config = [d for d in r.docs if d["kind"] == "ConfigMap"][0]
                key = "scale_out" if "config.scale_out=true" in sets else "lease"
                self.assertIn(f"{key} = true", "".join(config["data"].values()))

    def test_a_pod_that_may_hold_the_clusters_under_a_lease_advertises_its_url(self):
        # The lease's holder publishes its URL; a pod standing by forwards /clusters to it.
        for sets, advertising in [
            (["config.lease=true", "stages.all.replicas=2"], {"all"}),
            (["config.scale_out=true", "stages.all.replicas=2"], {"all"}),
            (["config.lease=true", "split=true", "stages.cluster.replicas=2"], {"cluster"}),
            ([], set()),
            (["split=true"], set()),
        ]:
            with self.subTest(sets=sets):
                r = Render(sets=[*sets, "topics.create=true"])
                self.assertIsNotNone(r.topics_job()[0])
                for w in r.workloads():
                    env = pod_env(w, pod_ip="10.0.3.7")
                    if stage_of(w) in advertising:
                        self.assertEqual(env.get("NEARDUP_HTTP_ADVERTISE"), "http://10.0.3.7:9090")
                        out = self.check_config(r, w)
                        self.assertEqual(out.returncode, 0, out.stderr[-3000:])
                    else:
                        self.assertNotIn("NEARDUP_HTTP_ADVERTISE", env, stage_of(w))
                self.assertNotIn("NEARDUP_HTTP_ADVERTISE", str(r.topics_job()))
        # The port follows http.port.
        r = Render(sets=["config.lease=true", "http.port=8081"])
        self.assertEqual(pod_env(r.workloads()[0])["NEARDUP_HTTP_ADVERTISE"], "http://10.0.3.7:8081")

    def test_a_shared_claim_replaces_the_claim_per_pod(self):
        # persistence.existingClaim: every pod of the stage mounts one (ReadWriteMany) claim for
        # its checkpoints, so the lease's next holder starts from the last one's checkpoint.
        for sets, stage in [
            (["config.lease=true", "stages.all.replicas=2", "stages.all.persistence.existingClaim=neardup-state"], "all"),
            (["config.scale_out=true", "stages.all.replicas=2", "stages.all.persistence.existingClaim=neardup-state"], "all"),
            (["config.lease=true", "split=true", "stages.cluster.replicas=2", "stages.cluster.persistence.existingClaim=neardup-state"], "cluster"),
        ]:
            with self.subTest(sets=sets):
                r = Render(sets=sets)
                w = [d for d in r.workloads() if stage_of(d) == stage][0]
                self.assertEqual(w["kind"], "StatefulSet")
                self.assertNotIn("volumeClaimTemplates", w["spec"])
                volumes = {v["name"]: v for v in w["spec"]["template"]["spec"]["volumes"]}
                self.assertEqual(volumes["state"], {"name": "state", "persistentVolumeClaim": {"claimName": "neardup-state"}})
                args = container(w)["args"]
                self.assertEqual(args[args.index("--checkpoint-dir") + 1], "/var/lib/neardup")
                mounts = {m["name"]: m["mountPath"] for m in container(w)["volumeMounts"]}
                self.assertEqual(mounts["state"], "/var/lib/neardup")
        # Without it, a claim per pod, as before.
        w = [d for d in Render(sets=["config.lease=true", "stages.all.replicas=2"]).workloads() if stage_of(d) == "all"][0]
        self.assertIn("volumeClaimTemplates", w["spec"])

    def test_misconfigurations_fail_with_a_message_that_says_what_to_do(self):
        cases = [
            (["sasl.enabled=true"], "sasl.existingSecret"),
            (["keda.enabled=true"], "split: true"),
            (["keda.enabled=true"], "config.scale_out: true"),
            (["keda.enabled=true", "config.scale_out=true", "keda.minReplicaCount=0"], "at least 1"),
            (["split=true", "config.scale_out=true"], "choose one"),
            (["config.drain_timeout=10s"], "shutdown.drainTimeoutSeconds"),
            (["config.http_listen=0.0.0.0:1"], "http.port"),
            (["config.brokers="], "config.brokers"),
            # values.schema.json: typos and wrong kinds are refused before anything renders
            (["stages.all.kind=ReplicaSet"], '"StatefulSet", "Deployment"'),
            (["stages.all.replica=2"], "Additional property replica is not allowed"),
            (["sasl.mechanism=SCRAM"], "sasl.mechanism"),
            (["split=true", "keda.enabled=true", "stages.sign.kind=StatefulSet"], "stages.sign.kind: Deployment"),
            (["prometheusRule.enabled=true"], "needs serviceMonitor.enabled"),
            (["stages.all.kind=Deployment", "stages.all.persistence.existingClaim=x"], "existingClaim needs kind: StatefulSet"),
            (["stages.all.replicas=2"], "stages.all.replicas is 2"),
            (["stages.all.replicas=2"], "or set config.lease: true"),
            (["split=true", "stages.cluster.replicas=3"], "the cluster stage keeps state"),
            (["serviceMonitor.enabled=true", "prometheusRule.enabled=true", "prometheusRule.stalledFor=10"], "stalledFor"),
        ]
        for sets, message in cases:
            with self.subTest(sets=sets):
                with self.assertRaises(RenderError) as e:
                    Render(sets=sets)
                self.assertIn(message, str(e.exception))

    def test_dockerfile_lints_and_matches_the_chart(self):
        # No Docker engine here: hadolint lints it, and its facts are checked against the chart.
        hadolint = tool("hadolint")
        dockerfile = ROOT / "Dockerfile"
        out = subprocess.run([hadolint, "--config", str(ROOT / ".hadolint.yaml"), str(dockerfile)], capture_output=True, text=True)
        self.assertEqual(out.returncode, 0, out.stdout + out.stderr)
        with tempfile.TemporaryDirectory() as tmp:
            bad = Path(tmp) / "Dockerfile"
            bad.write_text("FROM debian:latest\nRUN cd /src && make\n")
            out = subprocess.run([hadolint, "--config", str(ROOT / ".hadolint.yaml"), str(bad)], capture_output=True, text=True)
            self.assertNotEqual(out.returncode, 0, "hadolint must catch a bad Dockerfile")
        text = dockerfile.read_text()
        stages = re.findall(r"^FROM (\S+)", text, re.M)
        self.assertGreaterEqual(len(stages), 2, "multi-stage")
        final = text[text.rindex("\nFROM ") :]
        (user,) = re.findall(r"^USER (\d+):(\d+)$", final, re.M)
        values = yaml.safe_load((CHART / "values.yaml").read_text())
        self.assertEqual(int(user[0]), values["podSecurityContext"]["runAsUser"])
        self.assertEqual(int(user[1]), values["podSecurityContext"]["runAsGroup"])
        self.assertNotEqual(user[0], "0")
        (port,) = re.findall(r"^EXPOSE (\d+)$", final, re.M)
        self.assertEqual(int(port), values["http"]["port"])
        for src in re.findall(r"^COPY (?!--from)(.+) \S+$", text, re.M):
            for path in src.split():
                self.assertTrue((ROOT / path).exists(), f"the Dockerfile copies {path}, which is missing")

    def test_notes_name_the_objects_the_release_created(self):
        # `helm template` skips NOTES.txt and `helm install --dry-run` wants a cluster, so a copy
        # of the chart renders it into a ConfigMap.
        with tempfile.TemporaryDirectory() as tmp:
            chart = Path(tmp) / "neardup"
            shutil.copytree(CHART, chart)
            (chart / "templates" / "zz-notes.yaml").write_text(
                "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: notes}\ndata:\n  notes: |\n"
                '    {{- include (print $.Template.BasePath "/NOTES.txt") . | nindent 4 }}\n'
            )
            for variant, files in VARIANTS.items():
                cmd = [HELM, "template", RELEASE, str(chart), "--namespace", "crawl"]
                for f in files:
                    cmd += ["-f", str(chart / "ci" / f.name)]
                out = subprocess.run(cmd, capture_output=True, text=True, check=True)
                docs = [d for d in yaml.safe_load_all(out.stdout) if d]
                notes = next(d for d in docs if d["metadata"]["name"] == "notes")["data"]["notes"]
                names = {f"{d['kind'].lower()}/{d['metadata']['name']}" for d in docs}
                names |= {f"deploy/{d['metadata']['name']}" for d in docs if d["kind"] == "Deployment"}
                with self.subTest(variant=variant):
                    self.assertIn(f"port-forward svc/{FULL} 9090", notes)
                    (target,) = re.findall(r"exec (\S+) -- neardup run", notes)
                    self.assertIn(target, names)
                    self.assertEqual("internal.signed" in notes, variant in ("split", "keda", "sasl"))
                    # under a lease, a pod standing by forwards /clusters to the holder
                    self.assertEqual("forwards the question to the holder" in notes, variant == "scale-out")
                    self.assertEqual("running every split stage in each of 2 pod(s)" in notes, variant == "scale-out")
                    # the topics: made by the release's Job, or how to make them
                    jobs = [d["metadata"]["name"] for d in docs if d["kind"] == "Job"]
                    if jobs:
                        self.assertIn(f"the Job {jobs[0]} created", notes)
                    else:
                        self.assertIn("neardup topics --config neardup.toml --create", notes)
                    # the alerts named in the notes are the PrometheusRule's, when there is one
                    rules = [r["alert"] for p in docs if p["kind"] == "PrometheusRule" for g in p["spec"]["groups"] for r in g["rules"]]
                    self.assertEqual(re.findall(r"\bNeardup[A-Za-z]+", notes), rules)
                    if rules:
                        self.assertIn(f"PrometheusRule {FULL}", notes)
                    # the cluster map is asked of the Service of the pods that hold it
                    forwards = re.findall(r"port-forward (\S+) ", notes)
                    self.assertEqual(forwards, [f"svc/{FULL}", f"svc/{FULL}-clusters"])
                    self.assertTrue({f.replace("svc/", "service/", 1) for f in forwards} <= names, forwards)

    def test_readme_documents_every_value(self):
        out = subprocess.run(
            [sys.executable, str(Path(__file__).with_name("readme.py")), "--check"], capture_output=True, text=True
        )
        self.assertEqual(out.returncode, 0, out.stdout + out.stderr)


if __name__ == "__main__":
    unittest.main()
