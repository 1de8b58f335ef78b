# SPDX-License-Identifier: Apache-2.0
# embed_text.cmake - writes a C++ header holding a text file as a raw string literal.
#
# Script mode, run at build time by the custom command in the top-level CMakeLists.txt:
#   cmake -DINPUT=<file> -DOUTPUT=<header> -DNAME=<constant> -DSOURCE=<name shown in comments> -P embed_text.cmake
# The header defines `inline constexpr char ternjit::examples::<NAME>[]` with the file's
# bytes, unchanged. The output is rewritten only when its content changes, so consumers
# recompile only when the text does.
foreach(var INPUT OUTPUT NAME SOURCE)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "embed_text.cmake: -D${var}=... is required")
  endif()
endforeach()
file(READ "${INPUT}" TEXT)
get_filename_component(HEADER "${OUTPUT}" NAME)
set(DELIM "tri")
string(FIND "${TEXT}" ")${DELIM}\"" clash)
if(NOT clash EQUAL -1)
  message(FATAL_ERROR "embed_text.cmake: ${INPUT} contains the raw-string delimiter ')${DELIM}\"'")
endif()
file(CONFIGURE OUTPUT "${OUTPUT}" @ONLY CONTENT [=[
// SPDX-License-Identifier: Apache-2.0
// @HEADER@ - generated from @SOURCE@ by cmake/embed_text.cmake: edit that file.
#pragma once

namespace ternjit::examples {

/// The text of @SOURCE@, byte for byte (its canonical copy).
inline constexpr char @NAME@[] = R"@DELIM@(@TEXT@)@DELIM@";

}  // namespace ternjit::examples
]=])
