#!/bin/sh
# Makes the sandbox base root file system without a registry: a minimal Debian bookworm with
# python3 (the runner and the egress shim are Python) and CA certificates (HTTPS through the
# egress allow-list), pruned of docs, locales and package caches, written as a tar for
# `docker import`. The node image adds nodejs on top.
# Usage: bootstrap.sh MIRROR OUTPUT.tar [DEB_CACHE_DIR]
#   (run as root; about 40 s with a nearby mirror; DEB_CACHE_DIR keeps the downloaded .debs
#   so a changed script bootstraps again without downloading them again)
set -eu
mirror=$1
output=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cache=""
if [ -n "${3:-}" ]; then
    mkdir -p "$3"
    cache="--cache-dir=$3"
fi
# shellcheck disable=SC2086 # $cache is one option or nothing
debootstrap --variant=minbase --include=python3,ca-certificates $cache bookworm "$work/root" "$mirror" \
    >"$work/log" 2>&1 || { tail -20 "$work/log" >&2; exit 1; }
# Keep the package lists: the node image installs nodejs from them without a fresh download.
rm -rf "$work/root/var/cache/apt/archives"/*.deb "$work/root/usr/share/doc" "$work/root/usr/share/man" \
    "$work/root/usr/share/locale" "$work/root/usr/share/info" "$work/root/var/log"/*
printf 'deb %s bookworm main\n' "$mirror" >"$work/root/etc/apt/sources.list"
tar -C "$work/root" --numeric-owner -cf "$output.partial" .
mv "$output.partial" "$output"
