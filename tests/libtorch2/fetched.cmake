# lmfuse_skip_unless_fetched(): in a test script (cmake -P), when READY is given and absent (the LibTorch 2.x
# headers were not fetched: offline setup), print the line that ctest's SKIP_REGULAR_EXPRESSION for these
# tests reports as skipped, and end the script. A macro, so that its return() ends the calling script.
macro(lmfuse_skip_unless_fetched)
  if(READY AND NOT EXISTS "${READY}")
    message("lmfuse-skip: ${READY} is absent: the LibTorch 2.x headers were not fetched (scripts/fetch_libtorch2.sh, run by scripts/setup.sh)")
    return()
  endif()
endmacro()
