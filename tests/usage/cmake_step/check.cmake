# The checks of the CMake integration (cmake -P; the target usage_cmake_step runs it): builds project/
# against a copy of the installed lmfuse (WORK/prefix: the check replaces its executable) under each
# single-configuration generator found, and requires what lmfuse_rewrite promises (see CMakeLists.txt).
#   -DPREFIX=<installed lmfuse> -DPROJECT=<project/> -DSTUBS=<stub LibTorch headers> -DWORK=<scratch>
#   -DCXX=<compiler> -DTorch_DIR=<LibTorch's CMake folder>
cmake_minimum_required(VERSION 3.22)
set(prefix "${WORK}/prefix")
set(tree "${WORK}/pröject")  # a path with a non-ASCII character
file(REMOVE_RECURSE "${WORK}")
file(COPY "${PREFIX}/" DESTINATION "${prefix}" USE_SOURCE_PERMISSIONS)
file(COPY "${PROJECT}/" DESTINATION "${tree}")
set(tool "${prefix}/bin/lmfuse")
file(RENAME "${tool}" "${tool}.real")

# The lmfuse the package names: the real one, or one that also logs its runs (an upgrade in place). It
# lifts the file-size limit a check may put on the build: the tool's own writes are not what is tested.
function(install_tool log)
  set(logging "")
  if(log)
    set(logging "echo \"run: $*\" >> \"${log}\"\n")
  endif()
  file(WRITE "${tool}.new" "#!/bin/bash\nulimit -S -f unlimited\n${logging}exec \"${tool}.real\" \"$@\"\n")
  file(CHMOD "${tool}.new" PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ GROUP_EXECUTE
                                       WORLD_READ WORLD_EXECUTE)
  file(RENAME "${tool}.new" "${tool}")
endfunction()
install_tool("")

function(step)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE status OUTPUT_VARIABLE output ERROR_VARIABLE output)
  if(NOT status EQUAL 0)
    message(FATAL_ERROR "failed (${status}): ${ARGN}\n${output}")
  endif()
  set(OUT "${output}" PARENT_SCOPE)
endfunction()

function(configure build generator)
  execute_process(COMMAND "${CMAKE_COMMAND}" -S "${tree}" -B "${build}" -G "${generator}"
                          -DCMAKE_BUILD_TYPE=Release "-DCMAKE_PREFIX_PATH=${prefix}" "-DTorch_DIR=${Torch_DIR}"
                          "-DCMAKE_CXX_COMPILER=${CXX}" "-DSTUBS=${STUBS}" ${ARGN}
                  RESULT_VARIABLE status OUTPUT_VARIABLE output ERROR_VARIABLE output)
  set(OUT "${output}" PARENT_SCOPE)
  set(STATUS "${status}" PARENT_SCOPE)
endfunction()

# Configures project/ with -DVARIANT=<variant> in WORK/build-<variant> (Ninja), which BUILD names; a failed
# configure stops the check.
function(configure_variant variant)
  set(build "${WORK}/build-${variant}")
  configure("${build}" Ninja -DVARIANT=${variant})
  if(NOT STATUS EQUAL 0)
    message(FATAL_ERROR "VARIANT ${variant}: configuring failed:\n${OUT}")
  endif()
  set(BUILD "${build}" PARENT_SCOPE)
endfunction()

# Builds <target> in <build>, which may fail: STATUS, OUT, and FLAT (OUT with its runs of white space as one
# space, as CMake wraps a message's lines).
function(build_target build target)
  execute_process(COMMAND "${CMAKE_COMMAND}" --build "${build}" --target ${target} RESULT_VARIABLE status
                  OUTPUT_VARIABLE output ERROR_VARIABLE output)
  string(REGEX REPLACE "[ \t\r\n]+" " " flat "${output}")
  set(STATUS "${status}" PARENT_SCOPE)
  set(OUT "${output}" PARENT_SCOPE)
  set(FLAT "${flat}" PARENT_SCOPE)
endfunction()

