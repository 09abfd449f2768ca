{{/* Chart name, overridable. */}}
{{- define "tts-triton.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Fully qualified app name: <release>-<chart> unless the release name already contains it. */}}
{{- define "tts-triton.fullname" -}}
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

{{/* Name of the headless gRPC Service (suffix kept within the 63-character DNS label limit). */}}
{{- define "tts-triton.grpcServiceName" -}}
{{- printf "%s-grpc" (include "tts-triton.fullname" . | trunc 58 | trimSuffix "-") }}
{{- end }}

{{- define "tts-triton.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Selector labels: stable across upgrades (Deployment selectors are immutable). */}}
{{- define "tts-triton.selectorLabels" -}}
app.kubernetes.io/name: {{ include "tts-triton.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "tts-triton.labels" -}}
helm.sh/chart: {{ include "tts-triton.chart" . }}
{{ include "tts-triton.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/component: inference-server
{{- end }}

{{- define "tts-triton.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{/* The --model-repository argument: the mounted path, or the object-store URI. */}}
{{- define "tts-triton.modelRepository" -}}
{{- $src := .Values.modelRepository.source }}
{{- if eq $src "remote" }}
{{- required "modelRepository.remote.uri is required when modelRepository.source=remote" .Values.modelRepository.remote.uri }}
{{- else if has $src (list "image" "pvc" "initContainer") }}
{{- .Values.modelRepository.path }}
{{- else }}
{{- fail (printf "modelRepository.source must be image, pvc, initContainer or remote (got %q)" $src) }}
{{- end }}
{{- end }}

{{/* Secret holding the key of the restricted control APIs: the user's, or the one the chart creates. */}}
{{- define "tts-triton.adminKeySecret" -}}
{{- default (printf "%s-admin-key" (include "tts-triton.fullname" . | trunc 53 | trimSuffix "-")) .Values.triton.restrictedApis.adminKeySecret }}
{{- end }}

{{/*
Pod securityContext: the chart's hardened defaults (non-root uid/gid 1000, the NGC image's `triton-server`
user; RuntimeDefault seccomp) with the given values dict merged over them. Usage, for any pod of the chart:
  securityContext: {{- include "tts-triton.podSecurityContext" .Values.podSecurityContext | nindent 8 }}
*/}}
{{- define "tts-triton.podSecurityContext" -}}
{{- $defaults := dict "runAsNonRoot" true "runAsUser" 1000 "runAsGroup" 1000 "fsGroup" 1000 "seccompProfile" (dict "type" "RuntimeDefault") }}
{{- toYaml (mergeOverwrite $defaults (deepCopy (default (dict) .))) }}
{{- end }}

{{/*
Container securityContext: no privilege escalation, every capability dropped, read-only root filesystem
(write only to mounted emptyDirs), non-root; the given values dict merged over them. Usage:
  securityContext: {{- include "tts-triton.containerSecurityContext" .Values.securityContext | nindent 12 }}
*/}}
{{- define "tts-triton.containerSecurityContext" -}}
{{- $defaults := dict "allowPrivilegeEscalation" false "privileged" false "readOnlyRootFilesystem" true "runAsNonRoot" true "capabilities" (dict "drop" (list "ALL")) }}
{{- toYaml (mergeOverwrite $defaults (deepCopy (default (dict) .))) }}
{{- end }}

{{/* Label that lets a pod through the NetworkPolicy to Triton's HTTP and gRPC ports (value "true"). */}}
{{- define "tts-triton.clientLabel" -}}
{{- printf "%s-client" (include "tts-triton.fullname" . | trunc 56 | trimSuffix "-") }}
{{- end }}

{{/* Name of the gateway's objects (Deployment, Service, HPA, Secret, Ingress). */}}
{{- define "tts-triton.gatewayName" -}}
{{- printf "%s-gateway" (include "tts-triton.fullname" . | trunc 55 | trimSuffix "-") }}
{{- end }}

{{- define "tts-triton.gatewaySelectorLabels" -}}
app.kubernetes.io/name: {{ include "tts-triton.name" . }}-gateway
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* Secret holding the gateway's API keys (key `keys`, one per line): the user's, or the one the chart creates. */}}
{{- define "tts-triton.gatewayKeysSecret" -}}
{{- default (printf "%s-keys" (include "tts-triton.gatewayName" .)) .Values.gateway.apiKeys.existingSecret }}
{{- end }}

{{/* ConfigMap of the pronunciation lexicon (values `lexicon:`); empty when there is none. */}}
{{- define "tts-triton.lexiconConfigMap" -}}
{{- if .Values.lexicon.existingConfigMap -}}
{{ .Values.lexicon.existingConfigMap }}
{{- else if .Values.lexicon.entries -}}
{{ include "tts-triton.fullname" . }}-lexicon
{{- end -}}
{{- end }}

{{/* An egress rule to the cluster's DNS (any namespace's kube-dns/CoreDNS pods, port 53). */}}
{{- define "tts-triton.dnsEgress" -}}
- to:
    - namespaceSelector: {}
      podSelector:
        matchLabels:
          k8s-app: kube-dns
  ports:
    - port: 53
      protocol: UDP
    - port: 53
      protocol: TCP
{{- end }}
