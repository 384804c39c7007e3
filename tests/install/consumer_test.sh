#!/usr/bin/env bash
# Installs a built tilesearch into a fresh prefix, then configures, builds and runs the consumer
# project (examples/consumer) against that prefix alone: its sources are copied out of the tree
# first and the package is looked up in the prefix only. Fails on any step.
#
#   consumer_test.sh BUILD_DIR CONSUMER_SOURCE WORK_DIR CXX_COMPILER
set -euo pipefail

if [ $# -ne 4 ]; then
  echo "usage: $0 BUILD_DIR CONSUMER_SOURCE WORK_DIR CXX_COMPILER" >&2
  exit 2
fi
build_dir=$1
consumer_source=$2
work=$3
cxx=$4

step() { echo "== [${SECONDS}s] $*"; }

rm -rf "$work"
mkdir -p "$work"
prefix=$work/prefix

step "install $build_dir into $prefix"
cmake --install "$build_dir" --prefix "$prefix" >"$work/install.log" ||
  { cat "$work/install.log"; exit 1; }
config=$prefix/lib/cmake/tilesearch/tilesearchConfig.cmake
[ -f "$config" ] || { echo "no $config after the install" >&2; exit 1; }
[ -x "$prefix/bin/tilesearch" ] || { echo "no $prefix/bin/tilesearch after the install" >&2; exit 1; }
[ -f "$prefix/include/tilesearch/search/api.h" ] ||
  { echo "no search/api.h under $prefix/include/tilesearch" >&2; exit 1; }
echo "$(grep -c '^-- Installing' "$work/install.log") files installed"

step "the installed tool runs"
"$prefix/bin/tilesearch" --help >/dev/null

step "configure the consumer from $prefix"
cp -r "$consumer_source" "$work/src"
generator=()
if command -v ninja >/dev/null 2>&1; then generator=(-G Ninja); fi
cmake -S "$work/src" -B "$work/build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF -DCMAKE_FIND_USE_SYSTEM_PACKAGE_REGISTRY=OFF
found=$(sed -n 's/^tilesearch_DIR:PATH=//p' "$work/build/CMakeCache.txt")
if [ "$found" != "$prefix/lib/cmake/tilesearch" ]; then
  echo "the consumer found tilesearch at '$found', not in $prefix" >&2
  exit 1
fi

step "build the consumer"
cmake --build "$work/build"

step "run the consumer"
(cd "$work" && "$work/build/tune_matmul" "$work/tune_matmul.jsonl")
echo "== [${SECONDS}s] done"
