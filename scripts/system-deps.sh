#!/usr/bin/env bash
# Install the system components the harness uses, when they are missing and we can (root + apt):
#   bubblewrap (local sandbox), docker.io (dockerd for the docker backend), debootstrap (test images),
#   git and patch (patch application). Prints what is missing otherwise; never fails the caller.
set -u
need=()
command -v bwrap >/dev/null 2>&1 || need+=(bubblewrap)
command -v dockerd >/dev/null 2>&1 || need+=(docker.io)
command -v debootstrap >/dev/null 2>&1 || need+=(debootstrap)
command -v git >/dev/null 2>&1 || need+=(git)
command -v patch >/dev/null 2>&1 || need+=(patch)
command -v jq >/dev/null 2>&1 || need+=(jq)
[ ${#need[@]} -eq 0 ] && exit 0
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "system-deps: installing ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  (apt-get update -qq && apt-get install -y -qq --no-install-recommends "${need[@]}") >/tmp/execcritic-apt.log 2>&1 \
    || { echo "system-deps: apt-get failed (see /tmp/execcritic-apt.log)"; exit 0; }
else
  echo "system-deps: missing ${need[*]} - install them with your package manager;" \
       "tests that need them are skipped with the reason"
fi
exit 0
