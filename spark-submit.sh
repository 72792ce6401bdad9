#!/usr/bin/env bash
# Run one flow through spark-submit: ./spark-submit.sh FLOW.yaml [spark-submit options]
#   local[2] by default; --master yarn | k8s://... | spark://... and any other option pass through.
# Ships the dr_stream package (--py-files), the flow file (--files) and the JVM jars (--jars).
# Executors run no Python (the record path is Spark SQL); only the driver imports dr_stream,
# confluent-kafka and pyyaml: in cluster deploy mode give it a packed venv (see README).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
if [ $# -lt 1 ]; then
  echo "usage: $0 FLOW.yaml [spark-submit options]" >&2
  exit 2
fi
config=$1
shift
[ -f "$config" ] || { echo "$0: $config: no such file" >&2; exit 2; }
[ -x "$here/.venv/bin/spark-submit" ] || make -C "$here" setup >&2
"$here/.venv/bin/python" -m dr_stream.cli check-config --config "$config" >/dev/null
cache=${DR_STREAM_CACHE:-$here/.cache}  # the same cache dr_stream.paths uses
jars=$(ls "$cache"/jars/spark/*.jar "$cache"/jars/dr-stream/*.jar | paste -sd, -)
dist="$cache/dist"
mkdir -p "$dist"
(cd "$here" && "$here/.venv/bin/python" -m zipfile -c "$dist/dr_stream.zip" dr_stream/)
name=$("$here/.venv/bin/python" -c 'import sys; from dr_stream.config import load_flow; print(load_flow(sys.argv[1]).name)' "$config")
export PYSPARK_PYTHON="${PYSPARK_PYTHON:-$here/.venv/bin/python}"
exec "$here/.venv/bin/spark-submit" \
  --master 'local[2]' \
  --name "dr-stream-$name" \
  --conf spark.ui.showConsoleProgress=false \
  --conf 'spark.redaction.regex=(?i)secret|password|token|access[.]?key|jaas|credential' \
  --conf spark.driver.memory=2g \
  --jars "$jars" \
  --py-files "$dist/dr_stream.zip" \
  --files "$config" \
  "$@" \
  "$here/jobs/replicate.py" --config "$config"
