#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# tests/docs/code_block_matches.sh DOC FILE NAME - the block of DOC fenced "```LANG file=NAME" is FILE's text exactly.
doc="$1"
file="$2"
name="$3"
awk -v name="$name" '
  $0 ~ "^```[a-z+]* file=" && $2 == "file=" name { inblock = 1; found = 1; next }
  /^```$/ && inblock { inblock = 0; next }
  inblock { print }
  END { if (!found) exit 2 }
' "$doc" | cmp - "$file" || { echo "FAIL: the block 'file=$name' of $doc differs from $file (or is missing)"; exit 1; }
echo "the block 'file=$name' of $doc is $file"
