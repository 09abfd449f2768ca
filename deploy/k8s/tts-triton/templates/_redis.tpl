{{/* Utterance cache (values `cache:`): names, labels and the Triton container's TTS_CACHE_* environment. */}}

{{- define "tts-triton.redisName" -}}
{{- printf "%s-redis" (include "tts-triton.fullname" . | trunc 57 | trimSuffix "-") }}
{{- end }}

{{/* Redis pods: a name of their own, so that the Triton Deployment's selector never matches them. */}}
{{- define "tts-triton.redisSelectorLabels" -}}
app.kubernetes.io/name: {{ printf "%s-redis" (include "tts-triton.name" .) | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "tts-triton.redisLabels" -}}
helm.sh/chart: {{ include "tts-triton.chart" . }}
{{ include "tts-triton.redisSelectorLabels" . }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/component: utterance-cache
{{- end }}

{{/* Secret holding the Redis password: the user's, or the one the chart creates for the bundled Redis. */}}
{{- define "tts-triton.redisPasswordSecret" -}}
{{- default (printf "%s-password" (include "tts-triton.redisName" .)) .Values.cache.redis.passwordSecret }}
{{- end }}

{{/* The cache's URL: the existing Redis's, else the bundled one's Service. */}}
{{- define "tts-triton.redisUrl" -}}
{{- if .Values.cache.redis.url }}
{{- .Values.cache.redis.url }}
{{- else if .Values.cache.bundled.enabled }}
{{- printf "redis://%s:%d/0" (include "tts-triton.redisName" .) (int64 .Values.cache.bundled.port) }}
{{- else }}
{{- fail "cache.enabled needs cache.redis.url (an existing Redis) or cache.bundled.enabled=true" }}
{{- end }}
{{- end }}

{{/* Environment of the Triton container (tts_triton.cache.settings reads TTS_CACHE_*); empty when the cache is off. */}}
{{- define "tts-triton.cacheEnv" -}}
{{- if .Values.cache.enabled }}
- name: TTS_CACHE_REDIS_URL
  value: {{ include "tts-triton.redisUrl" . | quote }}
{{- if or .Values.cache.redis.passwordSecret .Values.cache.bundled.enabled }}
- name: TTS_CACHE_REDIS_PASSWORD
  valueFrom:
    secretKeyRef:
      name: {{ include "tts-triton.redisPasswordSecret" . }}
      key: {{ .Values.cache.redis.passwordKey }}
{{- end }}
- name: TTS_CACHE_NAMESPACE
  value: {{ default (include "tts-triton.fullname" .) .Values.cache.namespace | quote }}
- name: TTS_CACHE_TTL_S
  value: {{ int64 .Values.cache.ttlSeconds | quote }}
- name: TTS_CACHE_TIMEOUT_S
  value: {{ .Values.cache.timeoutSeconds | quote }}
- name: TTS_CACHE_MAX_TEXT_CHARS
  value: {{ int64 .Values.cache.maxTextChars | quote }}
- name: TTS_CACHE_MAX_ENTRY_BYTES
  value: {{ int64 .Values.cache.maxEntryBytes | quote }}
{{- end }}
{{- end }}
