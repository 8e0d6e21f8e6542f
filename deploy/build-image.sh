#!/usr/bin/env bash
# Build the gohands image without pulling anything: compile the static binary
# on this machine, put it with the CA certificates and the container
# configuration into a build context, and build deploy/Dockerfile (FROM scratch).
#
# Usage: deploy/build-image.sh [TAG]     (default tag: gohands:latest)
# Environment: VERSION (default: git describe), BUILD_DIR (default: deploy/build),
# BUILD_ONLY=1 to write the build context without running docker build.
set -euo pipefail
cd "$(dirname "$0")/.."

tag=${1:-gohands:latest}
version=${VERSION:-$(git describe --tags --always --dirty 2>/dev/null || echo dev)}
ctx=${BUILD_DIR:-deploy/build}
certs=/etc/ssl/certs/ca-certificates.crt

[ -r "$certs" ] || { echo "build-image: $certs is missing (apt-get install ca-certificates)" >&2; exit 1; }
mkdir -p "$ctx"
rm -f "$ctx/gohands" "$ctx/ca-certificates.crt" "$ctx/config.yml"

CGO_ENABLED=0 go build -trimpath \
  -ldflags "-s -w -X github.com/gohands/gohands/app.Version=$version" \
  -o "$ctx/gohands" ./cmd/gohands
cp "$certs" "$ctx/ca-certificates.crt"
cp deploy/config.container.yml "$ctx/config.yml"
mkdir -p "$ctx/tmp" "$ctx/data"

if [ -n "${BUILD_ONLY:-}" ]; then
  echo "wrote the build context $ctx (gohands $version)"
  exit 0
fi
docker build -q -f deploy/Dockerfile -t "$tag" "$ctx" >/dev/null
echo "built $tag (gohands $version)"
