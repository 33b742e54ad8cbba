# The usage scenarios of tests/usage (cmake -P, run by ctest): projects of their own that use an
# installed lmfuse as users do. Each step asserts the outcome the scenario promises: training through the
# fused path with the original's losses (the programs check that themselves and exit 1 otherwise), or a
# failure with the expected message.
#   -DSTEP=setup   installs BUILD_DIR into WORK/prefix and configures USAGE (all scenarios but
#                  runtime_only) in WORK/build
#   -DSTEP=<name>  builds and checks one scenario (header_two_units, include_src, logits_read,
#                  autocast_cpu, already_patched, gcc_flag, loss_forms, build_guards, public_include,
#                  stale_units, runtime_only, cmake_step);
#                  stale_units configures a copy of its project of its own; include_src is also
#                  built where Clang is not, from the mirror its first build made (LMFUSE_REWRITTEN_DIR)
#   -DBUILD_DIR=<lmfuse build> -DUSAGE=<tests/usage> -DWORK=<scratch> -DGENERATOR=<gen> -DTORCH_PREFIX=<Torch_DIR>
cmake_minimum_required(VERSION 3.22)
set(prefix "${WORK}/prefix")
set(build "${WORK}/build")

function(step)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE status OUTPUT_VARIABLE output ERROR_VARIABLE output)
  if(NOT status EQUAL 0)
    message(FATAL_ERROR "failed (${status}): ${ARGN}\n${output}")
  endif()
endfunction()

# Runs a scenario's program; OUT gets its output, STATUS its exit status.
function(run_program program)
  execute_process(COMMAND "${CMAKE_COMMAND}" -E env --unset=LMFUSE_DISABLE --unset=LMFUSE_RETURN_LOGITS ${ARGN}
                          "${program}"
                  RESULT_VARIABLE status OUTPUT_VARIABLE output ERROR_VARIABLE output)
  set(OUT "${output}" PARENT_SCOPE)
  set(STATUS "${status}" PARENT_SCOPE)
endfunction()

# Builds the scenario's target (usage_<scenario>, or the one named after it), runs it and requires the
# fused-path check to pass; OUT gets its output.
function(trains_fused scenario)
  set(target usage_${scenario})
  if(ARGC GREATER 1)
    set(target "${ARGV1}")
  endif()
  step("${CMAKE_COMMAND}" --build "${build}" --target ${target})
  run_program("${build}/${scenario}/${target}")
  if(NOT STATUS EQUAL 0 OR NOT OUT MATCHES "trains through the fused path like the original")
    message(FATAL_ERROR "${scenario}: the rewritten program does not train through the fused path like the "
                        "original (exit ${STATUS}):\n${OUT}")
  endif()
  message(STATUS "${scenario}:\n${OUT}")
  set(OUT "${OUT}" PARENT_SCOPE)
endfunction()

# Builds a target (of the usage build, or of the build folder given second) that must fail; OUT gets the
# build's output.
function(build_fails target)
  set(folder "${build}")
  if(ARGC GREATER 1)
    set(folder "${ARGV1}")
  endif()
  execute_process(COMMAND "${CMAKE_COMMAND}" --build "${folder}" --target ${target}
                  RESULT_VARIABLE status OUTPUT_VARIABLE output ERROR_VARIABLE output)
  if(status EQUAL 0)
    message(FATAL_ERROR "${target} built, but its build must fail")
  endif()
  set(OUT "${output}" PARENT_SCOPE)
endfunction()

# Builds <target> of the usage build, which must fail with output matching every regular expression after
# <what> (CMake's wrapped lines joined into one); else the test fails saying the failure does not name <what>.
function(build_fails_naming target what)
  build_fails(${target})
  string(REGEX REPLACE "[ \t\r\n]+" " " flat "${OUT}")
  foreach(pattern IN LISTS ARGN)
    if(NOT flat MATCHES "${pattern}")
      message(FATAL_ERROR "${target}: the failed build does not name ${what}:\n${OUT}")
    endif()
  endforeach()
endfunction()

# <target> holds code whose branch the tool analysed (under Clang) and another compiler may take otherwise: under
# Clang (<compiler_id>) it builds; under any other compiler the build fails naming <what>, as each pattern says.
function(builds_under_clang_else_fails_naming compiler_id target what)
  if(compiler_id MATCHES "Clang")
    step("${CMAKE_COMMAND}" --build "${build}" --target ${target})
  else()
    build_fails_naming(${target} "${what} (compiled by ${compiler_id})" ${ARGN})
  endif()
