#!/usr/bin/env bash
# Checks that every C++/GLSL-header source under version control is formatted with the tree's
# .clang-format (Debian 12's clang-format 14). `--fix` rewrites the files instead.
set -euo pipefail
cd "$(dirname "$0")/.."
mode=(--dry-run --Werror)
[ "${1:-}" = "--fix" ] && mode=(-i)
mapfile -t files < <(git ls-files '*.cpp' '*.hpp' '*.h' '*.cc')
((${#files[@]})) || { echo "check-format: no files" >&2; exit 1; }
clang-format "${mode[@]}" "${files[@]}"
echo "check-format: ${#files[@]} files formatted"
