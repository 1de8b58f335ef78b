# SPDX-License-Identifier: Apache-2.0
# cmake/llama_cpp.cmake - llama.cpp beside ternjit (tools/llama_cpp/llama_cpp_runner.h): the
# library ternjit_llama_cpp, built with llama.cpp when tools/build-llama-cpp has put its
# libraries and headers in TERNJIT_LLAMA_CPP_DIR, else answering "unavailable: run
# tools/build-llama-cpp". Used only by tests/llama_cpp, bench_bitnet and llama_cpp_logits (every
# position's logits on this host or across llama.cpp RPC servers: e2e/ggml_rpc, docs/ggml.md);
# never by libternjit.
set(TERNJIT_LLAMA_CPP_DIR "${PROJECT_SOURCE_DIR}/.deps/llama.cpp" CACHE PATH
    "llama.cpp built by tools/build-llama-cpp (include/, lib/, VERSION)")
add_library(ternjit_llama_cpp STATIC ${PROJECT_SOURCE_DIR}/tools/llama_cpp/llama_cpp_runner.cpp)
target_include_directories(ternjit_llama_cpp PUBLIC ${PROJECT_SOURCE_DIR} ${PROJECT_SOURCE_DIR}/include)
target_link_libraries(ternjit_llama_cpp PRIVATE ternjit_warnings)
# libllama and ggml's libraries of that build, only there (never a system copy).
set(_llama_missing "")
set(_llama_libs "")
foreach(_name llama ggml ggml-base ggml-cpu)
  string(MAKE_C_IDENTIFIER "TERNJIT_LLAMA_CPP_LIB_${_name}" _var)
  find_library(${_var} NAMES ${_name} PATHS "${TERNJIT_LLAMA_CPP_DIR}/lib" NO_DEFAULT_PATH NO_CACHE)
  if(${_var})
    list(APPEND _llama_libs "${${_var}}")
  else()
    list(APPEND _llama_missing "lib/lib${_name}.so")
  endif()
endforeach()
foreach(_file include/llama.h VERSION)
  if(NOT EXISTS "${TERNJIT_LLAMA_CPP_DIR}/${_file}")
    list(APPEND _llama_missing "${_file}")
  endif()
endforeach()
if(NOT _llama_missing)
  file(READ "${TERNJIT_LLAMA_CPP_DIR}/VERSION" _llama_version)
  string(STRIP "${_llama_version}" _llama_version)
  message(STATUS "llama.cpp side by side: ${_llama_version} (${TERNJIT_LLAMA_CPP_DIR})")
  set(TERNJIT_HAVE_LLAMA_CPP ON)
  # Its headers are third-party: included as system headers (no project warnings on them).
  target_include_directories(ternjit_llama_cpp SYSTEM PRIVATE "${TERNJIT_LLAMA_CPP_DIR}/include")
  target_compile_definitions(ternjit_llama_cpp PRIVATE TERNJIT_HAVE_LLAMA_CPP=1
                             "TERNJIT_LLAMA_CPP_VERSION=\"${_llama_version}\"")
  target_link_libraries(ternjit_llama_cpp PUBLIC ${_llama_libs})
  # Programs linking it find the libraries there (build tree only; nothing of this is installed).
  target_link_options(ternjit_llama_cpp INTERFACE "LINKER:-rpath,${TERNJIT_LLAMA_CPP_DIR}/lib")
  # Its RPC server, which e2e/ggml_rpc starts on two hosts, and the program run against them.
  set(TERNJIT_LLAMA_CPP_RPC_SERVER "${TERNJIT_LLAMA_CPP_DIR}/bin/ggml-rpc-server")
  add_executable(llama_cpp_logits ${PROJECT_SOURCE_DIR}/tools/llama_cpp/llama_cpp_logits.cpp)
  target_link_libraries(llama_cpp_logits PRIVATE ternjit_llama_cpp ternjit_formats ternjit_warnings CLI11::CLI11)
  # A rebuild of llama.cpp (another pin) configures again.
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${TERNJIT_LLAMA_CPP_DIR}/VERSION")
else()
  string(REPLACE ";" ", " _llama_missing "${_llama_missing}")
  message(STATUS "llama.cpp side by side: not built (${TERNJIT_LLAMA_CPP_DIR} lacks ${_llama_missing}; "
                 "tools/build-llama-cpp); its checks report SKIPPED")
  set(TERNJIT_HAVE_LLAMA_CPP OFF)
  target_compile_definitions(ternjit_llama_cpp PRIVATE TERNJIT_HAVE_LLAMA_CPP=0
                             "TERNJIT_LLAMA_CPP_MISSING=\"${TERNJIT_LLAMA_CPP_DIR} lacks ${_llama_missing}\"")
endif()
