# Runs COMMAND (a test executable) when the LibTorch 2.x headers were fetched (cmake -P, run by ctest).
#   -DREADY=<the READY file of scripts/fetch_libtorch2.sh> -DCOMMAND=<executable>
cmake_minimum_required(VERSION 3.22)
include(${CMAKE_CURRENT_LIST_DIR}/fetched.cmake)
lmfuse_skip_unless_fetched()
execute_process(COMMAND "${COMMAND}" RESULT_VARIABLE status)
if(NOT status EQUAL 0)
  message(FATAL_ERROR "${COMMAND}: exit ${status}")
endif()
