#!/bin/sh
# Builds the gohands sandbox image (gohands-sandbox:latest by default).
#
#   deploy/sandbox/build.sh [TAG]
#
# Uses debian:bookworm when it can be pulled. Where no registry can be
# reached it makes the base with debootstrap (apt-get install debootstrap;
# needs root and Debian's apt mirror) and imports it as gohands-bookworm-base,
# then builds on top of it.
set -eu

TAG=${1:-gohands-sandbox:latest}
HERE=$(cd "$(dirname "$0")" && pwd)
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
BASE=debian:bookworm

if ! command -v docker >/dev/null 2>&1; then
	echo "build.sh: docker is not installed" >&2
	exit 1
fi

if docker image inspect "$BASE" >/dev/null 2>&1; then
	:
elif docker pull "$BASE" >/dev/null 2>&1; then
	echo "build.sh: pulled $BASE"
else
	BASE=gohands-bookworm-base:latest
	if ! docker image inspect "$BASE" >/dev/null 2>&1; then
		echo "build.sh: cannot pull debian:bookworm; making $BASE with debootstrap" >&2
		if ! command -v debootstrap >/dev/null 2>&1; then
			echo "build.sh: debootstrap is missing: apt-get install -y debootstrap" >&2
			exit 1
		fi
		ROOTFS=$(mktemp -d /tmp/gohands-bookworm.XXXXXX)
		trap 'rm -rf "$ROOTFS"' EXIT INT TERM
		debootstrap --variant=minbase bookworm "$ROOTFS" "$MIRROR"
		# Apt inside the image uses the same mirror.
		echo "deb $MIRROR bookworm main" > "$ROOTFS/etc/apt/sources.list"
		rm -rf "$ROOTFS"/var/cache/apt/archives/*.deb "$ROOTFS"/var/lib/apt/lists/*
		tar -C "$ROOTFS" -c . | docker import \
			--change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
			--change 'CMD ["bash"]' - "$BASE"
	fi
fi

echo "build.sh: building $TAG on $BASE"
docker build --build-arg "BASE=$BASE" -t "$TAG" "$HERE"
docker run --rm --entrypoint sh "$TAG" -c 'bash --version | head -1 && git --version && python3 --version && rg --version | head -1 && cc --version | head -1'
echo "build.sh: $TAG is ready"
