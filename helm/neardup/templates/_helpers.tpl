{{/* Chart name, truncated to the 63 characters of a DNS label. */}}
{{- define "neardup.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Full name: release and chart, unless the release name already holds the chart name. */}}
{{- define "neardup.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "neardup.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "neardup.labels" -}}
helm.sh/chart: {{ include "neardup.chart" . }}
{{ include "neardup.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "neardup.selectorLabels" -}}
app.kubernetes.io/name: {{ include "neardup.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "neardup.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "neardup.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "neardup.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{/*
The stages this release runs, as a list of names: `all`, or the four split stages in data-flow
order.
*/}}
{{- define "neardup.stageNames" -}}
{{- /* with key shards, the index stage's key tables and verification run as stages of their own */}}
{{- /* with mirror_stage, mirrors and collections do; otherwise the cluster stage runs them */}}
{{- if .Values.split }}sign index{{ if gt (int (dig "topology" "key_shards" 0 .Values.config)) 0 }} shard verify{{ end }} cluster{{ if dig "topology" "mirror_stage" false .Values.config }} mirror{{ end }}{{ else }}all{{ end }}
{{- end }}

{{/* Name of the topics hook Job and its ConfigMap. */}}
{{- define "neardup.topicsJobName" -}}
{{- printf "%s-topics" (include "neardup.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Name of one stage's workload: full name and stage. */}}
{{- define "neardup.stageFullname" -}}
{{- printf "%s-%s" (include "neardup.fullname" .root) .stage | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
neardup's configuration as TOML. Helm's own toToml writes every YAML number as a float
(10000 -> 10000.0), which neardup's integer keys rightly refuse, so scalars are written here:
whole numbers as integers, strings and keys through JSON escaping (a valid TOML basic string).
Top-level scalars first, then one table per map (`[topology]`, `[kafka]`), keys sorted.
*/}}
{{- define "neardup.tomlValue" -}}
{{- $v := . }}
{{- if kindIs "bool" $v }}{{ $v }}
{{- else if or (kindIs "float64" $v) (kindIs "int" $v) (kindIs "int64" $v) }}
{{- if eq (float64 $v) (floor $v) }}{{ int64 $v }}{{ else }}{{ $v }}{{ end }}
{{- else if kindIs "string" $v }}{{ toJson $v }}
{{- else }}{{ fail (printf "config: a value of kind %s cannot be written to neardup.toml: %v" (kindOf $v) $v) }}
{{- end }}
{{- end }}

{{- define "neardup.tomlKey" -}}
{{- if regexMatch "^[A-Za-z0-9_-]+$" . }}{{ . }}{{ else }}{{ toJson . }}{{ end }}
{{- end }}

{{- define "neardup.configToml" -}}
{{- $cfg := deepCopy .Values.config }}
{{- if hasKey $cfg "http_listen" }}{{ fail "config.http_listen is set by the chart: use http.port" }}{{ end }}
{{- if hasKey $cfg "drain_timeout" }}{{ fail "config.drain_timeout is set by the chart: use shutdown.drainTimeoutSeconds" }}{{ end }}
{{- if not $cfg.brokers }}{{ fail "config.brokers is required: the Kafka bootstrap servers, e.g. kafka:9092" }}{{ end }}
{{- $_ := set $cfg "http_listen" (printf "0.0.0.0:%d" (int .Values.http.port)) }}
{{- $_ := set $cfg "drain_timeout" (printf "%ds" (int .Values.shutdown.drainTimeoutSeconds)) }}
{{- if .Values.sasl.enabled }}
{{- $kafka := default (dict) (get $cfg "kafka") }}
{{- $_ := set $kafka "security.protocol" .Values.sasl.securityProtocol }}
{{- $_ := set $kafka "sasl.mechanism" .Values.sasl.mechanism }}
{{- $_ := set $cfg "kafka" $kafka }}
{{- end }}
# neardup.toml, rendered by the neardup Helm chart from .Values.config.
{{- range $k := keys $cfg | sortAlpha }}
{{- $v := get $cfg $k }}
{{- if not (kindIs "map" $v) }}
{{ include "neardup.tomlKey" $k }} = {{ include "neardup.tomlValue" $v }}
{{- end }}
{{- end }}
{{- range $k := keys $cfg | sortAlpha }}
{{- $v := get $cfg $k }}
{{- if and (kindIs "map" $v) (not (empty $v)) }}

[{{ include "neardup.tomlKey" $k }}]
{{- range $kk := keys $v | sortAlpha }}
{{- $vv := get $v $kk }}
{{- if kindIs "map" $vv }}{{ fail (printf "config.%s.%s: neardup's configuration has no tables this deep" $k $kk) }}{{ end }}
{{ include "neardup.tomlKey" $kk }} = {{ include "neardup.tomlValue" $vv }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}

{{/* An alert's labels: its severity and the release's `prometheusRule.extraAlertLabels`. */}}
{{- define "neardup.alertLabels" -}}
severity: {{ .severity }}
{{- with .extra }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/*
A neardup container's environment: with `advertise` (a pod that may hold the clusters under a
lease), the pod's own URL, which the lease's holder publishes so that a pod standing by forwards
`/clusters` to it; the SASL credentials from their Secret (librdkafka's sasl.username and
sasl.password, as NEARDUP_KAFKA_<PROPERTY>), then `env` and `envFrom`. Shared by the stages'
pods and the topics Job (called with the root context: no `advertise`), which must reach Kafka
the same way.
*/}}
{{- define "neardup.containerEnv" -}}
{{- if or .Values.env .Values.sasl.enabled .advertise }}
env:
  {{- if .advertise }}
  # the URL the lease's holder publishes: a pod standing by forwards /clusters questions to it
  - name: POD_IP
    valueFrom:
      fieldRef:
        fieldPath: status.podIP
  - name: NEARDUP_HTTP_ADVERTISE
    value: "http://$(POD_IP):{{ .Values.http.port }}"
  {{- end }}
  {{- if .Values.sasl.enabled }}
  # librdkafka's sasl.username and sasl.password (NEARDUP_KAFKA_<PROPERTY>)
  - name: NEARDUP_KAFKA_SASL_USERNAME
    valueFrom:
      secretKeyRef:
        name: {{ .Values.sasl.existingSecret }}
        key: {{ .Values.sasl.usernameKey }}
  - name: NEARDUP_KAFKA_SASL_PASSWORD
    valueFrom:
      secretKeyRef:
        name: {{ .Values.sasl.existingSecret }}
        key: {{ .Values.sasl.passwordKey }}
  {{- end }}
  {{- with .Values.env }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
{{- end }}
{{- with .Values.envFrom }}
envFrom:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}
