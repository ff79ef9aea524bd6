// Validates the custom resources of a rendered chart against the JSON schemas that the
// kubernetes-models packages generate from the upstream CRDs (prometheus-operator's
// ServiceMonitor and PrometheusRule, KEDA's ScaledObject and TriggerAuthentication).
// stdin: a JSON array of manifests. stdout: a JSON array with one entry per manifest,
// {"kind", "name", "ok", "error"}. Exit status 0 even when some are invalid; unknown kinds
// are reported as errors, not skipped.
import { ServiceMonitor } from "@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/ServiceMonitor";
import { PrometheusRule } from "@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/PrometheusRule";
import { ScaledObject } from "@kubernetes-models/keda/keda.sh/v1alpha1/ScaledObject";
import { TriggerAuthentication } from "@kubernetes-models/keda/keda.sh/v1alpha1/TriggerAuthentication";

const models = {
  "monitoring.coreos.com/v1/ServiceMonitor": ServiceMonitor,
  "monitoring.coreos.com/v1/PrometheusRule": PrometheusRule,
  "keda.sh/v1alpha1/ScaledObject": ScaledObject,
  "keda.sh/v1alpha1/TriggerAuthentication": TriggerAuthentication,
};

let input = "";
for await (const chunk of process.stdin) input += chunk;
const results = JSON.parse(input).map((doc) => {
  const key = `${doc.apiVersion}/${doc.kind}`;
  const name = doc.metadata?.name;
  const Model = models[key];
  if (!Model) return { kind: key, name, ok: false, error: `no schema for ${key}` };
  try {
    new Model(doc).validate();
    return { kind: key, name, ok: true, error: null };
  } catch (e) {
    return { kind: key, name, ok: false, error: e.message };
  }
});
process.stdout.write(JSON.stringify(results));
