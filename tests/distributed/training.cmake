# Several-process training of the example GPT against one process on the whole batch (cmake -P, by ctest).
#   -DTRAIN=gpt_train -DLAUNCH=lmfuse_launch -DCOMPARE=compare_runs -DWORK=<folder> -DRANKS=R -DPARALLEL=data|vocab
# Both train 10 fp32 steps on the CPU from one seed with --ignore-prefix (the ranks' shards hold different
# numbers of labelled tokens); the one-process run is the plain model (F::cross_entropy). Every step's loss
# must agree within 1e-6 relative and the final parameters within 1e-4 (L2, per tensor: AdamW divides each
# gradient by its running RMS, so fp32 rounding in the summed gradients moves small parameters by ~1e-5).
cmake_minimum_required(VERSION 3.22)
set(common --steps 10 --dtype fp32 --device cpu --seed 20261123 --ignore-prefix)
file(REMOVE_RECURSE "${WORK}")
file(MAKE_DIRECTORY "${WORK}")
execute_process(COMMAND "${TRAIN}" ${common} --params "${WORK}/single.params"
                OUTPUT_FILE "${WORK}/single.csv" ERROR_VARIABLE errors RESULT_VARIABLE status)
if(NOT status EQUAL 0)
  message(FATAL_ERROR "one process failed: ${status}\n${errors}")
endif()
execute_process(COMMAND "${LAUNCH}" --ranks ${RANKS} --timeout 100 --stdout "${WORK}/rank" --
                        "${TRAIN}" ${common} --parallel ${PARALLEL} --params "${WORK}/ranks.params"
                ERROR_VARIABLE errors RESULT_VARIABLE status)
if(NOT status EQUAL 0)
  message(FATAL_ERROR "${RANKS} ranks (${PARALLEL} parallel) failed: ${status}\n${errors}")
endif()
execute_process(COMMAND "${COMPARE}" "${WORK}/single.csv" "${WORK}/rank.0" "${WORK}/single.params"
                        "${WORK}/ranks.params" --loss-rtol 1e-6 --param-rtol 1e-4
                RESULT_VARIABLE status)
if(NOT status EQUAL 0)
  message(FATAL_ERROR "${PARALLEL}-parallel training on ${RANKS} ranks does not follow one process")
endif()
