{{/* Names ------------------------------------------------------------------------------- */}}

{{- define "wintermute.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Leaves room for the longest suffix ("-supervisor", "-nats-headless") within 63 chars. */}}
{{- define "wintermute.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 48 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 48 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 48 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "wintermute.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Labels: call with (dict "root" $ "component" "llm"). */}}
{{- define "wintermute.selectorLabels" -}}
app.kubernetes.io/name: {{ include "wintermute.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "wintermute.labels" -}}
helm.sh/chart: {{ include "wintermute.chart" .root }}
{{ include "wintermute.selectorLabels" . }}
app.kubernetes.io/part-of: wintermute
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
{{- end -}}

{{/* Wiring ------------------------------------------------------------------------------ */}}

{{- define "wintermute.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{- define "wintermute.natsUrl" -}}
{{- if .Values.nats.enabled -}}
{{- printf "nats://%s-nats:4222" (include "wintermute.fullname" .) -}}
{{- else -}}
{{- $url := required "nats.url is required when nats.enabled=false (e.g. nats://nats.example:4222)" .Values.nats.url -}}
{{- if contains "@" $url -}}
{{- fail "nats.url must not carry credentials (they would sit in plaintext in every Deployment): put them in a Secret and name it in nats.auth.existingSecret" -}}
{{- end -}}
{{- $url -}}
{{- end -}}
{{- end -}}

{{- define "wintermute.llmSecretName" -}}
{{- default (printf "%s-llm" (include "wintermute.fullname" .)) .Values.secrets.llm.existingSecret -}}
{{- end -}}

{{- define "wintermute.capabilitySecretName" -}}
{{- default (printf "%s-capability" (include "wintermute.fullname" .)) .Values.secrets.capability.existingSecret -}}
{{- end -}}

{{- define "wintermute.channelSecretName" -}}
{{- default (printf "%s-channel" (include "wintermute.fullname" .)) .Values.secrets.channel.existingSecret -}}
{{- end -}}

{{/* The environment every wintermute container shares. */}}
{{- define "wintermute.env" -}}
- name: WINTERMUTE_HOME
  value: /data
- name: WM__NATS__URL
  value: {{ include "wintermute.natsUrl" . | quote }}
- name: TMPDIR
  value: /tmp
{{- end -}}

{{/* config.toml from .Values.config ----------------------------------------------------
Helm reads numbers in values files as float64 (toToml would print 500000 as 500000.0 and
Telegram ids as 1.23456789e+08), so this renderer prints whole numbers as integers. */}}

{{- define "wintermute.toml.key" -}}
{{- if regexMatch "^[A-Za-z0-9_-]+$" . -}}{{ . }}{{- else -}}{{ toJson . }}{{- end -}}
{{- end -}}

{{- define "wintermute.toml.value" -}}
{{- $v := . -}}
{{- if kindIs "string" $v -}}
{{- toJson $v -}}
{{- else if kindIs "bool" $v -}}
{{- $v -}}
{{- else if or (kindIs "float64" $v) (kindIs "float32" $v) -}}
{{- if and (lt $v 9e15) (gt $v -9e15) (eq (float64 (int64 $v)) (float64 $v)) -}}
{{- int64 $v -}}
{{- else -}}
{{- $v -}}
{{- end -}}
{{- else if or (kindIs "int" $v) (kindIs "int64" $v) (kindIs "int32" $v) (kindIs "uint64" $v) -}}
{{- $v -}}
{{- else if kindIs "slice" $v -}}
[{{- range $i, $e := $v -}}{{- if $i }}, {{ end -}}{{- include "wintermute.toml.value" $e -}}{{- end -}}]
{{- else if kindIs "map" $v -}}
{ {{- range $i, $k := keys $v | sortAlpha -}}{{- if $i }}, {{ end -}}{{- include "wintermute.toml.key" $k }} = {{ include "wintermute.toml.value" (get $v $k) -}}{{- end -}} }
{{- else -}}
{{- fail (printf "config: cannot write %v (%s) to config.toml" $v (kindOf $v)) -}}
{{- end -}}
{{- end -}}

{{/* Call with (dict "path" "models" "table" $map): scalars first, then sub-tables. */}}
{{- define "wintermute.toml.table" -}}
{{- $path := .path -}}
{{- range $k, $v := .table -}}
{{- if and (not (kindIs "map" $v)) (not (kindIs "invalid" $v)) }}
{{ include "wintermute.toml.key" $k }} = {{ include "wintermute.toml.value" $v }}
{{- end -}}
{{- end -}}
{{- range $k, $v := .table -}}
{{- if kindIs "map" $v -}}
{{- $sub := include "wintermute.toml.key" $k -}}
{{- if $path -}}{{- $sub = printf "%s.%s" $path $sub -}}{{- end -}}
{{- /* A header only where the table holds values or nothing at all ([a.b] implies [a]). */ -}}
{{- $leaf := not $v -}}
{{- range $_, $x := $v -}}{{- if not (kindIs "map" $x) -}}{{- $leaf = true -}}{{- end -}}{{- end -}}
{{- if $leaf }}

[{{ $sub }}]
{{- end -}}
{{- include "wintermute.toml.table" (dict "path" $sub "table" $v) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "wintermute.configToml" -}}
# Rendered by the wintermute Helm chart from .Values.config; edit the values, not this file.
# The NATS URL comes from WM__NATS__URL in each pod.
{{- include "wintermute.toml.table" (dict "path" "" "table" .Values.config) }}
{{ end -}}

{{/* NATS users and their passwords -------------------------------------------------------- */}}

{{/* Every NATS user of the bundled server: one per actor, the supervisor and the CLI. */}}
{{- define "wintermute.natsUsers" -}}
{{- toJson (list "channel" "planner" "llm" "executor" "memory" "approval" "observer" "heartbeat" "operator" "cli" "supervisor") -}}
{{- end -}}

{{- define "wintermute.natsPasswordKey" -}}
{{- printf "WM_NATS_PW_%s" (upper .) -}}
{{- end -}}

{{- define "wintermute.natsAuthSecretName" -}}
{{- default (printf "%s-nats-auth" (include "wintermute.fullname" .)) .Values.nats.auth.existingSecret -}}
{{- end -}}

{{/* nats.conf of the bundled server: JetStream with a store cap, lame duck, and the users and
permissions rendered from the code's permission table (files/nats-auth.conf). */}}
{{- define "wintermute.natsConf" -}}
{{- $prefix := dig "nats" "prefix" "wm" .Values.config -}}
{{- if ne $prefix "wm" -}}
{{- fail "config.nats.prefix must be \"wm\" with the bundled NATS (its users and permissions are rendered for that prefix)" -}}
{{- end -}}
port: 4222
http_port: 8222
server_name: $POD_NAME
pid_file: "/data/nats-server.pid"
max_payload: 1MB
lame_duck_duration: "{{ .Values.nats.lameDuckSeconds }}s"
lame_duck_grace_period: "10s"
jetstream {
  store_dir: "/data"
  max_memory_store: {{ .Values.nats.jetstream.maxMemoryStore }}
  max_file_store: {{ .Values.nats.jetstream.maxFileStore }}
}
{{ .Files.Get "files/nats-auth.conf" }}
{{- end -}}

{{/* How a wintermute container logs in to NATS: call with (dict "root" $ "user" "planner"). */}}
{{- define "wintermute.natsLogin" -}}
{{- $v := .root.Values.nats -}}
{{- if $v.enabled -}}
- name: WM__NATS__USER
  value: {{ .user | quote }}
- name: WM__NATS__PASSWORD
  valueFrom:
    secretKeyRef:
      name: {{ include "wintermute.natsAuthSecretName" .root }}
      key: {{ include "wintermute.natsPasswordKey" .user }}
{{- if not (has .user (list "cli" "supervisor")) }}
{{- /* an actor's own account imports the JetStream API under this prefix (bus/accounts.py) */}}
- name: WM__NATS__API_PREFIX
  value: "JS.wintermute.API"
{{- end }}
{{- else if $v.auth.existingSecret -}}
{{- if eq $v.auth.type "creds" }}
- name: WM__NATS__CREDENTIALS
  value: /etc/wintermute/nats/nats.creds
{{- else }}
- name: WM__NATS__USER
  valueFrom:
    secretKeyRef:
      name: {{ $v.auth.existingSecret }}
      key: user
- name: WM__NATS__PASSWORD
  valueFrom:
    secretKeyRef:
      name: {{ $v.auth.existingSecret }}
      key: password
{{- end }}
{{- end -}}
{{- end -}}
