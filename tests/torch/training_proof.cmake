# Training equivalence of the plain and the lmfuse-rewritten example GPT (cmake -P, run by ctest).
#   -DPLAIN=gpt_train -DFUSED=gpt_train_fused -DCOMPARE=compare_runs -DWORK=<folder> -DVARIANT=<name>
#   -DFLAGS="--head-bias" (trainer options of the variant) [-DDISABLED=ON] [-DRETURN_LOGITS=ON]
# Trains both 20 steps in fp32 from the same seed and requires every step's loss within 1e-5 relative
# and the final parameters within 1e-4 relative. DISABLED=ON runs the rewritten binary with
# LMFUSE_DISABLE=1 instead and requires the plain binary's losses and parameters bitwise.
# RETURN_LOGITS=ON runs it with LMFUSE_RETURN_LOGITS=1 (fused loss, logits still built): same tolerances.
cmake_minimum_required(VERSION 3.22)
separate_arguments(flags UNIX_COMMAND "${FLAGS}")
set(common --steps 20 --dtype fp32 --device cpu --seed 20261121 ${flags})
file(MAKE_DIRECTORY "${WORK}")

function(train binary name)
  execute_process(COMMAND ${ARGN} "${binary}" ${common} --params "${WORK}/${name}.params"
                  OUTPUT_FILE "${WORK}/${name}.csv" ERROR_VARIABLE errors RESULT_VARIABLE status)
  if(NOT status EQUAL 0)
    message(FATAL_ERROR "${binary} (${name}) failed: ${status}\n${errors}")
  endif()
endfunction()

if(DISABLED)
  set(fused_run fused-disabled)
  set(fused_env "${CMAKE_COMMAND}" -E env LMFUSE_DISABLE=1)
  set(tolerance --bitwise)
else()
  set(fused_run fused)
  set(fused_env "${CMAKE_COMMAND}" -E env --unset=LMFUSE_DISABLE --unset=LMFUSE_RETURN_LOGITS)
  if(RETURN_LOGITS)
    set(fused_run fused-returning-logits)
    set(fused_env "${CMAKE_COMMAND}" -E env --unset=LMFUSE_DISABLE LMFUSE_RETURN_LOGITS=1)
  endif()
  set(tolerance --loss-rtol 1e-5 --param-rtol 1e-4)
endif()
train("${PLAIN}" plain)
train("${FUSED}" "${fused_run}" ${fused_env})
execute_process(
  COMMAND "${COMPARE}" "${WORK}/plain.csv" "${WORK}/${fused_run}.csv" "${WORK}/plain.params"
          "${WORK}/${fused_run}.params" ${tolerance}
  RESULT_VARIABLE status)
if(NOT status EQUAL 0)
  message(FATAL_ERROR "${VARIANT}: the rewritten GPT (${fused_run}) does not train like the plain one")
endif()
