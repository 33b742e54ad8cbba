# lmfuse_rewrite(TARGET <target> SOURCES <file>... [AUDIT <path>] [EXPECT_PATCHED <n>] [PATTERNS <file>])
#
# Compiles the lmfuse-rewritten copies of SOURCES into <target> instead of the originals:
# - at build time the lmfuse tool runs over SOURCES with the target's own include directories, compile
#   definitions, compile options and C++ standard, and writes the rewritten copies (with #line
#   directives, so diagnostics point at the originals) under
#   ${CMAKE_CURRENT_BINARY_DIR}/lmfuse_rewritten/<target>/; the originals are never touched;
# - it reruns only when a source, a header they include (depfile, Ninja and Makefiles), the pattern
#   set, the tool or the target's flags change;
# - the build fails, naming every site that was not patched and why, when fewer than EXPECT_PATCHED
#   sites are patched (the tool's --expect-patched, exit code 3);
# - the audit JSON goes to AUDIT (default: lmfuse_rewritten/<target>/audit.json);
# - <target> links lmfuse::torch and finds the quote-includes of its originals (-iquote <their folder>).
#
# Where the tool cannot run (a machine without Clang), set LMFUSE_REWRITTEN_DIR to a folder holding
# copies rewritten elsewhere, laid out as <dir>/<target>/<source path relative to the calling
# CMakeLists' folder> plus <dir>/<target>/audit.json (e.g. a copy of lmfuse_rewritten/ from a build
# that ran the tool); they are used as they are, and a missing copy is a configure error.
include_guard(GLOBAL)

set(LMFUSE_REWRITTEN_DIR "" CACHE PATH
    "Folder of sources rewritten elsewhere (<dir>/<target>/<relative path>), used instead of running the lmfuse tool")
set(_LMFUSE_REWRITE_STEP "${CMAKE_CURRENT_LIST_DIR}/LmfuseRewriteStep.cmake" CACHE INTERNAL "")

# The tool and the pattern set: the in-tree targets, or what lmfuse-config.cmake found.
function(_lmfuse_rewrite_tool out_tool out_patterns)
  if(TARGET lmfuse::lmfuse)
    set(tool "$<TARGET_FILE:lmfuse::lmfuse>")
  elseif(TARGET lmfuse)
    set(tool "$<TARGET_FILE:lmfuse>")
  elseif(LMFUSE_EXECUTABLE)
    set(tool "${LMFUSE_EXECUTABLE}")
  else()
    set(tool "")
  endif()
  set(${out_tool} "${tool}" PARENT_SCOPE)
  set(${out_patterns} "${LMFUSE_PATTERNS}" PARENT_SCOPE)
endfunction()