endfunction()

# include_src where Clang is not: a copy of its sources (so the test may change them) built from the mirror
# the usage build made of them (LMFUSE_REWRITTEN_DIR = a copy of its lmfuse_rewritten/). It trains fused
# while every original is what the mirror was made from; a header or source changed since, an original
# gone, a file the audit does not list, or no audit at all fails the build, naming the file; so does a
# flag that defines a macro the model names otherwise than when the mirror was made, and a header the
# model tests for with __has_include found where it was not.
function(carried_mirror_checks)
  set(carried "${WORK}/carried")
  set(carried_build "${carried}/build")
  set(mirror "${carried}/lmfuse_rewritten")
  file(REMOVE_RECURSE "${carried}")
  file(COPY "${USAGE}/include_src" "${USAGE}/common" "${build}/include_src/lmfuse_rewritten" DESTINATION "${carried}")
  get_filename_component(tree "${carried}/include_src" REALPATH)
  step("${CMAKE_COMMAND}" -S "${tree}" -B "${carried_build}" -G "${GENERATOR}" -DCMAKE_BUILD_TYPE=Release
       "-DCMAKE_PREFIX_PATH=${prefix}" "-DTorch_DIR=${TORCH_PREFIX}" "-DLMFUSE_REWRITTEN_DIR=${mirror}")
  step("${CMAKE_COMMAND}" --build "${carried_build}" --target usage_include_src)
  run_program("${carried_build}/usage_include_src")
  if(NOT STATUS EQUAL 0 OR NOT OUT MATCHES "trains through the fused path like the original")
    message(FATAL_ERROR "include_src: the program built from the carried mirror does not train through the "
                        "fused path like the original (exit ${STATUS}):\n${OUT}")
  endif()
  # The same mirror built under a flag its analysis never saw: TINY_SOFTCAP caps the logits between the
  # head and the loss (model.h), so the patched site would compute another loss than the original. The
  # header #undefs it after the test, so only how the unit starts tells the flag.
  set(carried_build "${carried}/build-softcap")
  step("${CMAKE_COMMAND}" -S "${tree}" -B "${carried_build}" -G "${GENERATOR}" -DCMAKE_BUILD_TYPE=Release
       "-DCMAKE_PREFIX_PATH=${prefix}" "-DTorch_DIR=${TORCH_PREFIX}" "-DLMFUSE_REWRITTEN_DIR=${mirror}"
       "-DCMAKE_CXX_FLAGS=-DTINY_SOFTCAP")
  string(CONCAT expected "TINY_SOFTCAP is `#define TINY_SOFTCAP 1` before any file here (a flag or the "
                         "compiler), but the rewrite was analysed with it undefined before any file")
  carried_refused("${expected}")
  # The same mirror where a header it tests for is found: model.h caps the logits when tiny_cap.h is on
  # the include path, which it was not where the mirror was made.
  set(carried_build "${carried}/build-cap-header")
  file(WRITE "${carried}/common/tiny_cap.h" "// found here, not where the mirror was made\n")
  step("${CMAKE_COMMAND}" -S "${tree}" -B "${carried_build}" -G "${GENERATOR}" -DCMAKE_BUILD_TYPE=Release
       "-DCMAKE_PREFIX_PATH=${prefix}" "-DTorch_DIR=${TORCH_PREFIX}" "-DLMFUSE_REWRITTEN_DIR=${mirror}")
  carried_refused("`__has_include(\"tiny_cap.h\")` in include/tiny/model.h is true here, but the rewrite was "
                  "analysed where it was false")
  file(REMOVE "${carried}/common/tiny_cap.h")
  set(carried_build "${carried}/build")
  # Right after that build: the header's change alone must run the check again.
  file(APPEND "${tree}/include/tiny/model.h" "// changed after the mirror was made\n")
  carried_refused("${tree}/include/tiny/model.h has changed since its copy was made")
  file(COPY_FILE "${USAGE}/include_src/include/tiny/model.h" "${tree}/include/tiny/model.h")
  file(APPEND "${tree}/src/train.cpp" "// changed after the mirror was made\n")
  carried_refused("${tree}/src/train.cpp has changed since its copy was made")
  file(COPY_FILE "${USAGE}/include_src/src/train.cpp" "${tree}/src/train.cpp")
  file(RENAME "${tree}/include/tiny/model.h" "${tree}/include/tiny/model.h.moved")
  carried_refused("${tree}/include/tiny/model.h no longer exists")
  file(RENAME "${tree}/include/tiny/model.h.moved" "${tree}/include/tiny/model.h")
  # A copy cut short on its way to this machine (a full disk, say).
  set(copy "${mirror}/usage_include_src/src/train.cpp")
  file(READ "${copy}" whole)
  string(LENGTH "${whole}" length)
  math(EXPR half "${length} / 2")
  string(SUBSTRING "${whole}" 0 ${half} cut)
  file(WRITE "${copy}" "${cut}")
  carried_refused("${copy} is not the copy the tool wrote")
  file(WRITE "${copy}" "${whole}")
  file(WRITE "${mirror}/usage_include_src/include/tiny/extra.h" "// not made by the run the audit describes\n")
  carried_refused("${mirror}/usage_include_src/include/tiny/extra.h is not a copy the audit lists")
  file(REMOVE "${mirror}/usage_include_src/include/tiny/extra.h")
  # Nothing to check the copies against: configuring again (the audit is a configure dependency) fails.
  file(REMOVE "${mirror}/usage_include_src/audit.json")
  carried_refused("LMFUSE_REWRITTEN_DIR holds no audit ${mirror}/usage_include_src/audit.json")
