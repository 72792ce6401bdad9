{{/* The flow's objects are named after it: dr-stream-<flow.name>. */}}
{{- define "dr-stream.fullname" -}}
dr-stream-{{ .Values.flow.name }}
{{- end -}}

{{/* What selects the flow's pods: the driver's and its executors'. */}}
{{- define "dr-stream.selector" -}}
app.kubernetes.io/name: dr-stream
dr-stream/flow: {{ .Values.flow.name }}
{{- end -}}
