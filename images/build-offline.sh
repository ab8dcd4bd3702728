#!/usr/bin/env bash
# Build the runtime image without pulling a base image from a registry: a Debian root
# filesystem made with debootstrap (from the Debian mirror apt already uses on this machine)
# is imported into podman as the base, then images/Dockerfile builds on it as usual.
#   images/build-offline.sh [TAG]          (root; needs podman and debootstrap)
set -euo pipefail
cd "$(dirname "$0")/.."
TAG=${1:-localhost/wintermute:0.1.0}
BASE=localhost/wintermute-base:bookworm
SUITE=${SUITE:-bookworm}
command -v debootstrap >/dev/null || { apt-get update -qq && apt-get install -y -qq debootstrap; }
# The mirror apt is configured with here (deb822 or one-line sources).
MIRROR=$( (grep -hoE '^(URIs:|deb) +https?://[^ ]+' /etc/apt/sources.list \
            /etc/apt/sources.list.d/*.sources /etc/apt/sources.list.d/*.list 2>/dev/null || true) \
         | awk '{print $2}' | grep -E '/debian/?$' | head -n1 || true)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
started=$(date +%s)
debootstrap --variant=minbase \
  --include=python3,python3-venv,python-is-python3,git,ca-certificates,passwd \
  "$SUITE" "$work/rootfs" ${MIRROR:+"$MIRROR"} >"$work/debootstrap.log" 2>&1 \
  || { tail -n 30 "$work/debootstrap.log"; exit 1; }
tar -C "$work/rootfs" -c . | podman import - "$BASE" >/dev/null
echo "base image $BASE from debootstrap in $(( $(date +%s) - started ))s"
# The host's CA bundle for pip inside the build (a TLS-intercepting proxy's CA lives there).
ca=()
if [ -f /etc/ssl/certs/ca-certificates.crt ]; then
  ca=(--volume /etc/ssl/certs/ca-certificates.crt:/run/build-ca.crt:ro
      --build-arg PIP_CERT=/run/build-ca.crt)
fi
podman build -f images/Dockerfile --build-arg PYTHON_IMAGE="$BASE" "${ca[@]}" -t "$TAG" .
echo "built $TAG in $(( $(date +%s) - started ))s"
podman image inspect "$TAG" --format 'size: {{.Size}} bytes'
# Where podman cannot raise rlimits or use crun (this kind of sandboxed host), override
# RUN_FLAGS; the defaults are what sandboxed build hosts need.
read -r -a run_flags <<<"${RUN_FLAGS:---runtime runc --ulimit nofile=1024:1024 --ulimit nproc=1024:1024}"
podman run --rm "${run_flags[@]}" "$TAG" --help >/dev/null && echo "the image runs: wintermute --help ok"