endfunction()

# The carried build of usage_include_src (carried_build of carried_mirror_checks) must fail with `expected`
# in its output, saying to re-run the tool, and leave no copy of a source and no audit in the build tree.
function(carried_refused expected)
  build_fails(usage_include_src "${carried_build}")
  string(REGEX REPLACE "[ \t\r\n]+" " " flat "${OUT}")  # CMake wraps an error's lines
  string(FIND "${flat}" "${expected}" named)
  string(FIND "${flat}" "e-run the lmfuse tool" rerun)
  if(named EQUAL -1 OR rerun EQUAL -1)
    message(FATAL_ERROR "include_src: the carried build must fail with '${expected}' and say to re-run the "
                        "tool:\n${OUT}")
  endif()
  foreach(left "src/train.cpp" "audit.json")
    if(EXISTS "${carried_build}/lmfuse_rewritten/usage_include_src/${left}")
      message(FATAL_ERROR "include_src: the refused carried build left ${left} in its mirror")
    endif()
  endforeach()
endfunction()

function(audit_count audit key out)
  file(READ "${audit}" text)
  string(JSON value GET "${text}" summary ${key})
  set(${out} "${value}" PARENT_SCOPE)
endfunction()

if(STEP STREQUAL "setup")
  file(REMOVE_RECURSE "${WORK}")
  step("${CMAKE_COMMAND}" --install "${BUILD_DIR}" --prefix "${prefix}")
  execute_process(COMMAND "${CMAKE_COMMAND}" -S "${USAGE}" -B "${build}" -G "${GENERATOR}" -DCMAKE_BUILD_TYPE=Release
                          "-DCMAKE_PREFIX_PATH=${prefix}" "-DTorch_DIR=${TORCH_PREFIX}"
                  RESULT_VARIABLE status OUTPUT_VARIABLE output ERROR_VARIABLE output)
  if(NOT status EQUAL 0)
    message(FATAL_ERROR "configuring the usage scenarios failed (${status}):\n${output}")
  endif()

elseif(STEP STREQUAL "header_two_units" OR STEP STREQUAL "gcc_flag" OR STEP STREQUAL "loss_forms")
  trains_fused(${STEP})
  if(STEP STREQUAL "header_two_units")
    trains_fused(header_two_units usage_header_two_units_from_objects)  # its objects through $<TARGET_OBJECTS:>
  endif()

elseif(STEP STREQUAL "include_src")
  trains_fused(include_src)
  trains_fused(include_src usage_include_src_linked)  # its include folder through a symbolic link
  # The compile database lists the original too: the tool finds its flags there and sees the header's site.
  execute_process(COMMAND "${prefix}/bin/lmfuse" -p "${build}" "${USAGE}/include_src/src/train.cpp"
                  RESULT_VARIABLE status OUTPUT_VARIABLE output ERROR_VARIABLE output)
  if(NOT status EQUAL 0 OR NOT output MATCHES "linear_cross_entropy")
    message(FATAL_ERROR "include_src: `lmfuse -p <build> src/train.cpp` does not work (exit ${status}):\n${output}")
  endif()
  carried_mirror_checks()

