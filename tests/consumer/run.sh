#!/usr/bin/env bash
# Installs hjit from the build tree into a scratch prefix, builds the consumer against it with
# find_package(hjit), and runs it. Arguments: <hjit build dir> <scratch dir>.
set -euo pipefail
build=$1
scratch=$2
here=$(cd "$(dirname "$0")" && pwd)
rm -rf "$scratch"
cmake --install "$build" --prefix "$scratch/prefix" >/dev/null
# No Halide on the consumer's search path: CMAKE_PREFIX_PATH names only the hjit prefix.
cmake -S "$here" -B "$scratch/build" -G Ninja -DCMAKE_PREFIX_PATH="$scratch/prefix" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$scratch/build" >/dev/null
if grep -qi "halide\|llvm" "$scratch/prefix/lib/cmake/hjit/hjitTargets.cmake"; then
  echo "the installed package mentions Halide or LLVM"; exit 1
fi
if grep -rq "Halide.h" "$scratch/prefix/include"; then
  echo "an installed header includes Halide.h"; exit 1
fi
LD_LIBRARY_PATH="$scratch/prefix/lib:${LD_LIBRARY_PATH:-}" "$scratch/build/consumer"
