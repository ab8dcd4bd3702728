{{/* Shared pod pieces of the wintermute Deployments (actors and supervisor). */}}

{{- define "wintermute.podSpecCommon" -}}
automountServiceAccountToken: false
enableServiceLinks: false
terminationGracePeriodSeconds: 30
securityContext:
  {{- toYaml .Values.podSecurityContext | nindent 2 }}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/* Every wintermute pod's WINTERMUTE_HOME (/data): one shared volume, as `wintermute up` has one
home. On a single node a ReadWriteOnce claim serves every pod (k3s local-path). The memory
store is a volume of its own, mounted only into the memory actor. */}}
{{- define "wintermute.homeVolumes" -}}
{{- $p := .Values.persistence.home -}}
- name: home
  {{- if $p.enabled }}
  persistentVolumeClaim:
    claimName: {{ $p.existingClaim | default (printf "%s-home" (include "wintermute.fullname" .)) }}
  {{- else }}
  emptyDir:
    sizeLimit: {{ .Values.persistence.homeSizeLimit }}
  {{- end }}
- name: tmp
  emptyDir:
    sizeLimit: 256Mi
- name: config
  configMap:
    name: {{ include "wintermute.fullname" . }}-config
- name: seed
  configMap:
    name: {{ include "wintermute.fullname" . }}-seed
{{- if and (not .Values.nats.enabled) (eq .Values.nats.auth.type "creds") .Values.nats.auth.existingSecret }}
- name: nats-creds
  secret:
    secretName: {{ .Values.nats.auth.existingSecret }}
    items:
      - key: creds
        path: nats.creds
{{- end }}
{{- end -}}

{{- define "wintermute.homeMounts" -}}
- name: home
  mountPath: /data
- name: tmp
  mountPath: /tmp
- name: config
  mountPath: /data/config.toml
  subPath: config.toml
  readOnly: true
{{- if and (not .Values.nats.enabled) (eq .Values.nats.auth.type "creds") .Values.nats.auth.existingSecret }}
- name: nats-creds
  mountPath: /etc/wintermute/nats
  readOnly: true
{{- end }}
{{- end -}}

{{/* The init container of every wintermute pod: lay out the home as `up` does (folders, the
scripts git repository, prompt files) and apply the seed from values.prompts. Idempotent and
serialised by a lock, so all pods may run it at once; a file the agent changed is kept. */}}
{{- define "wintermute.initContainer" -}}
- name: init-home
  image: {{ include "wintermute.image" . | quote }}
  imagePullPolicy: {{ .Values.image.pullPolicy }}
  args: ["init", "--seed", "/seed"]
  env:
    - name: WINTERMUTE_HOME
      value: /data
    - name: TMPDIR
      value: /tmp
  securityContext:
    {{- toYaml .Values.securityContext | nindent 4 }}
  resources:
    {{- toYaml .Values.initResources | nindent 4 }}
  volumeMounts:
    - name: home
      mountPath: /data
    - name: tmp
      mountPath: /tmp
    - name: seed
      mountPath: /seed
      readOnly: true
{{- end -}}

{{/* Liveness, readiness and start-up probes from the actor's own health record. */}}
{{- define "wintermute.probes" -}}
{{- $pr := .root.Values.probes -}}
startupProbe:
  exec:
    command: ["wintermute", "probe", {{ .name | quote }}]
  periodSeconds: {{ $pr.startup.periodSeconds }}
  timeoutSeconds: {{ $pr.timeoutSeconds }}
  failureThreshold: {{ $pr.startup.failureThreshold }}
readinessProbe:
  exec:
    command: ["wintermute", "probe", {{ .name | quote }}]
  periodSeconds: {{ $pr.readiness.periodSeconds }}
  timeoutSeconds: {{ $pr.timeoutSeconds }}
  failureThreshold: {{ $pr.readiness.failureThreshold }}
livenessProbe:
  exec:
    command: ["wintermute", "probe", {{ .name | quote }}]
  periodSeconds: {{ $pr.liveness.periodSeconds }}
  timeoutSeconds: {{ $pr.timeoutSeconds }}
  failureThreshold: {{ $pr.liveness.failureThreshold }}
{{- end -}}

{{/* Which config.toml sections each actor reads: a change rolls only those pods. A section
not listed here rolls every actor (the safe default for keys added later). */}}
{{- define "wintermute.configReaders" -}}
{{- toJson (dict
  "models" (list "llm" "executor" "heartbeat" "memory" "observer" "planner")
  "budget" (list "channel" "planner" "llm" "executor" "heartbeat")
  "channels" (list "channel")
  "executor" (list "executor")
  "egress" (list "executor")
  "sandbox" (list "executor")
  "observer" (list "observer")
  "memory" (list "memory")
) -}}
{{- end -}}

{{/* Pod annotations of one actor: call with (dict "root" $ "name" "llm"). */}}
{{- define "wintermute.actorAnnotations" -}}
{{- $readers := include "wintermute.configReaders" .root | fromJson -}}
{{- $mine := dict -}}
{{- range $section, $value := .root.Values.config -}}
{{- $who := get $readers $section -}}
{{- if or (not $who) (has $.name $who) -}}
{{- $_ := set $mine $section $value -}}
{{- end -}}
{{- end -}}
checksum/config: {{ toJson $mine | sha256sum }}
{{- with .root.Values.podAnnotations }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* Pod annotations of the supervisor: the whole config and the seed. */}}
{{- define "wintermute.podAnnotations" -}}
checksum/config: {{ include "wintermute.configToml" . | sha256sum }}
checksum/seed: {{ toJson .Values.prompts | sha256sum }}
{{- with .Values.podAnnotations }}
{{ toYaml . }}
{{- end }}
{{- end -}}
