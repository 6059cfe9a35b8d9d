{{/* Chart name, release-scoped resource names and common labels. */}}
{{- define "roncho.name" -}}
{{- .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "roncho.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "roncho.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: {{ include "roncho.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/* Selector labels of one role: call with (dict "root" $ "role" "ingest"). */}}
{{- define "roncho.selectorLabels" -}}
app.kubernetes.io/name: {{ include "roncho.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .role }}
{{- end -}}

{{- define "roncho.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{- define "roncho.secretName" -}}
{{- .Values.secrets.existingSecret | default (printf "%s-secrets" (include "roncho.fullname" .)) -}}
{{- end -}}

{{/* Environment shared by every container: the config file and the secrets. */}}
{{- define "roncho.env" -}}
- name: RONCHO_CONFIG
  value: /etc/roncho/config.toml
- name: RONCHO_SHUTDOWN_GRACE_SECS
  value: {{ .Values.shutdownGraceSeconds | quote }}
{{- if .Values.insecureNoAuth }}
- name: RONCHO_INSECURE_NO_AUTH
  value: "true"
{{- end }}
{{- with .Values.extraEnv }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* The port probes use: the plain-text health port when the API port speaks TLS. */}}
{{- define "roncho.probePort" -}}
{{- if .Values.tls.enabled -}}{{ .Values.tls.healthPort }}{{- else -}}{{ .Values.grpcPort }}{{- end -}}
{{- end -}}
