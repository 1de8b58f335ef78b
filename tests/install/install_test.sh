#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# install_test.sh - `cmake --install` into a temp prefix, then build and run a consumer project.
# Usage: install_test.sh CMAKE BUILD_DIR CONSUMER_SRC WORK_DIR CC CXX
# Checks: the installed tree has the headers, both libraries, the CLI, the CMake package
# and ternjit.pc; libternjit.so exports the C ABI and public C++ API only; a CMake
# consumer (find_package(ternjit): C against ternjit::ternjit and ternjit::ternjit_static,
# C++ API against ternjit::ternjit) and a pkg-config build line (pkg-config --cflags
# --libs ternjit, and pkg-config --static with libternjit.a) build and run.
set -euo pipefail
cmake=$1 build=$2 consumer=$3 work=$4 cc=$5 cxx=$6
prefix=$work/prefix

rm -rf "$work"
mkdir -p "$work"
step() { echo "== $*"; }

step "cmake --install $build --prefix $prefix"
"$cmake" --install "$build" --prefix "$prefix" >"$work/install.log"

libdir=$(dirname "$(find "$prefix" -name 'libternjit.so' | head -n1)")
for f in include/ternjit/ternjit.h include/ternjit/engine.h include/ternjit/result.h include/ternjit/bitnet.h bin/ternjit; do
  [ -e "$prefix/$f" ] || { echo "FAILED: $f not installed"; exit 1; }
done
for f in libternjit.so libternjit.a pkgconfig/ternjit.pc cmake/ternjit/ternjitConfig.cmake \
         cmake/ternjit/ternjitConfigVersion.cmake cmake/ternjit/ternjitTargets.cmake; do
  [ -e "$libdir/$f" ] || { echo "FAILED: $libdir/$f not installed"; exit 1; }
done
soname=$(objdump -p "$libdir/libternjit.so" | awk '/SONAME/ {print $2}')
echo "SONAME $soname"
case $soname in libternjit.so.[0-9]*) ;; *) echo "FAILED: unexpected SONAME '$soname'"; exit 1 ;; esac

step "exported symbols"
# Global and weak definitions only: the linker may keep local copies (type t) of template
# instances from the static glslang archives in .dynsym, which nothing can bind to.
nm -D --defined-only "$libdir/libternjit.so" | awk '$2 ~ /[A-Z]/ {print $3}' | c++filt >"$work/exports.txt"
grep -q '^ternjit_compile$' "$work/exports.txt" || { echo "FAILED: ternjit_compile not exported"; exit 1; }
grep -q '^ternjit::Engine::create' "$work/exports.txt" || { echo "FAILED: ternjit::Engine::create not exported"; exit 1; }
if grep -v -e '^ternjit_' -e '^ternjit::[A-Z][A-Za-z]*::' -e '^ternjit::render' -e '^ternjit::elem_name' \
        -e '^ternjit::parse_elem_kind' -e '^ternjit::weight_format_name' -e '^ternjit::parse_weight_format' \
        -e '^ternjit::bitnet_name_map(' -e '^ternjit::bitnet_tri_source' -e '^ternjit::read_bitnet_config(' \
        -e '^ternjit::write_synthetic_bitnet(' -e '^ternjit::read_hf_bitnet_config(' \
        -e '^ternjit::hf_bitnet_name_map(' -e '^ternjit::bind_hf_bitnet(' -e '^ternjit::grad(' \
        "$work/exports.txt" >"$work/unexpected.txt"; then
  echo "FAILED: libternjit.so exports internal symbols:"; head -n 20 "$work/unexpected.txt"; exit 1
fi
echo "$(wc -l <"$work/exports.txt") symbols, all C ABI or public C++ API"

step "installed CLI"
"$prefix/bin/ternjit" --help >/dev/null

step "CMake consumer (find_package(ternjit))"
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
"$cmake" -S "$consumer" -B "$work/consumer" "${generator[@]}" -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_C_COMPILER="$cc" -DCMAKE_CXX_COMPILER="$cxx" >"$work/consumer-configure.log" ||
  { cat "$work/consumer-configure.log"; exit 1; }
"$cmake" --build "$work/consumer" >"$work/consumer-build.log" || { cat "$work/consumer-build.log"; exit 1; }
"$work/consumer/consumer_shared"
"$work/consumer/consumer_static"
"$work/consumer/consumer_cpp"

step "pkg-config consumer"
if ! command -v pkg-config >/dev/null; then
  echo "SKIPPED: pkg-config is not installed (the CMake consumer passed)"
  rm -rf "$work"
  exit 77
fi
export PKG_CONFIG_PATH=$libdir/pkgconfig
flags=$(pkg-config --cflags --libs ternjit)
echo "pkg-config --cflags --libs ternjit: $flags"
# shellcheck disable=SC2086  # word splitting of the flags is intended
"$cc" -std=c11 -Wall -Wextra -Werror -pedantic "$consumer/main.c" -o "$work/consumer_pc" $flags
LD_LIBRARY_PATH=$libdir "$work/consumer_pc"

step "pkg-config --static consumer (libternjit.a)"
static_flags=$(pkg-config --static --libs ternjit)
echo "pkg-config --static --libs ternjit: $static_flags"
# Every word is a -L/-l/-pthread flag: CMake's internal link-item markers (::@...) or
# generator expressions must never reach the file.
for word in $static_flags; do
  case $word in
    -L/*|-l[A-Za-z0-9_+.-]*|-pthread) ;;
    *) echo "FAILED: unexpected word '$word' in pkg-config --static --libs"; exit 1 ;;
  esac
done
# -l:libternjit.a picks the archive over the shared library; the rest of the line (Libs.private)
# must then be enough to link a C program with the C compiler driver (no C++ driver).
# shellcheck disable=SC2086
"$cc" -std=c11 -Wall -Wextra -Werror -pedantic "$consumer/main.c" -o "$work/consumer_pc_static" \
  $(pkg-config --cflags ternjit) ${static_flags//-lternjit/-l:libternjit.a}
if objdump -p "$work/consumer_pc_static" | grep -q 'NEEDED.*libternjit'; then
  echo "FAILED: the pkg-config --static consumer needs libternjit.so"; exit 1
fi
"$work/consumer_pc_static"
# The prefix, the consumers and the static links are ~1 GB: a passing run leaves nothing
# behind (a failing one keeps $work to look at).
rm -rf "$work"
echo "PASSED"
