#!/usr/bin/env bash
# Set-up, then the main job: train the default model (examples/shakespeare_char.ini) on the
# bundled Tiny Shakespeare text on the CPU, and print a sample from it.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh

data=examples/data/shakespeare_char
[ -f "$data/val.bin" ] || build/tools/gearbox prepare examples/data/tinyshakespeare.txt "$data"
build/tools/gearbox train examples/shakespeare_char.ini
echo "---- sample ----"
build/tools/gearbox sample out/shakespeare_char --tokens 500
