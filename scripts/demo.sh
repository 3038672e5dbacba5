#!/bin/bash
# Quick start: installs what is missing, builds libregionalloc in build/ and
# runs the demo (examples/indexer over /usr/include).
set -euo pipefail
cd "$(dirname "$0")/.."
top=$(pwd)

. scripts/deps.sh
ra_install_build_deps

if [ -f config.status ] || [ -f Makefile ]; then
    echo "demo.sh: the source tree was configured in place; run 'make distclean'" >&2
    echo "demo.sh: here first (the build goes to build/)." >&2
    exit 1
fi

./bootstrap
mkdir -p build
(cd build && "$top/configure")
make -C build -j"${JOBS:-$(nproc 2>/dev/null || echo 2)}"
make -C build demo