# The audit at <path> is a whole lmfuse audit with one patched site; <what> says when.
function(audit_whole path what)
  file(READ "${path}" text)
  string(JSON schema ERROR_VARIABLE broken GET "${text}" schema)
  string(JSON patched ERROR_VARIABLE no_count GET "${text}" summary patched)
  if(broken OR no_count OR NOT schema MATCHES "^lmfuse-audit/" OR NOT patched EQUAL 1)
    message(FATAL_ERROR "${what}: ${path} is not a whole lmfuse audit with one patched site (${broken}${no_count})")
  endif()
endfunction()

# The program runs the head common/head_type.h defines (a Linear: HEAD), as the original and the tool's
# parse do, then the fused call; never third/'s capped head. app_upper (an upper-case extension) too.
function(runs_fused build what)
  foreach(program IN ITEMS app app_upper)
    execute_process(COMMAND "${build}/${program}" RESULT_VARIABLE status OUTPUT_VARIABLE output ERROR_VARIABLE output)
    string(REGEX REPLACE "[\r\n]+" " " output "${output}")
    if(NOT status EQUAL 0 OR NOT output STREQUAL "HEAD FUSED ")
      message(FATAL_ERROR "${what}: the rewritten ${program} prints '${output}' (exit ${status}), not 'HEAD FUSED': "
                          "its copy does not read the headers the original and the tool read")
    endif()
  endforeach()
endfunction()

set(generators Ninja)
find_program(MAKE_PROGRAM NAMES gmake make)
if(MAKE_PROGRAM)
  list(APPEND generators "Unix Makefiles")
