#!/usr/bin/env bash
# Installs the Debian packages rckv needs to build, test and benchmark, and only
# those that are missing. clang and libclang-rt-14-dev (libFuzzer and the
# sanitizer runtimes) build make fuzz; llvm gives the sanitizers' reports
# their symbols (llvm-symbolizer). Safe to run repeatedly; needs root (or sudo) only when
# something is missing.
set -euo pipefail

PKGS=(
  build-essential cmake pkg-config
  libhiredis-dev libpmem-dev libck-dev libboost-context-dev
  libibverbs-dev librdmacm-dev libraft-dev libuv1-dev liblua5.1-0-dev lua-cjson-dev liblzf-dev
  redis-tools redis-server python3 python3-redis python3-pytest gnuplot-nox
  clang libclang-rt-14-dev llvm
)

missing=()
for p in "${PKGS[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
# Debian's redis-server package may start a system redis on 6379; rckv's tests
# never use that port, and we leave the service as the package set it up.
