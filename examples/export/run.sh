#!/usr/bin/env bash
# Exports the ResNet block, builds the C consumer from the exported files alone, and runs it.
# Arguments: <export_resnet_block program> <scratch dir>.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
rm -rf "$2"
"$1" "$2"
# What the header's first lines say to link with (the library's parallel loops run on OpenMP).
flags=$(sed -n 's/.*Link with libresnet_block\.a \(.*\)\.$/\1/p' "$2/resnet_block.h")
cc -O2 -std=c11 -o "$2/consumer" "$here/consumer.c" -I"$2" "$2/libresnet_block.a" $flags
"$2/consumer" "$2"
