# SPDX-License-Identifier: Apache-2.0
# cmake/llama_cpp.cmake - llama.cpp beside ternjit (tools/llama_cpp/llama_cpp_runner.h): the
# library ternjit_llama_cpp, built with llama.cpp when tools/fetch-llama-cpp has put its
# libraries and headers in TERNJIT_LLAMA_CPP_DIR, else answering "unavailable: run
# tools/fetch-llama-cpp". Used only by tests/llama_cpp and bench_bitnet; never by libternjit.
set(TERNJIT_LLAMA_CPP_DIR "${PROJECT_SOURCE_DIR}/.deps/llama.cpp" CACHE PATH
    "llama.cpp fetched by tools/fetch-llama-cpp (include/, lib/, VERSION)")
add_library(ternjit_llama_cpp STATIC ${PROJECT_SOURCE_DIR}/tools/llama_cpp/llama_cpp_runner.cpp)
target_include_directories(ternjit_llama_cpp PUBLIC ${PROJECT_SOURCE_DIR} ${PROJECT_SOURCE_DIR}/include)
target_link_libraries(ternjit_llama_cpp PRIVATE ternjit_warnings)
set(_llama_lib "${TERNJIT_LLAMA_CPP_DIR}/lib/libllama.v0.5.0.so")
if(EXISTS "${TERNJIT_LLAMA_CPP_DIR}/include/llama.h" AND EXISTS "${_llama_lib}" AND EXISTS "${TERNJIT_LLAMA_CPP_DIR}/VERSION")
  file(READ "${TERNJIT_LLAMA_CPP_DIR}/VERSION" _llama_version)
  string(STRIP "${_llama_version}" _llama_version)
  message(STATUS "llama.cpp side by side: ${_llama_version} (${TERNJIT_LLAMA_CPP_DIR})")
  set(TERNJIT_HAVE_LLAMA_CPP ON)
  # Its headers are third-party: included as system headers (no project warnings on them).
  target_include_directories(ternjit_llama_cpp SYSTEM PRIVATE "${TERNJIT_LLAMA_CPP_DIR}/include")
  target_compile_definitions(ternjit_llama_cpp PRIVATE TERNJIT_HAVE_LLAMA_CPP=1
                             "TERNJIT_LLAMA_CPP_LIB_DIR=\"${TERNJIT_LLAMA_CPP_DIR}/lib\""
                             "TERNJIT_LLAMA_CPP_VERSION=\"${_llama_version}\"")
  target_link_libraries(ternjit_llama_cpp PUBLIC "${_llama_lib}" "${TERNJIT_LLAMA_CPP_DIR}/lib/libggml.v0.5.0.so"
                        "${TERNJIT_LLAMA_CPP_DIR}/lib/libggml-base.so")
  # Programs linking it find the libraries there (build tree only; nothing of this is installed).
  target_link_options(ternjit_llama_cpp INTERFACE "LINKER:-rpath,${TERNJIT_LLAMA_CPP_DIR}/lib")
else()
  message(STATUS "llama.cpp side by side: not fetched (tools/fetch-llama-cpp); its checks report SKIPPED")
  set(TERNJIT_HAVE_LLAMA_CPP OFF)
  target_compile_definitions(ternjit_llama_cpp PRIVATE TERNJIT_HAVE_LLAMA_CPP=0)
endif()
