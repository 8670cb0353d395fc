{{- define "agentd.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "agentd.fullname" -}}
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

{{- define "agentd.bridgeName" -}}
{{- printf "%s-bridge" (include "agentd.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "agentd.labels" -}}
app.kubernetes.io/name: {{ include "agentd.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{ include "agentd.commonLabels" . }}
{{- end }}

{{/* The labels beside name and instance that every object carries. */}}
{{- define "agentd.commonLabels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/* Selector labels of a component: "server" (agentd serve) or "bridge". */}}
{{- define "agentd.selectorLabels" -}}
app.kubernetes.io/name: {{ include "agentd.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{- define "agentd.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "agentd.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The image reference of {root, image}: by digest when given, else by tag (default the appVersion); never latest. */}}
{{- define "agentd.image" -}}
{{- $img := .image }}
{{- $repo := default .root.Values.image.repository $img.repository }}
{{- $digest := default .root.Values.image.digest $img.digest }}
{{- $tag := default (default .root.Chart.AppVersion .root.Values.image.tag) $img.tag }}
{{- if $digest }}
{{- printf "%s@%s" $repo $digest }}
{{- else }}
{{- if eq $tag "latest" }}{{ fail "image.tag: latest is not a version; name one, or a digest" }}{{ end }}
{{- printf "%s:%s" $repo $tag }}
{{- end }}
{{- end }}

{{/* The Secret of agentd's environment variables (provider keys, the DSN), if any. */}}
{{- define "agentd.envSecretName" -}}
{{- if .Values.secrets.existingSecret }}
{{- .Values.secrets.existingSecret }}
{{- else if or .Values.secrets.env .Values.secrets.storeDSN }}
{{- printf "%s-env" (include "agentd.fullname" .) }}
{{- end }}
{{- end }}

{{/* The Secret holding the store's encryption key (key encryption-key), if any. */}}
{{- define "agentd.encryptionKeySecretName" -}}
{{- if .Values.secrets.existingEncryptionKeySecret }}
{{- .Values.secrets.existingEncryptionKeySecret }}
{{- else if .Values.secrets.encryptionKey }}
{{- printf "%s-encryption-key" (include "agentd.fullname" .) }}
{{- end }}
{{- end }}

{{/* Whether agentd.yaml goes into a Secret (it holds API-key hashes). */}}
{{- define "agentd.configInSecret" -}}
{{- if .Values.auth.apiKeys }}true{{ end }}
{{- end }}

{{/* agentd.yaml: .Values.config with the settings the chart derives over it. */}}
{{- define "agentd.config" -}}
{{- $cfg := deepCopy (default (dict) .Values.config) }}
{{- $_ := set $cfg "listen" (printf "0.0.0.0:%d" (int .Values.service.port)) }}
{{- $_ = set $cfg "state_dir" "/var/lib/agentd" }}
{{- $_ = set $cfg "insecure" .Values.insecure }}
{{- $_ = set $cfg "shutdown_drain" (printf "%ds" (int .Values.shutdownDrainSeconds)) }}
{{- $_ = set $cfg "shutdown_grace" (printf "%ds" (int .Values.shutdownGraceSeconds)) }}
{{- $metrics := dict "listen" "" }}
{{- if .Values.metrics.enabled }}
{{- $_ = set $metrics "listen" (printf "0.0.0.0:%d" (int .Values.metrics.port)) }}
{{- end }}
{{- $_ = set $cfg "metrics" $metrics }}
{{- $store := deepCopy (default (dict) $cfg.store) }}
{{- $_ = set $store "driver" .Values.store.driver }}
{{- if .Values.store.encryptionKey }}
{{- $_ = set $store "encryption_key_file" "/etc/agentd/secrets/encryption-key" }}
{{- end }}
{{- $_ = set $cfg "store" $store }}
{{- $bridge := deepCopy (default (dict) $cfg.bridge) }}
{{- $_ = set $bridge "listen" (printf "0.0.0.0:%d" (int .Values.bridge.port)) }}
{{- if .Values.bridge.enabled }}
{{- $_ = set $bridge "address" (printf "dns:///%s.%s.svc:%d" (include "agentd.bridgeName" .) .Release.Namespace (int .Values.bridge.port)) }}
{{- end }}
{{- $_ = set $cfg "bridge" $bridge }}
{{- if .Values.tls.enabled }}
{{- $tls := dict "cert_file" "/etc/agentd/tls/tls.crt" "key_file" "/etc/agentd/tls/tls.key" }}
{{- if .Values.tls.clientCA }}
{{- $_ = set $tls "client_ca_file" "/etc/agentd/tls/ca.crt" }}
{{- end }}
{{- $_ = set $cfg "tls" $tls }}
{{- end }}
{{- if .Values.auth.apiKeys }}
{{- $auth := deepCopy (default (dict) $cfg.auth) }}
{{- $_ = set $auth "api_keys" .Values.auth.apiKeys }}
{{- $_ = set $cfg "auth" $auth }}
{{- end }}
{{- toYaml $cfg }}
{{- end }}

{{/* Render-time checks: what agentd would refuse at start, said at install. */}}
{{- define "agentd.validate" -}}
{{- $authenticated := or .Values.auth.apiKeys (and .Values.config .Values.config.auth) }}
{{- if and (not $authenticated) (not .Values.insecure) }}
{{- fail "agentd listens on the pod's address: configure auth (auth.apiKeys, or config.auth) or set insecure: true" }}
{{- end }}
{{- if and .Values.bridge.enabled (not .Values.insecure) }}
{{- fail "bridge.enabled: the hop to the bridge is plaintext in this chart; set insecure: true (the bridge's NetworkPolicy admits only agentd's pods)" }}
{{- end }}
{{- if and (gt (int .Values.replicaCount) 1) (ne .Values.store.driver "postgres") }}
{{- fail "replicaCount > 1 needs store.driver: postgres (SQLite is a file on one pod)" }}
{{- end }}
{{- if and (eq .Values.store.driver "postgres") (not .Values.secrets.existingSecret) (not .Values.secrets.storeDSN) }}
{{- fail "store.driver postgres: give secrets.storeDSN, or secrets.existingSecret with AGENTD_STORE_DSN" }}
{{- end }}
{{- if and .Values.store.encryptionKey (not (include "agentd.encryptionKeySecretName" .)) }}
{{- fail "store.encryptionKey: give secrets.encryptionKey, or secrets.existingEncryptionKeySecret" }}
{{- end }}
{{- if and .Values.tls.enabled (not .Values.tls.secretName) }}
{{- fail "tls.enabled: name the kubernetes.io/tls Secret in tls.secretName" }}
{{- end }}
{{- if not (has .Values.store.driver (list "sqlite" "postgres")) }}
{{- fail "store.driver: sqlite or postgres" }}
{{- end }}
{{- end }}

{{/*
The pod of a component, from {root, component ("server" or "bridge"), args,
port, image, resources}: non-root, read-only root filesystem, no
capabilities, gRPC probes on the health names liveness and readiness, a
writable /tmp, agentd.yaml from the config volume, and the secrets.
*/}}
{{- define "agentd.pod" -}}
{{- $root := .root }}
{{- $v := $root.Values }}
{{- $server := eq .component "server" }}
{{- $tls := and $server $v.tls.enabled }}
metadata:
  labels:
    {{- include "agentd.selectorLabels" (dict "root" $root "component" .component) | nindent 4 }}
    {{- include "agentd.commonLabels" $root | nindent 4 }}
  annotations:
    checksum/config: {{ include "agentd.config" $root | sha256sum }}
    {{- with $v.podAnnotations }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
spec:
  serviceAccountName: {{ include "agentd.serviceAccountName" $root }}
  automountServiceAccountToken: false
  terminationGracePeriodSeconds: {{ $v.terminationGracePeriodSeconds }}
  {{- with $v.imagePullSecrets }}
  imagePullSecrets:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  securityContext:
    runAsNonRoot: true
    runAsUser: 65532
    runAsGroup: 65532
    fsGroup: 65532
    seccompProfile:
      type: RuntimeDefault
  containers:
    - name: {{ ternary "agentd" "bridge" $server }}
      image: {{ include "agentd.image" (dict "root" $root "image" .image) }}
      imagePullPolicy: {{ $v.image.pullPolicy }}
      args:
        {{- toYaml .args | nindent 8 }}
      ports:
        - name: grpc
          containerPort: {{ .port }}
          protocol: TCP
        {{- if $v.metrics.enabled }}
        - name: metrics
          containerPort: {{ $v.metrics.port }}
          protocol: TCP
        {{- end }}
      env:
        - name: AGENTD_CONFIG
          value: /etc/agentd/config/agentd.yaml
        {{- if not $server }}
        # The bridge keeps no store and calls no provider: it gets neither
        # the DSN nor the provider keys, and needs no store settings.
        - name: AGENTD_STORE_DRIVER
          value: sqlite
        {{- end }}
        {{- with $v.extraEnv }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
      {{- if $server }}
      {{- with include "agentd.envSecretName" $root }}
      envFrom:
        - secretRef:
            name: {{ . }}
      {{- end }}
      {{- end }}
      {{- if $tls }}
      livenessProbe:
        tcpSocket:
          port: grpc
        periodSeconds: 10
        failureThreshold: 3
      readinessProbe:
        tcpSocket:
          port: grpc
        periodSeconds: 5
        failureThreshold: 2
      {{- else }}
      livenessProbe:
        grpc:
          port: {{ .port }}
          service: liveness
        periodSeconds: 10
        timeoutSeconds: 2
        failureThreshold: 3
      readinessProbe:
        grpc:
          port: {{ .port }}
          service: readiness
        periodSeconds: 5
        timeoutSeconds: 2
        failureThreshold: 2
      {{- end }}
      resources:
        {{- toYaml .resources | nindent 8 }}
      securityContext:
        runAsNonRoot: true
        readOnlyRootFilesystem: true
        allowPrivilegeEscalation: false
        capabilities:
          drop: [ALL]
      volumeMounts:
        - name: config
          mountPath: /etc/agentd/config
          readOnly: true
        - name: tmp
          mountPath: /tmp
        {{- if $server }}
        - name: state
          mountPath: /var/lib/agentd
        {{- if $v.store.encryptionKey }}
        - name: encryption-key
          mountPath: /etc/agentd/secrets
          readOnly: true
        {{- end }}
        {{- if $tls }}
        - name: tls
          mountPath: /etc/agentd/tls
          readOnly: true
        {{- end }}
        {{- end }}
  volumes:
    - name: config
      {{- if include "agentd.configInSecret" $root }}
      secret:
        secretName: {{ include "agentd.fullname" $root }}-config
      {{- else }}
      configMap:
        name: {{ include "agentd.fullname" $root }}-config
      {{- end }}
    - name: tmp
      emptyDir: {}
    {{- if $server }}
    - name: state
      {{- if $v.persistence.existingClaim }}
      persistentVolumeClaim:
        claimName: {{ $v.persistence.existingClaim }}
      {{- else }}
      emptyDir: {}
      {{- end }}
    {{- if $v.store.encryptionKey }}
    - name: encryption-key
      secret:
        secretName: {{ include "agentd.encryptionKeySecretName" $root }}
        items:
          - key: encryption-key
            path: encryption-key
    {{- end }}
    {{- if $tls }}
    - name: tls
      secret:
        secretName: {{ $v.tls.secretName }}
    {{- end }}
    {{- end }}
  {{- with $v.nodeSelector }}
  nodeSelector:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with $v.tolerations }}
  tolerations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with $v.affinity }}
  affinity:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with $v.topologySpreadConstraints }}
  topologySpreadConstraints:
    {{- toYaml . | nindent 4 }}
  {{- end }}
{{- end }}
