# find_package(lmfuse) from an install tree (cmake -P, run by ctest): installs this build into a fresh
# prefix, configures and builds tests/torch/consumer against it (lmfuse_rewrite runs the installed tool
# with the installed patterns), and runs the consumer, which checks fused against unfused.
#   -DBUILD_DIR=<lmfuse build> -DCONSUMER=<tests/torch/consumer> -DWORK=<scratch> -DGENERATOR=<gen>
#   -DTORCH_PREFIX=<Torch_DIR>
cmake_minimum_required(VERSION 3.22)
file(REMOVE_RECURSE "${WORK}")
set(prefix "${WORK}/prefix")
function(step)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE status OUTPUT_VARIABLE output ERROR_VARIABLE output)
  if(NOT status EQUAL 0)
    message(FATAL_ERROR "failed (${status}): ${ARGN}\n${output}")
  endif()
endfunction()
step("${CMAKE_COMMAND}" --install "${BUILD_DIR}" --prefix "${prefix}")
step("${CMAKE_COMMAND}" -S "${CONSUMER}" -B "${WORK}/build" -G "${GENERATOR}" -DCMAKE_BUILD_TYPE=Release
     "-DCMAKE_PREFIX_PATH=${prefix}" "-DTorch_DIR=${TORCH_PREFIX}")
step("${CMAKE_COMMAND}" --build "${WORK}/build")
file(READ "${WORK}/build/lmfuse_rewritten/consumer/audit.json" audit)
string(JSON patched GET "${audit}" summary patched)
if(NOT patched EQUAL 1)
  message(FATAL_ERROR "the consumer's audit has ${patched} patched sites, expected 1")
endif()
execute_process(COMMAND "${WORK}/build/consumer" RESULT_VARIABLE status)
if(NOT status EQUAL 0)
  message(FATAL_ERROR "the consumer's fused and unfused losses differ")
endif()

# EXPECT_PATCHED above what the sources allow: the build must fail, name the refused site and its
# reason, and leave no rewritten copy behind.
step("${CMAKE_COMMAND}" "${WORK}/build" -DCONSUMER_EXPECT_PATCHED=2)
execute_process(COMMAND "${CMAKE_COMMAND}" --build "${WORK}/build" RESULT_VARIABLE status
                OUTPUT_VARIABLE output ERROR_VARIABLE output)
if(status EQUAL 0)
  message(FATAL_ERROR "EXPECT_PATCHED 2 with one patchable site built without an error")
endif()
if(NOT output MATCHES "fewer than EXPECT_PATCHED 2" OR NOT output MATCHES "main.cpp:[0-9]+: unmatched logits-softcapped")
  message(FATAL_ERROR "the failed build does not name the refused site and its reason:\n${output}")
endif()
if(EXISTS "${WORK}/build/lmfuse_rewritten/consumer/main.cpp")
  message(FATAL_ERROR "a failed rewrite left its copy behind")
endif()
