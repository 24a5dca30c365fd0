#!/usr/bin/env bash
# Installs hjit from the build tree into a scratch prefix, builds the consumer against it with
# find_package(hjit), and runs it; then moves the prefix and runs the installed hjit-tune from its
# new place (a short tuning run: its worker is found beside the library, its library by RPATH).
# Arguments: <hjit build dir> <scratch dir>.
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

# The installed tools start from any prefix, with nothing on LD_LIBRARY_PATH.
mv "$scratch/prefix" "$scratch/moved"
tune="$scratch/moved/bin/hjit-tune"
env -u LD_LIBRARY_PATH "$tune" --help | grep -q "usage: hjit-tune"
log=$(cd "$scratch" && env -u LD_LIBRARY_PATH -u HJIT_TUNE_WORKER HJIT_LOG=debug HJIT_CACHE_DIR="$scratch/cache" \
  "$tune" --workload W1 --minutes 0.05 --db "$scratch/t.sqlite" --schedulers built-in --quiet 2>&1)
# (Here-strings, not pipes: under pipefail, grep -q leaving at its first match kills an echo still
# writing a long log, and the pipeline fails although the line is there.)
grep -qE "^W1 tiny_fma: built-in" <<<"$log" || { echo "$log"; echo "the installed hjit-tune did not tune"; exit 1; }
grep -q "candidates are measured by $scratch/moved/bin/hjit-tune" <<<"$log" ||
  { echo "$log" | grep "measured by"; echo "the installed hjit-tune did not measure with itself"; exit 1; }
echo "installed hjit-tune: ok from $scratch/moved"
