#!/usr/bin/env bash
# Run one flow through spark-submit: ./spark-submit.sh FLOW.yaml [spark-submit options]
#   local[2] by default; --master yarn [--deploy-mode cluster] | k8s://... | spark://... and any
#   other option pass through. dr_stream/runtime/submission.py decides what ships where (the packed Python
#   environment on YARN, the flow file and ${env:NAME} values for a remote driver, the jars).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
if [ $# -lt 1 ]; then
  echo "usage: $0 FLOW.yaml [spark-submit options]" >&2
  exit 64  # usage (dr_stream/exit_codes.py)
fi
[ -f "$1" ] || { echo "$0: $1: no such file" >&2; exit 78; }  # config: the flow file
[ -x "$here/.venv/bin/spark-submit" ] || make -C "$here" setup >&2
# spark-submit finds Spark from the Python on PATH: the venv's.
export PATH="$here/.venv/bin:$PATH"
exec "$here/.venv/bin/python" -m dr_stream.runtime.submission "$@"
