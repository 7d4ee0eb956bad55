{{/* Names ---------------------------------------------------------------------------------------- */}}
{{- define "steward.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "steward.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else if contains (include "steward.name" .) .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name (include "steward.name" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* "steward.component" (list $ "api") -> <fullname>-api */}}
{{- define "steward.component" -}}
{{- $ctx := index . 0 -}}
{{- printf "%s-%s" (include "steward.fullname" $ctx) (index . 1) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Labels --------------------------------------------------------------------------------------- */}}
{{- define "steward.selectorLabels" -}}
{{- $ctx := index . 0 -}}
app.kubernetes.io/name: {{ include "steward.name" $ctx }}
app.kubernetes.io/instance: {{ $ctx.Release.Name }}
app.kubernetes.io/component: {{ index . 1 }}
{{- end -}}

{{- define "steward.labels" -}}
{{- $ctx := index . 0 -}}
{{ include "steward.selectorLabels" . }}
app.kubernetes.io/part-of: steward
app.kubernetes.io/version: {{ $ctx.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ $ctx.Release.Service }}
helm.sh/chart: {{ printf "%s-%s" $ctx.Chart.Name $ctx.Chart.Version | replace "+" "_" }}
{{- end -}}

{{/* Images --------------------------------------------------------------------------------------- */}}
{{- define "steward.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{- define "steward.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "steward.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* Secrets and addresses ------------------------------------------------------------------------ */}}
{{- define "steward.secretName" -}}
{{- default (include "steward.component" (list . "secrets")) .Values.secrets.existingSecret -}}
{{- end -}}

{{- define "steward.kafkaBootstrap" -}}
{{- if .Values.kafka.enabled -}}
{{- $svc := include "steward.component" (list . "kafka-headless") -}}
{{- $ns := .Release.Namespace -}}
{{- $dom := .Values.clusterDomain -}}
{{- $kafka := include "steward.component" (list . "kafka") -}}
{{- $out := list -}}
{{- range $i := until (int .Values.kafka.replicas) -}}
{{- $out = append $out (printf "%s-%d.%s.%s.svc.%s:9092" $kafka $i $svc $ns $dom) -}}
{{- end -}}
{{- join "," $out -}}
{{- else -}}
{{- required "kafka.external.bootstrap is required when kafka.enabled is false" .Values.kafka.external.bootstrap -}}
{{- end -}}
{{- end -}}

{{/* host:port of the read-write PostgreSQL endpoint */}}
{{- define "steward.postgresHost" -}}
{{- $mode := .Values.postgresql.mode -}}
{{- if eq $mode "bundled" -}}
{{- include "steward.component" (list . "postgres-primary") -}}
{{- else if eq $mode "cloudnativepg" -}}
{{- printf "%s-rw" (include "steward.component" (list . "pg")) -}}
{{- else -}}
{{- required "postgresql.external.host is required when postgresql.mode is external" .Values.postgresql.external.host -}}
{{- end -}}
{{- end -}}

{{- define "steward.postgresPort" -}}
{{- if eq .Values.postgresql.mode "external" -}}{{ .Values.postgresql.external.port }}{{- else -}}5432{{- end -}}
{{- end -}}

{{/* Pod-level pieces shared by every Steward process --------------------------------------------- */}}
{{- define "steward.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 10001
runAsGroup: 10001
fsGroup: 10001
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{- define "steward.containerSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities:
  drop: ["ALL"]
{{- end -}}

{{/*
The executor is the chart's one root container (docs/security.md "Jobs"): it runs each job as its project's
OS user (STEWARD_EXECUTOR_ISOLATION=user), which needs root with exactly these capabilities: CHOWN
(useradd's files, the job's folders handed to its user), DAC_OVERRIDE (the executor reaches into folders
of mode 0700 that its jobs' users own), FOWNER (chmod on those folders), SETUID and SETGID (the shim
switches to the job's user and group, with no supplementary groups), KILL (the checkpoint signal and
SIGKILL reach job processes of other users). No privilege escalation: the jobs it starts keep no
capabilities. Writable root filesystem: useradd writes /etc/passwd, /etc/group and /etc/shadow.
*/}}
{{- define "steward.executorPodSecurityContext" -}}
runAsNonRoot: false
runAsUser: 0
runAsGroup: 0
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{- define "steward.executorSecurityContext" -}}
runAsNonRoot: false
runAsUser: 0
runAsGroup: 0
allowPrivilegeEscalation: false
readOnlyRootFilesystem: false
capabilities:
  drop: ["ALL"]
  add: ["CHOWN", "DAC_OVERRIDE", "FOWNER", "KILL", "SETGID", "SETUID"]
{{- end -}}

{{/* The app's store URL (the processes that use the store: api, ledger, scheduler). */}}
{{- define "steward.storeEnv" -}}
- name: STEWARD_STORE_URL
  valueFrom:
    secretKeyRef:
      name: {{ include "steward.secretName" . }}
      key: store-url
{{- end -}}

{{- define "steward.extraEnv" -}}
{{- with .Values.steward.extraEnv }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- define "steward.envFrom" -}}
- configMapRef:
    name: {{ include "steward.component" (list . "config") }}
{{- end -}}

{{/* Mounts: (list $ withKey). Only the ledger, which signs the audit checkpoints, sees the key. */}}
{{- define "steward.volumeMounts" -}}
- name: tmp
  mountPath: /tmp
- name: run
  mountPath: /var/lib/steward
# the default STEWARD_KAFKA_SECRETS_DIR: <STEWARD_RUN_DIR>/secrets/kafka
- name: kafka
  mountPath: /var/lib/steward/secrets/kafka
  readOnly: true
{{- if index . 1 }}
- name: keys
  mountPath: /etc/steward/keys
  readOnly: true
{{- end }}
{{- end -}}

{{- define "steward.volumes" -}}
{{- $ctx := index . 0 -}}
{{- $component := index . 2 -}}
- name: tmp
  emptyDir: {}
- name: run
  emptyDir: {}
# this component's Kafka password only (an executor pod: the executors' ones, ADR 0036)
- name: kafka
  secret:
    secretName: {{ include "steward.secretName" $ctx }}
    defaultMode: 0400
    items:
      - key: {{ printf "kafka-%s-password" $component }}
        path: {{ printf "steward-%s.password" $component }}
{{- if index . 1 }}
- name: keys
  secret:
    secretName: {{ include "steward.secretName" $ctx }}
    defaultMode: 0440
    items:
      - key: checkpoint-ed25519.pem
        path: checkpoint-ed25519.pem
{{- end }}
{{- end -}}

{{/* Pod annotations: config checksum (roll on change) and Prometheus scraping. (list $ port) */}}
{{- define "steward.podAnnotations" -}}
{{- $ctx := index . 0 -}}
checksum/config: {{ include (print $ctx.Template.BasePath "/configmap.yaml") $ctx | sha256sum }}
{{- if $ctx.Values.metrics.podAnnotations }}
prometheus.io/scrape: "true"
prometheus.io/port: {{ index . 1 | quote }}
prometheus.io/path: /metrics
{{- end }}
{{- with $ctx.Values.podAnnotations }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* The live value of a key of the release's Secret, or nothing: (list $ key). On upgrades this keeps
generated passwords and keys; under `helm template` (no cluster) it is always empty. */}}
{{- define "steward.liveSecretKey" -}}
{{- $ctx := index . 0 -}}
{{- $key := index . 1 -}}
{{- $live := lookup "v1" "Secret" $ctx.Release.Namespace (include "steward.secretName" $ctx) -}}
{{- if and $live $live.data (hasKey $live.data $key) -}}
{{- index $live.data $key | b64dec -}}
{{- end -}}
{{- end -}}

{{/* A secret value: the given one, else the live one, else random: (list $ key given length). */}}
{{- define "steward.secretValue" -}}
{{- $ctx := index . 0 -}}
{{- index . 2 | default (include "steward.liveSecretKey" (list $ctx (index . 1))) | default (randAlphaNum (index . 3)) -}}
{{- end -}}

{{/* A Kafka cluster id: a Uuid as 22 base64url characters; the last one carries 2 bits, so it is one
of A, Q, g, w (the other 4 bits zero). */}}
{{- define "steward.kafkaClusterId" -}}
{{- printf "%s%s" (randAlphaNum 21) (index (list "A" "Q" "g" "w") (randInt 0 4)) -}}
{{- end -}}

{{/* The environment naming a process's Steward component, whose Kafka password is mounted (ADR 0036). */}}
{{- define "steward.componentEnv" -}}
- name: STEWARD_COMPONENT
  value: {{ . | quote }}
{{- end -}}

{{/* The Secret holding executor node N's Kafka password and nothing else: (list $ N). With
secrets.existingSecret set, the operator provides it under this name (<existingSecret>-executor-<node>). */}}
{{- define "steward.executorSecretName" -}}
{{- printf "%s-executor-%s" (include "steward.secretName" (index . 0)) (index . 1) -}}
{{- end -}}

{{/* Projected-volume sources with every principal's password file (steward-<name>.password): the
components' from the release's Secret, each executor node's from its own Secret. Only the brokers' format
step and the enrolment Job mount them. */}}
{{- define "steward.kafkaUserSources" -}}
- secret:
    name: {{ include "steward.secretName" . }}
    items:
      {{- range $c := splitList " " (include "steward.kafkaComponents" .) }}
      - key: {{ printf "kafka-%s-password" $c }}
        path: {{ printf "steward-%s.password" $c }}
      {{- end }}
{{- range $n := include "steward.executorIds" . | fromJsonArray }}
- secret:
    name: {{ include "steward.executorSecretName" (list $ $n) }}
    items:
      - key: {{ printf "kafka-executor-%s-password" $n }}
        path: {{ printf "steward-executor-%s.password" $n }}
{{- end }}
{{- end -}}

{{/* Every executor id with a Kafka principal of its own (ADR 0036), as a JSON list: the node agents'
(executor.nodes) and the Kubernetes executor's (kubernetesExecutor.id, when enabled). */}}
{{- define "steward.executorIds" -}}
{{- $ids := .Values.executor.nodes | default list -}}
{{- if .Values.kubernetesExecutor.enabled -}}
{{- $ids = append $ids .Values.kubernetesExecutor.id -}}
{{- end -}}
{{- toJson $ids -}}
{{- end -}}

{{/* The Kafka principals' password keys of the Secret (without the executors'). */}}
{{- define "steward.kafkaComponents" -}}
admin controller api ledger scheduler workflows
{{- end -}}
