#!/bin/sh
# Makes the sandbox base root file system without a registry: a minimal Debian bookworm with
# python3 (the runner and the egress shim are Python), pruned of docs, locales and package
# caches, written as a tar for `docker import`. The node image adds nodejs on top.
# Usage: bootstrap.sh MIRROR OUTPUT.tar   (run as root; about 40 s with a nearby mirror)
set -eu
mirror=$1
output=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
debootstrap --variant=minbase --include=python3 bookworm "$work/root" "$mirror" >"$work/log" 2>&1 \
    || { tail -20 "$work/log" >&2; exit 1; }
# Keep the package lists: the node image installs nodejs from them without a fresh download.
rm -rf "$work/root/var/cache/apt/archives"/*.deb "$work/root/usr/share/doc" "$work/root/usr/share/man" \
    "$work/root/usr/share/locale" "$work/root/usr/share/info" "$work/root/var/log"/*
printf 'deb %s bookworm main\n' "$mirror" >"$work/root/etc/apt/sources.list"
tar -C "$work/root" --numeric-owner -cf "$output.partial" .
mv "$output.partial" "$output"
