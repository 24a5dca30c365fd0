#!/usr/bin/env bash
# Documentation is code: every ```cpp block of README.md and docs/*.md is extracted, built against
# hjit installed into a scratch prefix (find_package(hjit), as an application would), and run.
#   - a block with `int main(` is a whole program;
#   - any other block is the body of main(), after #include <hjit/hjit.h> and <iostream> (its own
#     #include lines go to the top);
#   - a block whose first line is `// compile only: <why>` is built but not run (a GPU, minutes of
#     tuning).
# Each program is named after its page and line (docs_jit_md_L42), so a failure points at the text.
# Arguments: <source dir> <hjit build dir> <scratch dir>.
set -euo pipefail
src=$1
build=$2
scratch=$3
rm -rf "$scratch"
mkdir -p "$scratch/snippets" "$scratch/run"
cmake --install "$build" --prefix "$scratch/prefix" >/dev/null

pages=("$src/README.md" "$src"/docs/*.md)
for page in "${pages[@]}"; do
  rel=${page#"$src"/}
  stem=$(echo "$rel" | tr '/.-' '___')
  # Fenced ```cpp blocks (indented ones in lists too): one file per block, named by its first line.
  awk -v out="$scratch/snippets" -v stem="$stem" '
    /^[ \t]*```cpp[ \t]*$/ { file = sprintf("%s/%s_L%d.block", out, stem, NR + 1); inblock = 1; pad = index($0, "`") - 1; next }
    inblock && /^[ \t]*```[ \t]*$/ { inblock = 0; close(file); next }
    inblock { line = $0; if (pad > 0 && substr(line, 1, pad) ~ /^[ \t]*$/) line = substr(line, pad + 1); print line > file }
  ' "$page"
done

blocks=0 compile_only=0
for block in "$scratch"/snippets/*.block; do
  [ -e "$block" ] || continue
  blocks=$((blocks + 1))
  cpp=${block%.block}.cpp
  if grep -q "int main(" "$block"; then
    cp "$block" "$cpp"
  else
    {
      echo "#include <hjit/hjit.h>"
      echo "#include <iostream>"
      grep -E '^[[:space:]]*#[[:space:]]*include' "$block" || true
      echo "int main() {"
      grep -vE '^[[:space:]]*#[[:space:]]*include' "$block" || true
      echo "}"
    } >"$cpp"
  fi
  if head -n 1 "$block" | grep -q "^// compile only"; then
    compile_only=$((compile_only + 1))
    touch "${block%.block}.compile_only"
  fi
done
if [ "$blocks" -eq 0 ]; then echo "no C++ blocks found in the documentation"; exit 1; fi

cat >"$scratch/snippets/CMakeLists.txt" <<'CMAKE'
cmake_minimum_required(VERSION 3.22)
project(hjit_docs LANGUAGES CXX)
set(CMAKE_CXX_STANDARD 20)
find_package(hjit REQUIRED)
file(GLOB snippets ${CMAKE_CURRENT_SOURCE_DIR}/*.cpp)
# The standard headers hjit.h includes, parsed once for all blocks (a precompiled header): they
# were most of each block's compile, and the blocks are about fifty programs.
set(owner "")
foreach(snippet ${snippets})
  get_filename_component(name ${snippet} NAME_WE)
  add_executable(${name} ${snippet})
  target_link_libraries(${name} PRIVATE hjit::hjit)
  if(owner)
    target_precompile_headers(${name} REUSE_FROM ${owner})
  else()
    target_precompile_headers(${name} PRIVATE <chrono> <functional> <iostream> <map> <memory> <optional> <sstream> <string> <vector>)
    set(owner ${name})
  endif()
endforeach()
CMAKE
# A release build, at -O1: the blocks' own code is a few calls whose time is hjit's (-O1 against
# -O3: 2.1 against 2.2 s a block on a quiet Zen 3; the precompiled header is most of the gain).
cmake -S "$scratch/snippets" -B "$scratch/snippets/build" -G Ninja -DCMAKE_PREFIX_PATH="$scratch/prefix" \
  -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE="-O1 -DNDEBUG" >/dev/null
if ! cmake --build "$scratch/snippets/build" -- -k 0 >"$scratch/build.log" 2>&1; then
  grep -E "error|FAILED" "$scratch/build.log" | head -40
  echo "documentation examples do not compile (names are <page>_L<line of the block>; log: $scratch/build.log)"
  exit 1
fi

failed=0 ran=0
for cpp in "$scratch"/snippets/*.cpp; do
  name=$(basename "${cpp%.cpp}")
  [ -e "${cpp%.cpp}.compile_only" ] && continue
  ran=$((ran + 1))
  if ! (cd "$scratch/run" && LD_LIBRARY_PATH="$scratch/prefix/lib:${LD_LIBRARY_PATH:-}" \
        timeout 300 "$scratch/snippets/build/$name" >"$scratch/run/$name.out" 2>&1); then
    echo "FAILED: $name"
    tail -n 20 "$scratch/run/$name.out"
    failed=$((failed + 1))
  fi
done
echo "documentation: $blocks C++ blocks built, $ran run, $compile_only compile only, $failed failed"
[ "$failed" -eq 0 ]