elseif(STEP STREQUAL "autocast_cpu")
  trains_fused(${STEP})
  if(NOT OUT MATCHES "dtypes as the original's")
    message(FATAL_ERROR "autocast_cpu: the fused loss or the head's gradient has another dtype:\n${OUT}")
  endif()

elseif(STEP STREQUAL "logits_read")
  step("${CMAKE_COMMAND}" --build "${build}" --target usage_logits_read)
  run_program("${build}/logits_read/usage_logits_read")
  if(STATUS EQUAL 0 OR NOT OUT MATCHES "shape ok")
    message(FATAL_ERROR "logits_read: expected the shape reads to pass and the value read to fail (exit ${STATUS}):\n${OUT}")
  endif()
  foreach(expected "lmfuse" "main\\.cpp:[0-9]+" "LMFUSE_RETURN_LOGITS=1" "NOLINT\\(lmfuse\\)")
    if(NOT OUT MATCHES "${expected}")
      message(FATAL_ERROR "logits_read: the error does not name '${expected}':\n${OUT}")
    endif()
  endforeach()
  run_program("${build}/logits_read/usage_logits_read" LMFUSE_RETURN_LOGITS=1)
  if(NOT STATUS EQUAL 0 OR NOT OUT MATCHES "accuracy")
    message(FATAL_ERROR "logits_read: with LMFUSE_RETURN_LOGITS=1 the program must run (exit ${STATUS}):\n${OUT}")
  endif()
  # Shapes known only at run time: the reshaped skipped logits answer the reshaped shape; 3-D logits handed
  # to the loss as they are (classes read from dimension 1) are a loss the fused call computes as the
  # original does: the same value as the original's (LMFUSE_DISABLE=1).
  step("${CMAKE_COMMAND}" --build "${build}" --target usage_logits_rank)
  run_program("${build}/logits_read/usage_logits_rank")
  string(REGEX MATCH "loss over dimension 1: [-0-9.naif]+" rewritten "${OUT}")
  if(NOT STATUS EQUAL 0 OR NOT OUT MATCHES "reshaped shape ok" OR NOT rewritten)
    message(FATAL_ERROR "logits_rank: expected the reshaped shape to read and the 3-D loss to be computed (exit ${STATUS}):\n${OUT}")
  endif()
  run_program("${build}/logits_read/usage_logits_rank" LMFUSE_DISABLE=1)
  string(REGEX MATCH "loss over dimension 1: [-0-9.naif]+" original "${OUT}")
  if(NOT STATUS EQUAL 0 OR NOT original STREQUAL rewritten)
    message(FATAL_ERROR "logits_rank: the rewritten program prints '${rewritten}', the original (LMFUSE_DISABLE=1) "
                        "'${original}' (exit ${STATUS}):\n${OUT}")
  endif()

elseif(STEP STREQUAL "cmake_step")
  # The build step's own checks on stub headers (tests/usage/cmake_step/check.cmake: the tool as a
  # dependency, audits written whole, Makefiles, multi-config generators refused, include order kept).
  step("${CMAKE_COMMAND}" --build "${build}" --target usage_cmake_step)