endif()
set(first ON)
foreach(generator IN LISTS generators)
  string(MAKE_C_IDENTIFIER "${generator}" name)
  set(build "${WORK}/build-${name}")
  set(audit "${build}/audit/app.json")
  configure("${build}" "${generator}")
  if(NOT STATUS EQUAL 0)
    message(FATAL_ERROR "${generator}: configuring failed:\n${OUT}")
  endif()
  # The whole build: the step, the check of stubimpl (linked with the rewritten app), the copies.
  step("${CMAKE_COMMAND}" --build "${build}")
  runs_fused("${build}" "${generator}")
  audit_whole("${audit}" "${generator}")
  step("${CMAKE_COMMAND}" --build "${build}")  # and again, with nothing to do

  # A step killed with the build once it has placed a copy: the model now names a macro the tool's parse
  # defines and the build's compiler does not (GCC's: __clang__), which the step's unit checks refuse after
  # the copy is in place; the build is killed as soon as the copy is there. The next build runs the step again
  # and stops as the step does: no build compiles a copy that no finished step checked. (A Makefile's rule is
  # that of the command's first output; where the kill comes after the step failed on its own, the next
  # build runs it again too.)
  execute_process(COMMAND "${CXX}" -dM -E -x c++ /dev/null OUTPUT_VARIABLE predefined ERROR_QUIET)
  if(generator STREQUAL "Unix Makefiles" AND NOT predefined MATCHES "__clang__")
    file(READ "${tree}/model/model.cpp" model)
    file(APPEND "${tree}/model/model.cpp" "#ifdef __clang__\n#endif\n")
    set(copy "${build}/lmfuse_rewritten/app/model.cpp")
    file(STRINGS "${build}/CMakeCache.txt" make_program REGEX "^CMAKE_MAKE_PROGRAM:")
    string(REGEX REPLACE "^[^=]*=" "" make_program "${make_program}")
    execute_process(COMMAND bash -c [=[
setsid "$1" -C "$2" > "$2/killed.log" 2>&1 & build=$!
for i in $(seq 1 4800); do grep -q __clang__ "$3" 2>/dev/null && break; kill -0 $build 2>/dev/null || break; sleep 0.025; done
kill -9 -- -$build 2>/dev/null; wait $build 2>/dev/null; exit 0]=] bash "${make_program}" "${build}" "${copy}")
    build_target("${build}" all)
    if(STATUS EQUAL 0 OR NOT FLAT MATCHES "was not analysed with")
      message(FATAL_ERROR "${generator}: a build killed while the step ran (its copy ${copy} placed), built again, "
                          "must run the step again and stop as the step does (exit ${STATUS}):\n${OUT}")
    endif()
    file(WRITE "${tree}/model/model.cpp" "${model}")
    step("${CMAKE_COMMAND}" --build "${build}")
    runs_fused("${build}" "${generator} (after a killed build)")
  endif()

  # An upgrade of the installed tool reruns the rewrite.
  set(log "${WORK}/tool-${name}.log")
  install_tool("${log}")
  step("${CMAKE_COMMAND}" --build "${build}")
  if(NOT EXISTS "${log}")
    message(FATAL_ERROR "${generator}: replacing ${tool} did not rerun the rewrite")
  endif()
  install_tool("")
  runs_fused("${build}" "${generator} (after the tool changed)")

  if(first)
    set(first OFF)
    # A write of the step cut short (here a file-size limit below the new audit's size, SIGXFSZ ignored so
    # the write fails, as on a full disk, rather than the process): the build fails naming the audit, the previous audit is left
    # whole, and once the limit is gone the next build runs the step again and succeeds. Refused sites make
    # the new audit large; the copies and everything else the step writes stay below the limit.
    file(SIZE "${audit}" before)
    set(many "")
    foreach(i RANGE 1 150)
      string(APPEND many "inline torch::Tensor r${i}(torch::nn::Linear&a,const torch::Tensor&b,c10::optional<"
                         "torch::Tensor>c){torch::Tensor l;auto g=a(b);g=g*0.5;if(c.has_value()){l=torch::nn::"
                         "functional::cross_entropy(g.view({-1,g.size(-1)}),c->view(-1));}return l;}\n")
    endforeach()
    file(WRITE "${tree}/model/many.h" "${many}")
    string(LENGTH "${many}" copy_size)
    math(EXPR limit "${copy_size} / 1024 + 12")  # in KiB: above the copy, below the audit
    # The build tool itself, not `cmake --build`, which would give its children SIGXFSZ's default back.
    file(STRINGS "${build}/CMakeCache.txt" make_program REGEX "^CMAKE_MAKE_PROGRAM:")
    string(REGEX REPLACE "^[^=]*=" "" make_program "${make_program}")
    execute_process(COMMAND bash -c "trap '' XFSZ; ulimit -S -f ${limit}; exec \"$0\" -C \"$1\" app_lmfuse_step"
                            "${make_program}" "${build}"
                    RESULT_VARIABLE status OUTPUT_VARIABLE output ERROR_VARIABLE output)
    string(REGEX REPLACE "[ \t\r\n]+" " " flat "${output}")
    if(status EQUAL 0)
      message(FATAL_ERROR "the step's audit (${limit} KiB allowed) was written whole: the check cannot tell; "
                          "make the refused sites more:\n${output}")
    endif()
    audit_whole("${audit}" "after a write cut short")
    file(SIZE "${audit}" after)
    if(NOT after EQUAL before)
      message(FATAL_ERROR "after a write cut short, ${audit} is not the previous audit (${before} bytes, now ${after})")
    endif()
    string(FIND "${flat}" "cannot write ${audit}" named)
    if(named EQUAL -1)
      message(FATAL_ERROR "a write cut short does not fail the build naming ${audit}:\n${output}")
    endif()
    file(WRITE "${tree}/model/many.h" "")
    step("${CMAKE_COMMAND}" --build "${build}")
    runs_fused("${build}" "after a write cut short")
    audit_whole("${audit}" "after a write cut short, the next build")
  endif()
endforeach()

# A header the build generates, made by a target app depends on (declared after the call), caps the logits:
# the step waits for it and reads it as the compile of the copy does, so the site is refused and the program
# runs the original's capped loss, as the project without lmfuse does.
configure_variant(generated)
step("${CMAKE_COMMAND}" --build "${BUILD}" --target app)
execute_process(COMMAND "${BUILD}/app" RESULT_VARIABLE status OUTPUT_VARIABLE output ERROR_VARIABLE output)
string(REGEX REPLACE "[\r\n]+" " " output "${output}")
file(READ "${BUILD}/audit/app.json" text)
string(JSON reason ERROR_VARIABLE no_site GET "${text}" sites 0 reason)
if(NOT status EQUAL 0 OR NOT output STREQUAL "HEAD TANH ORIGINAL " OR NOT reason STREQUAL "logits-softcapped")
  message(FATAL_ERROR "a generated header that caps the logits: the program prints '${output}' (exit ${status}), "
                      "not 'HEAD TANH ORIGINAL', and the site's reason is '${reason}${no_site}', not "
                      "logits-softcapped: the rewrite did not read the header the compile read")
