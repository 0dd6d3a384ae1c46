{{- define "acpgate.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "acpgate.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "acpgate.labels" -}}
{{ include "acpgate.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "acpgate.peers" -}}
{{ include "acpgate.fullname" . }}-peers
{{- end -}}

{{- define "acpgate.clusterSecret" -}}
{{- .Values.cluster.existingSecret | default (printf "%s-cluster" (include "acpgate.fullname" .)) -}}
{{- end -}}

{{/* The gateway's configuration, from the values. */}}
{{- define "acpgate.config" -}}
{{- $c := dict "listen" (printf "0.0.0.0:%v" .Values.service.port) "shutdown_grace" (printf "%vs" .Values.shutdownGraceSeconds) "store" .Values.store.type "limits" .Values.limits "agents" .Values.agents -}}
{{- if .Values.insecure }}{{ $_ := set $c "insecure" true }}{{ end -}}
{{- if eq .Values.store.type "sqlite" }}{{ $_ := set $c "state_dir" "/var/lib/acpgate" }}{{ end -}}
{{- if eq .Values.store.type "postgres" }}{{ $_ := set $c "postgres" (dict "dsn" "${ACPGATE_POSTGRES_DSN}" "max_conns" .Values.store.postgres.maxConns) }}{{ end -}}
{{- if .Values.cluster.enabled -}}
{{- $cl := dict "replica_id" "${POD_NAME}" "advertise" (printf "${POD_NAME}.%s.${POD_NAMESPACE}.svc:%v" (include "acpgate.peers" .) .Values.service.port) "secret_file" "/etc/acpgate/cluster/secret" "lease_ttl" .Values.cluster.leaseTTL -}}
{{- if .Values.tls.enabled }}{{ $_ := set $cl "ca_file" "/etc/acpgate/tls/ca.crt" }}{{ end -}}
{{- $_ := set $c "cluster" $cl -}}
{{- end -}}
{{- if .Values.metrics.enabled }}{{ $_ := set $c "metrics" (dict "listen" (printf "0.0.0.0:%v" .Values.metrics.port)) }}{{ end -}}
{{- if .Values.tls.enabled -}}
{{- $t := dict "cert_file" "/etc/acpgate/tls/tls.crt" "key_file" "/etc/acpgate/tls/tls.key" -}}
{{- if or .Values.tls.verifyClients (eq .Values.auth.mode "mtls") }}{{ $_ := set $t "client_ca_file" "/etc/acpgate/tls/ca.crt" }}{{ end -}}
{{- if .Values.tls.clientAuth }}{{ $_ := set $t "client_auth" .Values.tls.clientAuth }}{{ end -}}
{{- $_ := set $c "tls" $t -}}
{{- end -}}
{{- if ne .Values.auth.mode "none" -}}
{{- $a := dict "mode" .Values.auth.mode -}}
{{- if eq .Values.auth.mode "jwt" -}}
{{- $_ := set $a "jwks_file" "/etc/acpgate/jwks/jwks.json" -}}
{{- $_ := set $a "issuer" .Values.auth.jwt.issuer -}}
{{- $_ := set $a "audience" .Values.auth.jwt.audience -}}
{{- if .Values.auth.jwt.claims }}{{ $_ := set $a "claims" .Values.auth.jwt.claims }}{{ end -}}
{{- end -}}
{{- if .Values.auth.admins }}{{ $_ := set $a "admins" .Values.auth.admins }}{{ end -}}
{{- $_ := set $c "auth" $a -}}
{{- end -}}
{{- toYaml (merge (deepCopy .Values.config) $c) -}}
{{- end -}}
