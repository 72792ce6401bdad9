#!/bin/bash
# dr-stream's image entry point: what Spark on Kubernetes asks a container to run.
#
# Spark starts its driver pod with the argument `driver` followed by spark-submit's own
# arguments, and each executor pod with `executor` and its settings in SPARK_* variables.
# `flow FLOW.yaml [spark-submit options]` makes this pod a flow's driver
# (deploy/kubernetes/flow-statefulset.yaml). Anything else (a command of dr-stream's, a shell)
# runs as given. tini is PID 1, so signals reach the JVM and its children are reaped.
set -euo pipefail

: "${SPARK_HOME:=/opt/spark}"
: "${JAVA_HOME:=/usr/lib/jvm/java-17-openjdk-amd64}"

# Spark's classpath: its configuration (Hadoop's too, when mounted), its jars, then any extra.
classpath="${SPARK_HOME}/jars/*"
[ -n "${SPARK_EXTRA_CLASSPATH:-}" ] && classpath="${classpath}:${SPARK_EXTRA_CLASSPATH}"
[ -n "${HADOOP_CONF_DIR:-}" ] && classpath="${HADOOP_CONF_DIR}:${classpath}"
classpath="${SPARK_CONF_DIR:-${SPARK_HOME}/conf}:${classpath}"

case "${1:-}" in
  driver)
    shift
    command=("${SPARK_HOME}/bin/spark-submit"
             --conf "spark.driver.bindAddress=${SPARK_DRIVER_BIND_ADDRESS}"
             --deploy-mode client "$@")
    ;;
  flow)
    shift
    command=("${PYSPARK_DRIVER_PYTHON:-/opt/dr-stream/venv/bin/python}" -m dr_stream.runtime.pod_driver "$@")
    ;;
  executor)
    shift
    # The executor's JVM options arrive as SPARK_JAVA_OPT_0, _1, ... in that order.
    java_options=()
    while IFS= read -r option; do
      java_options+=("${option}")
    done < <(env | grep '^SPARK_JAVA_OPT_' | sort -t_ -k4 -n | sed 's/^[^=]*=//')
    command=("${JAVA_HOME}/bin/java" "${java_options[@]}"
             "-Xms${SPARK_EXECUTOR_MEMORY}" "-Xmx${SPARK_EXECUTOR_MEMORY}"
             -cp "${classpath}${SPARK_DIST_CLASSPATH:+:${SPARK_DIST_CLASSPATH}}"
             org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend
             --driver-url "${SPARK_DRIVER_URL}" --executor-id "${SPARK_EXECUTOR_ID}"
             --cores "${SPARK_EXECUTOR_CORES}" --app-id "${SPARK_APPLICATION_ID}"
             --hostname "${SPARK_EXECUTOR_POD_IP}" --resourceProfileId "${SPARK_RESOURCE_PROFILE_ID}"
             --podName "${SPARK_EXECUTOR_POD_NAME}")
    ;;
  *)
    command=("$@")
    ;;
esac

exec /usr/bin/tini -s -- "${command[@]}"
