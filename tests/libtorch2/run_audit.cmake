# Runs the lmfuse tool over model sources against one LibTorch's headers and checks its audit (cmake -P, run
# by ctest).
#   -DTOOL=<lmfuse> -DSOURCES=<files> -DSTD=<c++17|c++20> -DHEADER_FLAG=<-isystem|-I> -DLIBTORCH=<include dirs, :-separated>
#   -DAUDIT=<file to write> -DEXPECT_EXIT=<the tool's exit status>
#   [-DREADY=<file>]   skip (fetched.cmake) when absent: the LibTorch 2.x headers were not fetched
#   then one check of the audit:
#   -DCHECK_AUDIT=<tests/torch/check_audit.cmake> -DMODE=<gpt|gallery> [-DMODELS=…]   that script's check
#   -DEXPECT_SITES=<function=status[:reason],…>   exactly these sites (a parse error has no function: "=failed:parse-error")
#   [-DEXPECT_DETAIL=<regex>]                      every site's detail matches it
# Always: no site lies in a file under a LIBTORCH folder, whether its headers come with -isystem or -I.
cmake_minimum_required(VERSION 3.22)
include(${CMAKE_CURRENT_LIST_DIR}/fetched.cmake)
lmfuse_skip_unless_fetched()
# Lists come separated by : and , (ctest would split them on ;).
string(REPLACE ":" ";" LIBTORCH "${LIBTORCH}")
if(DEFINED EXPECT_SITES)
  string(REPLACE "," ";" EXPECT_SITES "${EXPECT_SITES}")
endif()

set(flags "-std=${STD}")
foreach(dir IN LISTS LIBTORCH)
  if(NOT dir STREQUAL "/usr/include")  # a default system folder: naming it again breaks #include_next
    list(APPEND flags "${HEADER_FLAG}${dir}")
  endif()
endforeach()
list(JOIN flags " " shown_flags)
file(REMOVE "${AUDIT}")
execute_process(COMMAND "${TOOL}" --audit "${AUDIT}" ${SOURCES} -- ${flags}
  RESULT_VARIABLE status OUTPUT_VARIABLE diff ERROR_VARIABLE output)
set(problems "")
if(NOT status STREQUAL EXPECT_EXIT)
  string(APPEND problems "\n  the tool exited ${status}, expected ${EXPECT_EXIT}:\n${output}")
endif()
if(NOT EXISTS "${AUDIT}")
  message(FATAL_ERROR "lmfuse ${SOURCES} -- ${shown_flags}: no audit written${problems}")
endif()
file(READ "${AUDIT}" audit)
string(JSON count LENGTH "${audit}" sites)

set(actual "")
if(count GREATER 0)
  math(EXPR last "${count} - 1")
  foreach(i RANGE ${last})
    string(JSON file GET "${audit}" sites ${i} file)
    string(JSON line GET "${audit}" sites ${i} line)
    string(JSON status GET "${audit}" sites ${i} status)
    string(JSON reason ERROR_VARIABLE no_reason GET "${audit}" sites ${i} reason)
    string(JSON function ERROR_VARIABLE no_function GET "${audit}" sites ${i} function)
    string(JSON detail ERROR_VARIABLE no_detail GET "${audit}" sites ${i} detail)
    if(DEFINED EXPECT_DETAIL AND NOT detail MATCHES "${EXPECT_DETAIL}")
      string(APPEND problems "\n  ${file}:${line}: detail \"${detail}\" does not match \"${EXPECT_DETAIL}\"")
    endif()
    foreach(dir IN LISTS LIBTORCH)
      string(FIND "${file}" "${dir}/" at)
      if(at EQUAL 0 AND NOT dir STREQUAL "/usr/include")
        string(APPEND problems "\n  ${file}:${line}: a site inside LibTorch (${status} ${reason}); its headers came with ${HEADER_FLAG}")
        break()
      endif()
    endforeach()
    set(entry "${function}=${status}")
    if(reason)
      string(APPEND entry ":${reason}")
    endif()
    list(APPEND actual "${entry}")
  endforeach()
endif()

if(DEFINED EXPECT_SITES)
  list(SORT actual)
  list(SORT EXPECT_SITES)
  if(NOT actual STREQUAL EXPECT_SITES)
    string(APPEND problems "\n  sites ${actual}, expected ${EXPECT_SITES}")
  endif()
endif()
if(problems)
  message(FATAL_ERROR "lmfuse ${SOURCES} -- ${shown_flags}:${problems}")
endif()

if(CHECK_AUDIT)
  execute_process(COMMAND "${CMAKE_COMMAND}" -DAUDIT=${AUDIT} -DMODE=${MODE} -DMODELS=${MODELS} -P "${CHECK_AUDIT}"
    RESULT_VARIABLE checked)
  if(NOT checked EQUAL 0)
    message(FATAL_ERROR "lmfuse ${SOURCES} -- ${shown_flags}: the audit fails ${CHECK_AUDIT} (MODE ${MODE})")
  endif()
endif()
message(STATUS "lmfuse ${SOURCES} -- ${shown_flags}: ${count} sites as expected")
