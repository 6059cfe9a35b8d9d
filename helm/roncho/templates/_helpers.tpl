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
{{- /* Without keys a server answers only to addresses, localhost and these
       names (DNS rebinding): every role's Service name, in each spelling. */}}
- name: RONCHO_ALLOWED_HOSTS
  value: {{ include "roncho.serviceHosts" . | quote }}
{{- end }}
{{- with .Values.extraEnv }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* The port probes use: the plain-text health port when the API port speaks TLS. */}}
{{- define "roncho.probePort" -}}
{{- if .Values.tls.enabled -}}{{ .Values.tls.healthPort }}{{- else -}}{{ .Values.grpcPort }}{{- end -}}
{{- end -}}

{{/* Every role's Service, as the cluster's DNS names it: name, name.namespace, name.namespace.svc, name.namespace.svc.cluster.local. */}}
{{- define "roncho.serviceHosts" -}}
{{- $root := . -}}
{{- $hosts := list -}}
{{- range $role, $spec := .Values.roles }}
{{- if and $spec.enabled $spec.service }}
{{- $name := printf "%s-%s" (include "roncho.fullname" $root) $role }}
{{- $hosts = concat $hosts (list $name (printf "%s.%s" $name $root.Release.Namespace) (printf "%s.%s.svc" $name $root.Release.Namespace) (printf "%s.%s.svc.cluster.local" $name $root.Release.Namespace)) }}
{{- end }}
{{- end }}
{{- join "," $hosts -}}
{{- end -}}
