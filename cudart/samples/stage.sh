#!/usr/bin/env bash
# Copies the samples of list.txt and the headers they share from a cuda-samples checkout into
# .gpu-extra/samples (ignored by git), for run.sh on the GPU machine.
#   cudart/samples/stage.sh <cuda-samples checkout or bare mirror>
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
src=$1
dst="$root/.gpu-extra/samples"
rm -rf "$dst"; mkdir -p "$dst"
if [ -d "$src/.git" ] || [ -f "$src/HEAD" ]; then
  # A git directory (a mirror without a work tree): export what is needed.
  paths=$(grep -v '^#' "$here/list.txt")
  # (Documents are left out: a mirror may lack their large blobs.)
  git --git-dir="$( [ -d "$src/.git" ] && echo "$src/.git" || echo "$src")" archive HEAD -- Common $paths ':(exclude)*/doc/*' | tar -x -C "$dst"
else
  cp -r "$src/Common" "$dst/"
  for p in $(grep -v '^#' "$here/list.txt"); do mkdir -p "$dst/$(dirname "$p")"; cp -r "$src/$p" "$dst/$p"; done
fi
echo "staged $(grep -vc '^#' "$here/list.txt") samples into $dst ($(du -sh "$dst" | cut -f1))"