elseif(STEP STREQUAL "build_guards")
  # Units lmfuse_rewrite never saw that read the model: the build fails naming them.
  foreach(target IN ITEMS guard_unseen guard_late)
    build_fails(${target})
    if(NOT OUT MATCHES "did not see" OR NOT OUT MATCHES "unseen\\.cpp \\(it reads [^)]*model\\.h\\)")
      message(FATAL_ERROR "${target}: the failed build does not name unseen.cpp and the model it reads:\n${OUT}")
    endif()
  endforeach()
  # A source's own definitions reach the tool: the capped site is refused, so EXPECT_PATCHED 1 fails.
  build_fails(guard_source_define)
  if(NOT OUT MATCHES "logits-softcapped")
    message(FATAL_ERROR "guard_source_define: the site capped under the source's definition was not refused:\n${OUT}")
  endif()
  # AUDIT naming a file that is not an audit: refused, and the file keeps its contents.
  build_fails(guard_audit_path)
  file(READ "${build}/build_guards/not_an_audit.txt" kept)
  string(REGEX REPLACE "[ \t\r\n]+" " " flat "${OUT}")  # CMake wraps a message's lines
  if(NOT flat MATCHES "is a file that is not an lmfuse audit" OR NOT kept STREQUAL "notes kept by hand\n")
    message(FATAL_ERROR "guard_audit_path: the file AUDIT names was not left alone:\n${kept}\n${OUT}")
  endif()
  # A quote include resolves in each copy as in its original (main.cpp's #error says otherwise).
  step("${CMAKE_COMMAND}" --build "${build}" --target guard_quote)
  # The tool parses with Clang, the build compiles with its own compiler: where that is not Clang, the
  # model's `#if defined(__clang__)` branch the tool analysed is not the one compiled, and the build fails
  # naming the macro. Under Clang both agree and it builds.
  file(READ "${build}/build_guards/compiler_id.txt" compiler_id)
  builds_under_clang_else_fails_naming("${compiler_id}" guard_compiler "__clang__"
    "__clang__ is undefined here, but the rewrite was analysed with `#define __clang__ 1` \\(built-in\\)"
    "__clang__ is undefined before any file here")
  # Tests of the compiler's own features (__has_builtin, #elifdef) the build's compiler answers otherwise than
  # Clang: the build fails naming them. Under Clang both agree and it builds.
  builds_under_clang_else_fails_naming("${compiler_id}" guard_feature_test "the compiler's feature tests"
    "`__has_builtin\\(__builtin_assume\\)` in [^ ]*feature\\.cpp is not 1 here"
    "`#elifdef` in [^ ]*feature\\.cpp is no directive the build's compiler takes here")
  # A #pragma once header under a second name (a symbolic link): its copy is one file under both names.
  step("${CMAKE_COMMAND}" --build "${build}" --target guard_once_link)
  set(once_copies "")
  foreach(name IN ITEMS a b)
    execute_process(COMMAND stat -L -c "%d:%i" "${build}/build_guards/lmfuse_rewritten/guard_once_link/once/${name}/cfg.h"
                    OUTPUT_VARIABLE identity OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE status)
    if(NOT status EQUAL 0)
      message(FATAL_ERROR "guard_once_link: the mirror holds no once/${name}/cfg.h")
    endif()
    list(APPEND once_copies "${identity}")
  endforeach()
  list(REMOVE_DUPLICATES once_copies)
  list(LENGTH once_copies files)
  if(NOT files EQUAL 1)
    message(FATAL_ERROR "guard_once_link: the mirror's a/cfg.h and b/cfg.h are two files (${once_copies}), where "
                        "the sources' are one")
  endif()
  # A compiler launcher that adds a definition the model tests (CAPPED_BY_LAUNCHER): the build fails naming it.
  build_fails_naming(guard_launcher "the launcher's definition" "CAPPED_BY_LAUNCHER")
  # A precompiled model header: the tool finds its site (the header is the program's, however included),
  # and the units, which read the original through the precompiled headers, stop the build naming them.
  build_fails_naming(guard_pch "the precompiled headers"
                     "includes the original [^ ]*model\\.h, not its rewritten copy \\(through the target's precompiled headers")
  build_fails_naming(guard_pch_angle "the precompiled headers"
                     "starts with the target's precompiled headers \\([^)]*cmake_pch[^)]*\\)")
  # Unity build: the copy was parsed with its own command (-DNDEBUG), so the rebinding of h after the
  # head was seen and the fused call reads the head's input from a local made before it.
  step("${CMAKE_COMMAND}" --build "${build}" --target guard_unity)
  file(READ "${build}/build_guards/lmfuse_rewritten/guard_unity/unity_model.cpp" copy)
  if(NOT copy MATCHES "auto lmfuse_hidden = h;")
    message(FATAL_ERROR "guard_unity: the copy does not keep the head's input before the NDEBUG rebinding:\n${copy}")
  endif()
  # A wrapper header whose `#include_next` (from its copy) reaches its original: the build fails naming the
  # file read twice. With the wrapped header's folder under EDIT_ROOT too, its copy comes next: the program
  # builds and runs the wrapper once (it exits 1 otherwise).
  build_fails_naming(guard_include_next "the wrapper read twice"
                     "reads both [^ ]*/lmfuse_rewritten/guard_include_next/inc/cfg\\.h and its original [^ ]*/include_next/app/inc/cfg\\.h"
                     "#include_next")
  step("${CMAKE_COMMAND}" --build "${build}" --target guard_include_next_inside)
  # A copy of the library's header of the program's own, first on the include path: the build fails naming it.
  build_fails_naming(guard_library_shadow "the program's copy of lmfuse/torch.h"
                     "reads [^ ]*/shadow/lmfuse/torch\\.h as <lmfuse/torch\\.h>, which is not the library's header")
  run_program("${build}/build_guards/guard_include_next_inside")
  if(NOT STATUS EQUAL 0)
    message(FATAL_ERROR "guard_include_next_inside: the program did not run its wrapper once (exit ${STATUS}):\n${OUT}")
  endif()
  # A CUDA unit the call never saw that reads the model (cuda_unit/, a project of its own: it needs nvcc, not a
  # GPU, and stops before compiling any unit). With the -idirafter fallback on its command, nvcc would stop
  # on the flag instead.
  find_program(nvcc NAMES nvcc HINTS ENV CUDACXX PATHS /usr/local/cuda/bin NO_CACHE)
  if(nvcc)
    set(cuda_build "${WORK}/build_guards_cuda")
    file(REMOVE_RECURSE "${cuda_build}")
    step("${CMAKE_COMMAND}" -S "${USAGE}/build_guards/cuda_unit" -B "${cuda_build}" -G "${GENERATOR}"
         -DCMAKE_BUILD_TYPE=Release "-DCMAKE_PREFIX_PATH=${prefix}" "-DTorch_DIR=${TORCH_PREFIX}"
         "-DCMAKE_CUDA_COMPILER=${nvcc}")
    foreach(target IN ITEMS cuda_unseen cuda_late)
      build_fails(${target} "${cuda_build}")
      string(REGEX REPLACE "[ \t\r\n]+" " " flat "${OUT}")
      if(NOT flat MATCHES "did not see" OR NOT flat MATCHES "probe\\.cu \\(it reads [^)]*model\\.h\\)")
        message(FATAL_ERROR "${target}: the failed build does not name the CUDA unit probe.cu and the model it reads:\n${OUT}")
      endif()
    endforeach()
  else()
    message(STATUS "build_guards: no nvcc found, the CUDA unit's case (cuda_unit/) is not built")
  endif()