endif()

# A step that stops the build (the tool parsed without the CAPPED the build defines) leaves an audit that
# records no site as patched: no rewritten code is compiled.
configure_variant(refused)
build_target("${BUILD}" app)
file(READ "${BUILD}/audit/app.json" text)
string(JSON status_0 ERROR_VARIABLE no_site GET "${text}" sites 0 status)
string(JSON reason_0 ERROR_VARIABLE no_site GET "${text}" sites 0 reason)
string(JSON patched ERROR_VARIABLE no_count GET "${text}" summary patched)
if(STATUS EQUAL 0 OR NOT status_0 STREQUAL "failed" OR NOT reason_0 STREQUAL "build-refused" OR NOT patched EQUAL 0)
  message(FATAL_ERROR "a build the step stopped (exit ${STATUS}) left an audit whose site is '${status_0}' "
                      "'${reason_0}' with ${patched} patched${no_site}${no_count}, not failed build-refused:\n${OUT}")
endif()

# The same, with the capping flag after one holding an unbalanced '[': the step fails naming the flag it
# cannot read as the build does, rather than check a command without the flags after it.
configure_variant(bracket)
build_target("${BUILD}" app)
if(STATUS EQUAL 0 OR NOT FLAT MATCHES "holds a '\\[' or '\\]' that joins its words")
  message(FATAL_ERROR "a flag holding '[' before the flag that caps the logits: the build (exit ${STATUS}) must "
                      "fail naming the bracket:\n${OUT}")
endif()

# A GCC flag the tool's parse drops (Clang does not know it) that changes how GCC reads the program: the step
# stops the build naming it, since the rewrite was analysed in another language. (Only GCC takes the flag.)
execute_process(COMMAND "${CXX}" -dM -E -x c++ /dev/null OUTPUT_VARIABLE predefined ERROR_QUIET)
if(predefined MATCHES "__GNUC__" AND NOT predefined MATCHES "__clang__")
  configure_variant(language_flag)
  build_target("${BUILD}" app)
  if(STATUS EQUAL 0 OR NOT FLAT MATCHES "dropped flags of this build that Clang does not know" OR
     NOT FLAT MATCHES "model\\.cpp: -fno-ext-numeric-literals")
    message(FATAL_ERROR "a GCC flag that changes the language, dropped by the tool's parse: the build (exit "
                        "${STATUS}) must fail naming it:\n${OUT}")
  endif()
  # GCC and Clang reading one program otherwise with no macro, header or flag between them (model.cpp: what is
  # chosen from the length of __PRETTY_FUNCTION__): the copy's check of what its site was decided on fails the
  # compile of the rewritten unit, at the site, rather than build a fused call that computes another loss. Each
  # variant names what the check must name: the head's class, the reduction's type, the shift's dim, the base
  # class the head's forward is found in, the options' class.
  foreach(case IN ITEMS "compiler_type|Doubled" "compiler_reduction|kSum" "compiler_shift|Holds<false>"
                        "compiler_base|TanhImpl" "compiler_options|PaddedOptions")
    string(REPLACE "|" ";" case "${case}")
    list(GET case 0 variant)
    list(GET case 1 named)
    configure_variant(${variant})
    build_target("${BUILD}" app)
    if(STATUS EQUAL 0 OR NOT FLAT MATCHES "lmfuse: this compiler reads an expression of a rewritten site otherwise" OR
       NOT FLAT MATCHES "${named}")
      message(FATAL_ERROR "${variant}: a site GCC reads otherwise than the tool's Clang: the build (exit ${STATUS}) "
                          "must fail at the site's check of what it was decided on, naming ${named}:\n${OUT}")
    endif()
  endforeach()
endif()

