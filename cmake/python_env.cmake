# SPDX-License-Identifier: Apache-2.0
# cmake/python_env.cmake - the pinned Python environment the Python tests, the PyTorch and JAX
# extensions and the Hugging Face oracle run in (docs/python.md, "The Python environment").
#
# tools/setup makes it with tools/setup-python: a venv at .deps/venv (TERNJIT_VENV moves it)
# holding exactly python/requirements.txt (versions and hashes). Nothing of it is needed to
# build libternjit: without it TERNJIT_PYTHON is empty and every Python test reports SKIPPED
# with the reason. ternjit_python_test() adds one such test.
if(DEFINED ENV{TERNJIT_VENV} AND NOT "$ENV{TERNJIT_VENV}" STREQUAL "")
  set(_ternjit_venv "$ENV{TERNJIT_VENV}")
else()
  set(_ternjit_venv "${PROJECT_SOURCE_DIR}/.deps/venv")
endif()
set(_ternjit_python_default "")
if(EXISTS "${_ternjit_venv}/bin/python")
  set(_ternjit_python_default "${_ternjit_venv}/bin/python")
endif()
set(TERNJIT_PYTHON "${_ternjit_python_default}" CACHE FILEPATH
    "The Python of the pinned environment (tools/setup-python); empty: Python tests are SKIPPED")
# A cached value from an environment since removed is dropped, not used.
if(TERNJIT_PYTHON AND NOT EXISTS "${TERNJIT_PYTHON}")
  message(STATUS "Python environment: ${TERNJIT_PYTHON} is gone; Python tests will be SKIPPED")
  set(TERNJIT_PYTHON "" CACHE FILEPATH "" FORCE)
endif()
if(TERNJIT_PYTHON)
  message(STATUS "Python environment: ${TERNJIT_PYTHON}")
  set(TERNJIT_PYTHON_SKIP_REASON "")
else()
  message(STATUS "Python environment: none at ${_ternjit_venv} (tools/setup-python); Python tests are SKIPPED")
  set(TERNJIT_PYTHON_SKIP_REASON "SKIP: the Python environment is missing (${_ternjit_venv}): run tools/setup-python")
endif()

# ternjit_python_test(NAME SCRIPT [ARGS a...] [LABELS l...] [TIMEOUT s] [ENVIRONMENT e...])
# adds ctest NAME running SCRIPT with TERNJIT_PYTHON, the build's libternjit.so and the source
# tree's package (labels "e2e;python" plus LABELS; exit 77 is SKIPPED). Without the
# environment the test prints the reason and reports SKIPPED.
function(ternjit_python_test name script)
  cmake_parse_arguments(PARSE_ARGV 2 arg "" "TIMEOUT" "ARGS;LABELS;ENVIRONMENT")
  if(TERNJIT_PYTHON)
    add_test(NAME ${name} COMMAND ${TERNJIT_PYTHON} ${script} ${arg_ARGS})
  else()
    add_test(NAME ${name} COMMAND sh -c "echo '${TERNJIT_PYTHON_SKIP_REASON}'; exit 77")
  endif()
  if(NOT arg_TIMEOUT)
    set(arg_TIMEOUT 600)
  endif()
  set_tests_properties(${name} PROPERTIES LABELS "e2e;python;${arg_LABELS}" SKIP_RETURN_CODE 77
    TIMEOUT ${arg_TIMEOUT}
    ENVIRONMENT "TERNJIT_LIBRARY=$<TARGET_FILE:ternjit_shared>;PYTHONPATH=${PROJECT_SOURCE_DIR}/python;PYTHONDONTWRITEBYTECODE=1;${arg_ENVIRONMENT}")
endfunction()