elseif(STEP STREQUAL "public_include")
  # A unit linked into one binary with the rewritten library compiles the original of its patched header:
  # the build fails naming the unit and the header. Linking without including, or including without
  # linking, builds.
  build_fails(usage_public_include_app)
  string(REGEX REPLACE "[ \t\r\n]+" " " flat "${OUT}")  # CMake wraps a message's lines
  if(NOT flat MATCHES "usage_public_include_app is linked into one binary with usage_public_include" OR
     NOT flat MATCHES "app\\.cpp includes the original [^ ]*public_model\\.h")
    message(FATAL_ERROR "public_include: the app's failed build does not name its unit and the header:\n${OUT}")
  endif()
  build_fails(usage_public_include_objects_app)
  string(REGEX REPLACE "[ \t\r\n]+" " " flat "${OUT}")
  if(NOT flat MATCHES "objects\\.cpp includes the original [^ ]*public_model\\.h")
    message(FATAL_ERROR "public_include: the build with the object library's unit does not name it:\n${OUT}")
  endif()
  build_fails(usage_public_include_capped)
  string(REGEX REPLACE "[ \t\r\n]+" " " flat "${OUT}")
  if(NOT flat MATCHES "their rewrites of a header differ" OR NOT flat MATCHES "public_model\\.h, which differs from")
    message(FATAL_ERROR "public_include: the capped app's build does not name the differing copies:\n${OUT}")
  endif()
  foreach(target IN ITEMS usage_public_include_other usage_public_include_plain)
    step("${CMAKE_COMMAND}" --build "${build}" --target ${target})
    run_program("${build}/public_include/${target}")
    if(NOT STATUS EQUAL 0)
      message(FATAL_ERROR "public_include: ${target} does not run (exit ${STATUS}):\n${OUT}")
    endif()
  endforeach()

