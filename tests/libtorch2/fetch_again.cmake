# The setup's fetch run again over a fetched folder does nothing: exit 0, no output (a fetch says what it
# fetches), the READY file unchanged (cmake -P, run by ctest; it never downloads: without READY it skips).
#   -DREADY=<LMFUSE_LIBTORCH2_DIR/READY> -DSCRIPT=<scripts/fetch_libtorch2.sh>
cmake_minimum_required(VERSION 3.22)
include(${CMAKE_CURRENT_LIST_DIR}/fetched.cmake)
lmfuse_skip_unless_fetched()
get_filename_component(folder "${READY}" DIRECTORY)
file(READ "${READY}" before)
execute_process(COMMAND "${SCRIPT}" "${folder}" RESULT_VARIABLE status OUTPUT_VARIABLE output ERROR_VARIABLE output)
file(READ "${READY}" after)
if(NOT status EQUAL 0 OR NOT output STREQUAL "" OR NOT before STREQUAL after)
  message(FATAL_ERROR "${SCRIPT} ${folder} again: exit ${status}, READY \"${before}\" -> \"${after}\", output:\n${output}")
endif()