# A rewritten library whose site is defined in its header, linked by programs that compile the original
# header: linked through a generator expression, by the library's file or by a link option, each still gets the check of the
# targets sharing a binary with a rewritten one, whose failure names the unit and the link item. A program
# linking it so without including the header builds.
configure_variant(link_forms)
foreach(form IN ITEMS genex file path flag genex_path option link_flags)
  build_target("${BUILD}" via_${form})
  if(STATUS EQUAL 0 OR NOT FLAT MATCHES "via_${form} is linked into one binary with headlib \\(via_${form} links `[^`]+`, which may name headlib" OR
     NOT FLAT MATCHES "uses\\.cpp includes the original [^ ]*head_model\\.h")
    message(FATAL_ERROR "via_${form} compiles the original of headlib's patched header and links headlib: its build "
                        "(exit ${STATUS}) must fail naming the link item and the unit:\n${OUT}")
  endif()
endforeach()
step("${CMAKE_COMMAND}" --build "${BUILD}" --target via_other)
# A rewritten program linking headlib, both called in one folder (configuring found no dependency cycle): it
# builds, its copy of the header the same as headlib's.
step("${CMAKE_COMMAND}" --build "${BUILD}" --target via_rewritten)
# Programs that share a binary with headlib other than by linking it themselves, each as program|the target
# compiling uses.cpp: linked through another target (an imported one, which compiles nothing but links
# headlib, and one whose INTERFACE_LINK_LIBRARIES_DIRECT CMake links into its consumers), uses.cpp's objects
# in a program linking headlib (handed over by an INTERFACE library, or named through an expression), and a
# link made by a call deferred after lmfuse_rewrite's own. The check of the targets sharing a binary runs for
# each and names uses.cpp.
set(shared_binaries "via_imported|via_imported" "via_objects_iface|uses_obj_iface"
                    "via_objects_nested|uses_obj_nested" "via_deferred|via_deferred")
if(CMAKE_VERSION VERSION_GREATER_EQUAL 3.24)
  list(APPEND shared_binaries "via_direct|via_direct")
endif()
foreach(form IN LISTS shared_binaries)
  string(REPLACE "|" ";" form "${form}")
  list(GET form 0 program)
  list(GET form 1 member)
  build_target("${BUILD}" ${program})
  if(STATUS EQUAL 0 OR NOT FLAT MATCHES "${member} is linked into one binary with headlib" OR
     NOT FLAT MATCHES "uses\\.cpp includes the original [^ ]*head_model\\.h")
    message(FATAL_ERROR "${program} compiles the original of headlib's patched header (in ${member}) beside "
                        "headlib: its build (exit ${STATUS}) must fail naming the unit:\n${OUT}")
  endif()
endforeach()

# A unit under EDIT_ROOT added after the call: the build fails naming it, also where CMake compiles it inside a
# unity source, where its extension is an upper-case C++ one, or where a .c source is compiled as C++.
foreach(case IN ITEMS "unity_late|late\\.cpp" "late_upper|late_upper\\.CPP" "late_c_as_cxx|late_c\\.c")
  string(REPLACE "|" ";" case "${case}")
  list(GET case 0 variant)
  list(GET case 1 unit)
  configure_variant(${variant})
  build_target("${BUILD}" app)
  if(STATUS EQUAL 0 OR NOT FLAT MATCHES "did not see" OR NOT FLAT MATCHES "${unit} \\(it lies under EDIT_ROOT\\)")
    message(FATAL_ERROR "VARIANT ${variant}: a unit under EDIT_ROOT added after the call; the build (exit ${STATUS}) "
                        "must fail naming it:\n${OUT}")
  endif()
endforeach()