elseif(STEP STREQUAL "stale_units")
  # A copy of the project (its header is edited): built once with the site suppressed, then, after the NOLINT
  # is removed, built once more: the generated unit outside EDIT_ROOT must recompile from the new copy.
  set(stale "${WORK}/stale_units")
  file(REMOVE_RECURSE "${stale}")
  file(COPY "${USAGE}/stale_units" DESTINATION "${stale}")
  set(tree "${stale}/stale_units")
  step("${CMAKE_COMMAND}" -S "${tree}" -B "${stale}/build" -G "${GENERATOR}" -DCMAKE_BUILD_TYPE=Release
       "-DCMAKE_PREFIX_PATH=${prefix}" "-DTorch_DIR=${TORCH_PREFIX}")
  step("${CMAKE_COMMAND}" --build "${stale}/build")
  run_program("${stale}/build/usage_stale_units")
  if(NOT STATUS EQUAL 0 OR NOT OUT MATCHES "main: original, generated: original")
    message(FATAL_ERROR "stale_units: with the site suppressed both units must run the original (exit ${STATUS}):\n${OUT}")
  endif()
  file(READ "${tree}/include/model.h" header)
  string(REPLACE "  // NOLINT(lmfuse)" "" header "${header}")
  file(WRITE "${tree}/include/model.h" "${header}")
  step("${CMAKE_COMMAND}" --build "${stale}/build")
  run_program("${stale}/build/usage_stale_units")
  if(NOT STATUS EQUAL 0 OR NOT OUT MATCHES "main: fused, generated: fused")
    message(FATAL_ERROR "stale_units: after the header edit and one build, both units must run fused (exit ${STATUS}):\n${OUT}")
  endif()
  message(STATUS "stale_units: ${OUT}")

elseif(STEP STREQUAL "already_patched")
  set(audit "${build}/already_patched/lmfuse_rewritten/usage_already_patched/audit.json")
  trains_fused(already_patched)
  audit_count("${audit}" already_patched already)
  if(NOT already EQUAL 1)
    message(FATAL_ERROR "already_patched: the audit has ${already} already-patched sites, expected 1")
  endif()
  # No site at all under EXPECT_PATCHED: the build fails and says where it looked.
  build_fails(usage_no_site)
  if(NOT OUT MATCHES "fewer than EXPECT_PATCHED 1" OR NOT OUT MATCHES "no loss site found in[ \n]+[^ \n]*no_site\\.cpp")
    message(FATAL_ERROR "usage_no_site: the failed build does not say that no loss site was found:\n${OUT}")
  endif()
  # A failed run leaves its own audit: the patched copy loses its site, the step fails, and the audit no
  # longer shows the previous run's already-patched site.
  file(COPY_FILE "${USAGE}/already_patched/no_site.cpp" "${build}/already_patched/patched/main.cpp")
  build_fails(usage_already_patched)
  if(EXISTS "${audit}")
    audit_count("${audit}" already_patched already)
    if(NOT already EQUAL 0)
      message(FATAL_ERROR "already_patched: after a failed run the audit still shows the previous run's site")
    endif()
  endif()

elseif(STEP STREQUAL "runtime_only")
  set(runtime_build "${WORK}/runtime_only")
  file(REMOVE_RECURSE "${runtime_build}")
  step("${CMAKE_COMMAND}" -S "${USAGE}/runtime_only" -B "${runtime_build}" -G "${GENERATOR}"
       -DCMAKE_BUILD_TYPE=Release "-DCMAKE_PREFIX_PATH=${prefix}"
       -DCMAKE_DISABLE_FIND_PACKAGE_Torch=ON -DCMAKE_DISABLE_FIND_PACKAGE_CUDAToolkit=ON)
  step("${CMAKE_COMMAND}" --build "${runtime_build}")
  run_program("${runtime_build}/usage_runtime_only")
  if(NOT STATUS EQUAL 0)
    message(FATAL_ERROR "runtime_only: the fused loss differs from the fp64 one (exit ${STATUS}):\n${OUT}")
  endif()
  find_program(READELF readelf REQUIRED)
  execute_process(COMMAND "${READELF}" -d "${runtime_build}/usage_runtime_only" OUTPUT_VARIABLE dynamic)
  if(dynamic MATCHES "NEEDED[^\n]*(cuda|cublas|torch|c10)")
    message(FATAL_ERROR "runtime_only: the CPU-only program links CUDA or LibTorch libraries:\n${dynamic}")
  endif()
  message(STATUS "runtime_only: ${OUT}")

else()
  message(FATAL_ERROR "usage_test.cmake: unknown STEP '${STEP}'")
endif()
