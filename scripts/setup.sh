#!/usr/bin/env bash
# Set-up command 1 of the README: from a fresh clone to a working install on Debian/Ubuntu.
#   - system prerequisites, installed with apt only when missing: Java 17 (the Spark-engine test
#     runs PySpark in local mode) and chromium (the test that renders the HTML report);
#   - a virtual environment in .venv with ppdp and its test extra (pytest, hypothesis, pyspark,
#     ruff, mypy);
#   - the main job on bundled data: `ppdp demo`.
set -euo pipefail
cd "$(dirname "$0")/.."

missing=()
command -v java >/dev/null 2>&1 || missing+=(openjdk-17-jre-headless)
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" -eq 0 ]; then sudo=(); elif command -v sudo >/dev/null 2>&1; then sudo=(sudo); else
    echo "setup: needs ${missing[*]} (apt-get install ${missing[*]}) and cannot become root" >&2; exit 1
  fi
  echo "setup: installing ${missing[*]} with apt-get"
  "${sudo[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

python3 -m venv .venv
.venv/bin/pip install -q -e '.[test]'
.venv/bin/ppdp demo
echo
echo "setup: done. Start the web app (load a table, compare models, publish, query): .venv/bin/ppdp app"
