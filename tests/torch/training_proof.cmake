# Training equivalence of the plain and the lmfuse-rewritten example GPT (cmake -P, run by ctest).
#   -DPLAIN=gpt_train -DFUSED=gpt_train_fused -DCOMPARE=compare_runs -DWORK=<folder> -DVARIANT=<name>
#   -DFLAGS="--head-bias" (trainer options of the variant) [-DDISABLED=ON] [-DRETURN_LOGITS=ON]
# Trains both 20 steps in fp32 from the same seed and requires every step's loss within 1e-5 relative
# and the final parameters within 1e-4 relative. DISABLED=ON runs the rewritten binary with
# LMFUSE_DISABLE=1 instead and requires the plain binary's losses and parameters bitwise.
# RETURN_LOGITS=ON runs it with LMFUSE_RETURN_LOGITS=1 (fused loss, logits still built): same tolerances.
# The rewritten binary reports its fused calls at exit (LMFUSE_REPORT_FUSED_CALLS=1): at least one per step,
# none when disabled.
cmake_minimum_required(VERSION 3.22)
separate_arguments(flags UNIX_COMMAND "${FLAGS}")
set(common --steps 20 --dtype fp32 --device cpu --seed 20261121 ${flags})
file(MAKE_DIRECTORY "${WORK}")

# FUSED_CALLS gets the count the rewritten binary reports at exit (LMFUSE_REPORT_FUSED_CALLS=1).
function(train binary name)
  execute_process(COMMAND ${ARGN} "${binary}" ${common} --params "${WORK}/${name}.params"
                  OUTPUT_FILE "${WORK}/${name}.csv" ERROR_VARIABLE errors RESULT_VARIABLE status)
  if(NOT status EQUAL 0)
    message(FATAL_ERROR "${binary} (${name}) failed: ${status}\n${errors}")
  endif()
  set(FUSED_CALLS -1 PARENT_SCOPE)
  if(errors MATCHES "lmfuse: ([0-9]+) fused calls")
    set(FUSED_CALLS ${CMAKE_MATCH_1} PARENT_SCOPE)
  endif()
endfunction()

if(DISABLED)
  set(fused_run fused-disabled)
  set(fused_env "${CMAKE_COMMAND}" -E env LMFUSE_DISABLE=1 LMFUSE_REPORT_FUSED_CALLS=1)
  set(tolerance --bitwise)
else()
  set(fused_run fused)
  set(fused_env "${CMAKE_COMMAND}" -E env --unset=LMFUSE_DISABLE --unset=LMFUSE_RETURN_LOGITS LMFUSE_REPORT_FUSED_CALLS=1)
  if(RETURN_LOGITS)
    set(fused_run fused-returning-logits)
    set(fused_env "${CMAKE_COMMAND}" -E env --unset=LMFUSE_DISABLE LMFUSE_RETURN_LOGITS=1 LMFUSE_REPORT_FUSED_CALLS=1)
  endif()
  set(tolerance --loss-rtol 1e-5 --param-rtol 1e-4)
endif()
train("${PLAIN}" plain)
train("${FUSED}" "${fused_run}" ${fused_env})
# The rewritten binary must have taken the fused path at every step (none when disabled).
if(DISABLED AND NOT FUSED_CALLS EQUAL 0)
  message(FATAL_ERROR "${VARIANT}: LMFUSE_DISABLE=1, yet the rewritten GPT reports ${FUSED_CALLS} fused calls")
elseif(NOT DISABLED AND FUSED_CALLS LESS 20)
  message(FATAL_ERROR "${VARIANT}: the rewritten GPT reports ${FUSED_CALLS} fused calls in 20 steps")
endif()
execute_process(
  COMMAND "${COMPARE}" "${WORK}/plain.csv" "${WORK}/${fused_run}.csv" "${WORK}/plain.params"
          "${WORK}/${fused_run}.params" ${tolerance}
  RESULT_VARIABLE status)
if(NOT status EQUAL 0)
  message(FATAL_ERROR "${VARIANT}: the rewritten GPT (${fused_run}) does not train like the plain one")
endif()
