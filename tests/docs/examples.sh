#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tests/docs/examples.sh - runs the examples of README.md and docs/*.md, and checks their links.
#   tests/docs/examples.sh TERNJIT_BINARY SOURCE_DIR
# A block fenced "```sh runnable" runs under bash -e in a fresh temporary directory where
# tests/ is the repository's tests/, `ternjit` is on PATH and TERNJIT_CACHE_DIR is inside
# the directory; a block fenced "```tri runnable" must pass `ternjit check`. Relative
# links must name files of the repository, and nothing may point outside it.
set -u
bin="$1"
src="$2"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/bin"
ln -s "$bin" "$work/bin/ternjit"
passed=0
failed=0
fail() { echo "FAIL $1"; failed=$((failed + 1)); }

docs=("$src/README.md" "$src"/docs/*.md)
for doc in "${docs[@]}"; do
  name="${doc#"$src"/}"
  # Split the runnable blocks into numbered files: NAME.N.sh / NAME.N.tri.
  rm -rf "$work/blocks" && mkdir -p "$work/blocks"
  awk -v out="$work/blocks" '
    /^```(sh|tri) runnable$/ { n++; kind = ($1 == "```sh") ? "sh" : "tri"; file = sprintf("%s/%03d.%s", out, n, kind); inblock = 1; next }
    /^```$/ && inblock { inblock = 0; close(file); next }
    inblock { print > file }
  ' "$doc"
  for block in "$work/blocks"/*; do
    [ -e "$block" ] || continue
    run="$work/run" && rm -rf "$run" && mkdir -p "$run" && ln -s "$src/tests" "$run/tests"
    case "$block" in
      *.sh)
        (cd "$run" && PATH="$work/bin:$PATH" TERNJIT_CACHE_DIR="$run/.cache" bash -e "$block") >"$work/out.txt" 2>&1 ;;
      *.tri)
        cp "$block" "$run/example.tri" && "$bin" check "$run/example.tri" >"$work/out.txt" 2>&1 ;;
    esac
    if [ $? -eq 0 ]; then passed=$((passed + 1)); else
      fail "$name block $(basename "$block")"; sed 's/^/    /' "$block"; echo "  output:"; sed 's/^/    /' "$work/out.txt"
    fi
  done
  # Links: relative targets exist; no reader is sent outside the repository.
  if grep -nE '\.\./shared|SPEC\.md|/work/' "$doc"; then fail "$name points outside the repository"; else passed=$((passed + 1)); fi
  dir="$(dirname "$doc")"
  while IFS= read -r target; do
    path="${target%%#*}"
    [ -z "$path" ] && continue
    case "$path" in http*|mailto:*) continue ;; esac
    if [ -e "$dir/$path" ]; then
      resolved="$(cd "$dir" && realpath -m "$path")"
      case "$resolved" in "$(realpath "$src")"*) passed=$((passed + 1)) ;; *) fail "$name: link $target leaves the repository" ;; esac
    else
      fail "$name: link $target does not exist"
    fi
  done < <(grep -oE '\]\([^)]+\)' "$doc" | sed -E 's/^\]\((.*)\)$/\1/')
done
grep -q '(docs/README.md)' "$src/README.md" || fail "README.md does not link docs/README.md"

echo "docs/examples: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
