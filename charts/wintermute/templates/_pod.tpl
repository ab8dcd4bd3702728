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

{{/* Every pod's WINTERMUTE_HOME: an emptyDir at /data with config.toml mounted into it. */}}
{{- define "wintermute.homeVolumes" -}}
- name: home
  emptyDir:
    sizeLimit: {{ .Values.persistence.homeSizeLimit }}
- name: tmp
  emptyDir:
    sizeLimit: 256Mi
- name: config
  configMap:
    name: {{ include "wintermute.fullname" . }}-config
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
{{- end -}}

{{/* Pod annotations: roll the pods when config.toml changes. */}}
{{- define "wintermute.podAnnotations" -}}
checksum/config: {{ include "wintermute.configToml" . | sha256sum }}
{{- with .Values.podAnnotations }}
{{ toYaml . }}
{{- end }}
{{- end -}}
