#!/usr/bin/env bash
# The same flow as spark-application.yaml, without the operator: plain spark-submit to a
# Kubernetes API server, through ./spark-submit.sh (which runs the image's job file and ships the
# flow file with --files; on Kubernetes a local file travels through the upload path).
#   K8S_API=https://api.example.com:6443 deploy/kubernetes/spark-submit-k8s.sh conf/dc1-to-dc2.yaml
# Secrets come from the Kubernetes Secret, never from this shell; Spark's RPC secret from the
# Secret dr-stream-dc1-to-dc2-rpc (key `secret`, mounted on the driver and executors: see
# docs/deploying.md). Nothing restarts a driver submitted this way when it dies: to run a flow
# for good, apply flow-statefulset.yaml (or the operator's spark-application.yaml,
# restartPolicy: Always).
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
flow=${1:?usage: $0 FLOW.yaml}
secret=dr-stream-dc1-to-dc2
exec "$here/spark-submit.sh" "$flow" \
  --master "k8s://${K8S_API:?set K8S_API to the API server URL}" \
  --deploy-mode cluster \
  --conf spark.kubernetes.namespace=dr-stream \
  --conf spark.kubernetes.container.image="${IMAGE:-registry.example.com/dr-stream:0.2.0}" \
  --conf spark.kubernetes.authenticate.driver.serviceAccountName=dr-stream \
  --conf spark.kubernetes.file.upload.path=s3a://dr-stream-dc2/uploads \
  --conf spark.kubernetes.driver.secretKeyRef.DC1_PASSWORD=$secret:DC1_PASSWORD \
  --conf spark.kubernetes.driver.secretKeyRef.DC2_PASSWORD=$secret:DC2_PASSWORD \
  --conf spark.kubernetes.driver.secretKeyRef.AWS_ACCESS_KEY_ID=$secret:AWS_ACCESS_KEY_ID \
  --conf spark.kubernetes.driver.secretKeyRef.AWS_SECRET_ACCESS_KEY=$secret:AWS_SECRET_ACCESS_KEY \
  --conf spark.kubernetes.executor.secretKeyRef.AWS_ACCESS_KEY_ID=$secret:AWS_ACCESS_KEY_ID \
  --conf spark.kubernetes.executor.secretKeyRef.AWS_SECRET_ACCESS_KEY=$secret:AWS_SECRET_ACCESS_KEY \
  --conf spark.kubernetes.driver.secrets.kafka-ca=/etc/dr-stream/tls \
  --conf spark.kubernetes.executor.secrets.kafka-ca=/etc/dr-stream/tls \
  --conf spark.hadoop.fs.s3a.aws.credentials.provider=software.amazon.awssdk.auth.credentials.EnvironmentVariableCredentialsProvider \
  --conf spark.executor.instances=2
