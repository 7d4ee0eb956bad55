{{/*
The container of a Steward background process (ledger, scheduler, worker, executor):
(list $ "ledger" resources extraEnvYaml)
*/}}
{{- define "steward.processContainer" -}}
{{- $ctx := index . 0 -}}
{{- $proc := index . 1 -}}
- name: {{ $proc }}
  image: {{ include "steward.image" $ctx }}
  imagePullPolicy: {{ $ctx.Values.image.pullPolicy }}
  args: ["run", {{ $proc | quote }}]
  ports:
    - name: metrics
      containerPort: {{ $ctx.Values.metrics.port }}
  envFrom:
    {{- include "steward.envFrom" $ctx | nindent 4 }}
  env:
    # the process's metrics server (steward.metrics): this port, on every interface of the pod
    - name: STEWARD_METRICS_PORT
      value: {{ $ctx.Values.metrics.port | quote }}
    - name: STEWARD_METRICS_HOST
      value: "0.0.0.0"
    {{- include "steward.componentEnv" (index (dict "worker" "workflows") $proc | default $proc) | nindent 4 }}
    {{- with index . 3 }}
    {{- . | nindent 4 }}
    {{- end }}
    {{- if has $proc (list "ledger" "scheduler") }}
    {{- include "steward.storeEnv" $ctx | nindent 4 }}
    {{- end }}
    {{- include "steward.extraEnv" $ctx | nindent 4 }}
  {{- if $ctx.Values.metrics.serving }}
  readinessProbe:
    httpGet:
      path: /ready
      port: metrics
    periodSeconds: 10
    failureThreshold: 3
  livenessProbe:
    httpGet:
      path: /metrics
      port: metrics
    initialDelaySeconds: 30
    periodSeconds: 20
    failureThreshold: 6
  {{- end }}
  resources:
    {{- toYaml (index . 2) | nindent 4 }}
  securityContext:
    {{- if eq $proc "executor" }}
    {{- include "steward.executorSecurityContext" $ctx | nindent 4 }}
    {{- else }}
    {{- include "steward.containerSecurityContext" $ctx | nindent 4 }}
    {{- end }}
  volumeMounts:
    {{- include "steward.volumeMounts" (list $ctx (eq $proc "ledger")) | nindent 4 }}
{{- end -}}

{{/* Pod spec lines shared by the Steward processes. */}}
{{- define "steward.podCommon" -}}
{{ include "steward.podIdentity" . }}
securityContext:
  {{- include "steward.podSecurityContext" . | nindent 2 }}
{{- end -}}

{{/* The service account and pull secrets of a Steward pod (the executor's has its own securityContext). */}}
{{- define "steward.podIdentity" -}}
serviceAccountName: {{ include "steward.serviceAccountName" . }}
automountServiceAccountToken: false
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/* A headless Service for a StatefulSet's pods, exposing the metrics port: (list $ "ledger") */}}
{{- define "steward.metricsService" -}}
{{- $ctx := index . 0 -}}
{{- $proc := index . 1 -}}
apiVersion: v1
kind: Service
metadata:
  name: {{ include "steward.component" (list $ctx $proc) }}
  labels:
    {{- include "steward.labels" (list $ctx $proc) | nindent 4 }}
    steward.io/metrics: "true"
spec:
  clusterIP: None
  selector:
    {{- include "steward.selectorLabels" (list $ctx $proc) | nindent 4 }}
  ports:
    - name: metrics
      port: {{ $ctx.Values.metrics.port }}
      targetPort: metrics
{{- end -}}