function(lmfuse_rewrite)
  cmake_parse_arguments(PARSE_ARGV 0 ARG "" "TARGET;AUDIT;EXPECT_PATCHED;PATTERNS" "SOURCES")
  if(ARG_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "lmfuse_rewrite: unexpected arguments: ${ARG_UNPARSED_ARGUMENTS}")
  endif()
  if(NOT ARG_TARGET OR NOT TARGET "${ARG_TARGET}")
    message(FATAL_ERROR "lmfuse_rewrite: TARGET '${ARG_TARGET}' is not a target defined before this call")
  endif()
  if(NOT ARG_SOURCES)
    message(FATAL_ERROR "lmfuse_rewrite(TARGET ${ARG_TARGET}): no SOURCES given")
  endif()
  if(DEFINED ARG_EXPECT_PATCHED AND NOT ARG_EXPECT_PATCHED MATCHES "^[0-9]+$")
    message(FATAL_ERROR "lmfuse_rewrite(TARGET ${ARG_TARGET}): EXPECT_PATCHED must be a count, got '${ARG_EXPECT_PATCHED}'")
  endif()
  set(target "${ARG_TARGET}")
  set(out_dir "${CMAKE_CURRENT_BINARY_DIR}/lmfuse_rewritten/${target}")
  set(audit "${ARG_AUDIT}")
  if(NOT audit)
    set(audit "${out_dir}/audit.json")
  endif()
  get_filename_component(audit "${audit}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_BINARY_DIR}")

  # Originals (absolute) and the copies that replace them.
  set(originals "")
  set(copies "")
  set(quote_dirs "")
  foreach(source IN LISTS ARG_SOURCES)
    get_filename_component(original "${source}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
    if(NOT EXISTS "${original}")
      message(FATAL_ERROR "lmfuse_rewrite(TARGET ${target}): source '${source}' does not exist (${original})")
    endif()
    file(RELATIVE_PATH relative "${CMAKE_CURRENT_SOURCE_DIR}" "${original}")
    if(relative MATCHES "^\\.\\./")
      message(FATAL_ERROR "lmfuse_rewrite(TARGET ${target}): source '${source}' is outside ${CMAKE_CURRENT_SOURCE_DIR}")
    endif()
    get_filename_component(folder "${original}" DIRECTORY)
    list(APPEND originals "${original}")
    list(APPEND copies "${out_dir}/${relative}")
    list(APPEND quote_dirs "${folder}")
  endforeach()
  list(REMOVE_DUPLICATES quote_dirs)

  _lmfuse_rewrite_tool(tool patterns)
  if(ARG_PATTERNS)
    get_filename_component(patterns "${ARG_PATTERNS}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
  endif()

  if(LMFUSE_REWRITTEN_DIR)
    # Copies rewritten elsewhere: checked now, copied into the build tree when they change.
    set(carried "")
    foreach(original copy IN ZIP_LISTS originals copies)
      file(RELATIVE_PATH relative "${out_dir}" "${copy}")
      set(from "${LMFUSE_REWRITTEN_DIR}/${target}/${relative}")
      if(NOT EXISTS "${from}")
        message(FATAL_ERROR "lmfuse_rewrite(TARGET ${target}): LMFUSE_REWRITTEN_DIR has no rewritten copy of "
                            "${relative} (looked for ${from})")
      endif()
      list(APPEND carried "${from}")
    endforeach()
    file(GLOB_RECURSE carried LIST_DIRECTORIES false "${LMFUSE_REWRITTEN_DIR}/${target}/*")
    set(carried_audit "${LMFUSE_REWRITTEN_DIR}/${target}/audit.json")
    set(audit_arguments "")
    if(EXISTS "${carried_audit}")
      set(audit_arguments "-DCARRIED_AUDIT=${carried_audit}")
    endif()
    add_custom_command(
      OUTPUT ${copies} "${audit}"
      COMMAND "${CMAKE_COMMAND}" "-DMODE=carried" "-DTARGET=${target}" "-DFROM_DIR=${LMFUSE_REWRITTEN_DIR}/${target}"
              "-DOUT_DIR=${out_dir}" "-DCOPIES=${copies}"
              "-DAUDIT=${audit}" ${audit_arguments} "-DEXPECT_PATCHED=${ARG_EXPECT_PATCHED}"
              -P "${_LMFUSE_REWRITE_STEP}"
      DEPENDS ${carried} ${originals} "${_LMFUSE_REWRITE_STEP}"
      COMMENT "lmfuse: using the rewritten sources of ${target} from ${LMFUSE_REWRITTEN_DIR}"
      VERBATIM)
  else()
    if(NOT tool)
      message(FATAL_ERROR "lmfuse_rewrite(TARGET ${target}): the lmfuse tool is not available (this build has "
                          "no Clang rewriter: LMFUSE_TOOL=OFF or Clang 19 not found). Build it, point "
                          "LMFUSE_EXECUTABLE at one, or set LMFUSE_REWRITTEN_DIR to sources rewritten elsewhere.")
    endif()
    if(NOT patterns OR NOT EXISTS "${patterns}")
      message(FATAL_ERROR "lmfuse_rewrite(TARGET ${target}): pattern set '${patterns}' not found (LMFUSE_PATTERNS)")
    endif()
    # The tool gets the target's own flags: from compile_commands.json (the command of the first copy),
    # else from this file, evaluated at generate time (transitively over what it links), one per line.
    set(includes "$<TARGET_PROPERTY:${target},INCLUDE_DIRECTORIES>")
    set(definitions "$<TARGET_PROPERTY:${target},COMPILE_DEFINITIONS>")
    set(options "$<TARGET_PROPERTY:${target},COMPILE_OPTIONS>")
    set(standard "$<TARGET_PROPERTY:${target},CXX_STANDARD>")
    set(flags_file "${out_dir}/flags-$<CONFIG>.txt")
    string(REPLACE " " ";" global_flags "${CMAKE_CXX_FLAGS}")
    list(FILTER global_flags EXCLUDE REGEX "^$")
    file(GENERATE OUTPUT "${flags_file}" CONTENT
"-std=c++$<IF:$<BOOL:${standard}>,${standard},17>
$<$<BOOL:${includes}>:-I$<JOIN:${includes},
-I>>
$<$<BOOL:${definitions}>:-D$<JOIN:${definitions},
-D>>
$<JOIN:${options},
>
$<JOIN:${global_flags},
>
")
    set(depfile_arguments "")
    set(depfile "${out_dir}/rewrite.d")
    if(CMAKE_GENERATOR MATCHES "Ninja|Makefiles")
      set(depfile_arguments DEPFILE "${depfile}")
    endif()
    add_custom_command(
      OUTPUT ${copies} "${audit}"
      COMMAND "${CMAKE_COMMAND}" "-DMODE=tool" "-DTARGET=${target}" "-DTOOL=${tool}" "-DPATTERNS=${patterns}"
              "-DCOMPILE_COMMANDS=${CMAKE_BINARY_DIR}/compile_commands.json"
              "-DFLAGS_FILE=${flags_file}" "-DSOURCES=${originals}" "-DCOPIES=${copies}"
              "-DSOURCE_ROOT=${CMAKE_CURRENT_SOURCE_DIR}" "-DOUT_DIR=${out_dir}" "-DAUDIT=${audit}"
              "-DEXPECT_PATCHED=${ARG_EXPECT_PATCHED}" "-DCXX=${CMAKE_CXX_COMPILER}" "-DDEPFILE=${depfile}"
              -P "${_LMFUSE_REWRITE_STEP}"
      DEPENDS ${originals} "${patterns}" "${flags_file}" "${_LMFUSE_REWRITE_STEP}" $<$<TARGET_EXISTS:lmfuse>:lmfuse>
      ${depfile_arguments}
      COMMENT "lmfuse: rewriting the sources of ${target}"
      VERBATIM)
  endif()

  # The copies replace the originals in the target.
  get_target_property(sources "${target}" SOURCES)
  get_target_property(target_source_dir "${target}" SOURCE_DIR)
  set(kept "")
  foreach(source IN LISTS sources)
    get_filename_component(absolute "${source}" ABSOLUTE BASE_DIR "${target_source_dir}")
    if(NOT absolute IN_LIST originals)
      list(APPEND kept "${source}")
    endif()
  endforeach()
  set_property(TARGET "${target}" PROPERTY SOURCES ${kept} ${copies})
  foreach(folder IN LISTS quote_dirs)
    target_compile_options("${target}" PRIVATE "SHELL:-iquote \"${folder}\"")
  endforeach()
  target_link_libraries("${target}" PRIVATE lmfuse::torch)
  set_property(TARGET "${target}" PROPERTY EXPORT_COMPILE_COMMANDS ON)
  set_property(TARGET "${target}" APPEND PROPERTY LMFUSE_AUDIT "${audit}")
endfunction()