# A source saved while the step runs, after the tool read it: that build fails naming it (or succeeds), and the
# next build runs the step again, under each generator. The tool here saves model.cpp once after its
# rewriting run (a save-once file says it is still to do).
foreach(generator IN LISTS generators)
  string(MAKE_C_IDENTIFIER "${generator}" name)
  set(build "${WORK}/build-saved-${name}")
  set(log "${WORK}/saved-${name}.log")
  file(WRITE "${tool}.new" "#!/bin/bash\necho \"run: $*\" >> \"${log}\"\n\"${tool}.real\" \"$@\"\nstatus=$?\n"
                           "if [[ \"$*\" == *--out-dir* && -e \"${WORK}/save-once\" ]]; then rm \"${WORK}/save-once\"; "
                           "echo '// saved during the build' >> \"${tree}/model/model.cpp\"; fi\nexit $status\n")
  file(CHMOD "${tool}.new" PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE)
  file(RENAME "${tool}.new" "${tool}")
  file(READ "${tree}/model/model.cpp" unsaved)
  configure("${build}" "${generator}")
  if(NOT STATUS EQUAL 0)
    message(FATAL_ERROR "${generator}: configuring for the save during the step failed:\n${OUT}")
  endif()
  file(WRITE "${WORK}/save-once" "")
  build_target("${build}" app)
  # (The step names the save; or, where another target's rewrite run was still reading model.cpp when the save
  # landed, that run's tool refuses to write it and names it.)
  if(NOT STATUS EQUAL 0 AND NOT FLAT MATCHES "files changed while the rewrite step ran, after the lmfuse tool read them.* [^ ]*/model/model\\.cpp Build again"
     AND NOT FLAT MATCHES "/model/model\\.cpp changed on disk while lmfuse")
    message(FATAL_ERROR "${generator}: a build during which model.cpp was saved failed (exit ${STATUS}) without "
                        "naming the save:\n${OUT}")
  endif()
  file(REMOVE "${log}")
  step("${CMAKE_COMMAND}" --build "${build}" --target app)
  set(runs "")
  if(EXISTS "${log}")
    file(STRINGS "${log}" runs REGEX "^run:.*--out-dir")
  endif()
  file(WRITE "${tree}/model/model.cpp" "${unsaved}")
  if(EXISTS "${WORK}/save-once" OR NOT runs)
    message(FATAL_ERROR "${generator}: model.cpp was saved while the rewrite step ran, and the next build did not "
                        "run the step again: the copy compiled is of the contents before the save")
  endif()
endforeach()
install_tool("")

# What the call read, changed after it, or a call that cannot be right: configuring stops, naming it.
foreach(case IN ITEMS
        "late_property|the source property COMPILE_DEFINITIONS of [^ ]*model\\.cpp was set after the call"
        "deferred_property|the source property COMPILE_DEFINITIONS of [^ ]*model\\.cpp was set after the call"
        "shared_audit|AUDIT [^ ]*app\\.json is also the audit of lmfuse_rewrite\\(TARGET app\\)"
        "late_include|the include folder [^ ]*/model was added to the target \\(or to a library it links\\) after the call"
        "database_off|EXPORT_COMPILE_COMMANDS was turned off after the call"
        "twice|is called a second time for this target"
        "alias|TARGET app_alias is an alias of app: name app itself"
        "imported|TARGET prebuilt is an imported target, which this project does not compile"
        "audit_on_source|AUDIT [^ ]*model\\.cpp is a file that is not an lmfuse audit")
  string(REPLACE "|" ";" case "${case}")
  list(GET case 0 variant)
  list(GET case 1 expected)
  configure("${WORK}/build-${variant}" Ninja -DVARIANT=${variant})
  string(REGEX REPLACE "[ \t\r\n]+" " " flat "${OUT}")
  if(STATUS EQUAL 0 OR NOT flat MATCHES "${expected}")
    message(FATAL_ERROR "VARIANT ${variant}: configuring must fail saying '${expected}' (exit ${STATUS}):\n${OUT}")
  endif()
endforeach()
if(NOT EXISTS "${tree}/model/model.cpp")
  message(FATAL_ERROR "an AUDIT naming a source: the source is gone")
endif()

# A multi-configuration generator is refused when configuring, naming it and what to use instead.
configure("${WORK}/build-multi" "Ninja Multi-Config")
string(REGEX REPLACE "[ \t\r\n]+" " " flat "${OUT}")
if(STATUS EQUAL 0 OR NOT flat MATCHES "the generator \"Ninja Multi-Config\" builds several configurations" OR
   NOT flat MATCHES "single-configuration generator")
  message(FATAL_ERROR "Ninja Multi-Config: configuring must fail naming the generator (exit ${STATUS}):\n${OUT}")
endif()
message(STATUS "cmake_step: all checks passed under ${generators}, refused Ninja Multi-Config and the changes after the call")
