#!/usr/bin/env bash
# Build the Lambda deployment zip for arm64 (template.yaml: Architectures arm64).
#
#   scripts/build_lambda.sh [OUTPUT.zip] [PACKAGE ...]
#
# OUTPUT.zip defaults to build/awc-lambda.zip. Each PACKAGE (a path to your
# project, a wheel, or a requirement such as 'myapp==1.2') is installed into
# the same folder, so the handler modules it holds can be named in
# AWC_HANDLER_MODULES (template.yaml's HandlerModules); a local project is
# built to a wheel here first (it must be pure Python; its dependencies are
# resolved for the Lambda platform like awc's).
#
# Installs awc with its `lambda` and `s3` extras into a folder for
# manylinux_2_28_aarch64 / CPython $PYTHON_VERSION (binary wheels only, so
# psycopg gets psycopg-binary's aarch64 build), checks that psycopg and
# psycopg-binary resolved to the same version, and zips the folder.
# The folder is also what template.yaml's CodeUri (build/lambda/) points at.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON_VERSION="${PYTHON_VERSION:-3.13}"
PLATFORM="manylinux_2_28_aarch64"
OUT="${1:-build/awc-lambda.zip}"
[ "$#" -gt 0 ] && shift
PACKAGES=("$@")
BUILD_DIR="${BUILD_DIR:-build}"
SITE="$BUILD_DIR/lambda"

rm -rf "$SITE"
mkdir -p "$SITE" "$(dirname "$OUT")"
WHEELS="$BUILD_DIR/wheels"
rm -rf "$WHEELS"
python3 -m pip wheel --no-deps -q -w "$WHEELS" .
requirements=("$(ls "$WHEELS"/awc_worker-*.whl)[lambda,s3]")
# Your own packages: local projects become wheels here (pip installs only
# binary distributions for another platform); requirements go as they are.
for package in ${PACKAGES[@]+"${PACKAGES[@]}"}; do
  if [ -d "$package" ]; then
    before=$(ls "$WHEELS")
    python3 -m pip wheel --no-deps -q -w "$WHEELS" "$package"
    requirements+=("$WHEELS/$(comm -13 <(echo "$before") <(ls "$WHEELS") | head -n 1)")
  else
    requirements+=("$package")
  fi
done
# Lambda's arm64 runtime is glibc 2.34: manylinux_2_28 and older tags all run
# there, and pip accepts only the platform tags it is given.
python3 -m pip install -q --target "$SITE" \
  --platform "$PLATFORM" --platform manylinux_2_17_aarch64 --platform manylinux2014_aarch64 \
  --implementation cp --python-version "$PYTHON_VERSION" \
  --only-binary=:all: "${requirements[@]}"

# psycopg loads psycopg_binary only when both are the same version.
psycopg=$(ls -d "$SITE"/psycopg-*.dist-info | sed -E 's/.*psycopg-([^/]+)\.dist-info/\1/')
binary=$(ls -d "$SITE"/psycopg_binary-*.dist-info | sed -E 's/.*psycopg_binary-([^/]+)\.dist-info/\1/')
echo "resolved psycopg $psycopg, psycopg-binary $binary ($PLATFORM)"
if [ "$psycopg" != "$binary" ]; then
  echo "psycopg and psycopg-binary versions differ" >&2
  exit 1
fi
if ! ls "$SITE"/psycopg_binary/*.so | grep -q aarch64 && \
   ! file "$SITE"/psycopg_binary/pq*.so 2>/dev/null | grep -q aarch64; then
  echo "psycopg_binary is not an aarch64 build" >&2
  exit 1
fi

# The runtime provides boto3; pinning ours keeps tested versions. Drop caches.
find "$SITE" -name "__pycache__" -type d -prune -exec rm -rf {} +
rm -f "$OUT"
OUT_ABS="$(cd "$(dirname "$OUT")" && pwd)/$(basename "$OUT")"
(cd "$SITE" && python3 -m zipfile -c "$OUT_ABS" .)
echo "wrote $OUT ($(du -h "$OUT" | cut -f1))"
