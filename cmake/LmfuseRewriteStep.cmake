# The build step behind lmfuse_rewrite() (cmake -P): runs the lmfuse tool over all of a target's sources
# into a staging mirror of EDIT_ROOT and moves the mirror into place, or, with a mirror made elsewhere
# (MODE=carried), checks every carried copy against its original (the SHA-256 the carried audit records) and
# only then copies it into place. Then, in both modes, every unit of the target as the build compiles it
# (its own command, the build's own compiler) must: read the rewritten copy of each patched header; read
# the same files as its original (no source folder named both as an include folder and as the -idirafter
# fallback, which would move it last); see every macro the rewrite's analysis depended on as the
# tool saw it (the audit's mirror.units: a flag, a compiler or a library header that defines one otherwise
# compiles other code than was analysed); and no unit the call never saw may read a file under EDIT_ROOT.
# Last, a depfile of what the units read, the audit, and the stamp that says the step is done (removed when it
# starts: a step stopped before its end runs again). Nothing is half-written: every file goes to a
# temporary beside it, renamed into place once written whole; on any failure the copies are removed (so the
# next build runs the step again), the audit is the failed run's own (or none; or the previous one, whole,
# where this run's cannot be written), and the build stops with the reasons.
#
# Both modes: TARGET EDIT_ROOT OUT_DIR COPIES AUDIT STAMP EXPECT_PATCHED DEPFILE COMPILE_COMMANDS FLAGS_FILE
#             SOURCES_FILE SOURCE_ROOT CXX UNITS_FILE BINARY_DIR PATTERNS (carried: where there is one)
#             LAUNCHER_FILE (how the build launches the compiler: `rule <command line>`, `word <word>` lines)
# MODE=tool:    TOOL EXTRA_ARGS_FILE LIBRARY_INCLUDES_FILE (lmfuse::torch's include folders, one per line)
# MODE=carried: FROM_DIR CARRIED_AUDIT
# MODE=consumer (a target linked into one binary with the rewritten REWRITTEN: none of its units may compile
#               the original of a header REWRITTEN's rewrite patched, nor, when it is rewritten too
#               (MEMBER_OUT_DIR, MEMBER_EDIT_ROOT), a copy of it other than REWRITTEN's): TARGET REWRITTEN
#               REWRITTEN_AUDIT REWRITTEN_OUT_DIR EDIT_ROOT SOURCE_ROOT COMPILE_COMMANDS CXX STAMP DEPFILE LAUNCHER_FILE
#               LINKED_HOW (a file: the link item that may have put the two in one binary, or empty)
cmake_minimum_required(VERSION 3.22)

# The files of lmfuse_rewritten/<target>/ that are no copies: the audit, the step's inputs, its stage (the
# tool's cache) and depfile. A carried mirror, a copy of that folder, holds them too.
set(bookkeeping "step\\.stamp(\\.started)?|audit\\.json|\\.stage|\\.database|\\.lmfuse-cache|flags-[^/]*\\.txt|sources\\.txt|extra-args\\.txt|library-includes\\.txt|units\\.txt|launcher\\.txt|rewrite\\.d(\\.part)?")

set(who "lmfuse_rewrite(${TARGET})")

# The compiler as the build runs it: behind the launchers the target names (RULE_LAUNCH_COMPILE,
# CXX_COMPILER_LAUNCHER), which may add flags the compile database does not show (a definition the model
# tests). The checks of each unit's command (what it reads, the macros it sees) run through them too.
set(compiler "${CXX}")
if(DEFINED LAUNCHER_FILE AND EXISTS "${LAUNCHER_FILE}")
  file(STRINGS "${LAUNCHER_FILE}" launcher_lines)
  set(rule_words "")
  set(launcher_words "")
  foreach(line IN LISTS launcher_lines)
    if(line MATCHES "^rule (.+)$")
      separate_arguments(rule_words UNIX_COMMAND "${CMAKE_MATCH_1}")
    elseif(line MATCHES "^word (.+)$")
      list(APPEND launcher_words "${CMAKE_MATCH_1}")
    endif()
  endforeach()
  set(compiler ${rule_words} ${launcher_words} "${CXX}")
endif()

# Every file the step produces (the mirror's copies, the audit, the stamp, the depfile, the lists it hands
# the tool) is written whole or not at all (LmfuseWriteFile.cmake).
include("${CMAKE_CURRENT_LIST_DIR}/LmfuseWriteFile.cmake")

# The audit of a failed run, best effort: this run's (STAGE_AUDIT) replaces the previous one, or the previous
# one goes. Where this run's cannot be written (a full disk), the previous one is left whole and the failure
# says so.
# Its sites the tool patched are recorded failed, `build-refused`, with the step's reason: no copy survives a
# failed step, so nothing rewritten is compiled, and an audit read after the build (a CI artefact) must not
# say otherwise.
function(fail_audit message out)
  set(note "")
  if(NOT AUDIT OR AUDIT_UNWRITABLE)
  elseif(STAGE_AUDIT AND EXISTS "${STAGE_AUDIT}")
    file(READ "${STAGE_AUDIT}" audit_text)
    string(REGEX REPLACE "\n.*" "" first_line "${message}")
    string(SUBSTRING "${first_line}" 0 300 first_line)
    string(REPLACE "\\" "\\\\" first_line "${first_line}")
    string(REPLACE "\"" "\\\"" first_line "${first_line}")
    string(REPLACE "\t" " " first_line "${first_line}")
    string(JSON site_count ERROR_VARIABLE not_an_audit LENGTH "${audit_text}" sites)
    set(refused 0)
    if(NOT not_an_audit AND site_count GREATER 0)
      math(EXPR last "${site_count} - 1")
      foreach(i RANGE ${last})
        string(JSON status GET "${audit_text}" sites ${i} status)
        if(status STREQUAL "patched")
          string(JSON audit_text SET "${audit_text}" sites ${i} status "\"failed\"")
          string(JSON audit_text SET "${audit_text}" sites ${i} reason "\"build-refused\"")
          string(JSON audit_text SET "${audit_text}" sites ${i} detail
                 "\"the build step stopped the build, so no rewritten code is compiled: ${first_line}\"")
          math(EXPR refused "${refused} + 1")
        endif()
      endforeach()
    endif()
    if(refused GREATER 0)
      string(JSON patched_count GET "${audit_text}" summary patched)
      string(JSON failed_count GET "${audit_text}" summary failed)
      math(EXPR patched_count "${patched_count} - ${refused}")
      math(EXPR failed_count "${failed_count} + ${refused}")
      string(JSON audit_text SET "${audit_text}" summary patched "${patched_count}")
      string(JSON audit_text SET "${audit_text}" summary failed "${failed_count}")
    endif()
    lmfuse_try_place_text("${AUDIT}" "${audit_text}" why)
    if(why)
      set(note "\n(this run's audit could not replace the previous one, which is left as it was: ${why})")
    endif()
  else()
    file(REMOVE "${AUDIT}")
  endif()
  set(${out} "${note}" PARENT_SCOPE)
endfunction()

# The one error path: no copy survives a failure, and the audit is this run's (STAGE_AUDIT) or none (or the
# previous one, whole, where this run's cannot be written). The message may come in pieces, joined.
function(fail)
  string(CONCAT message ${ARGV})
  foreach(copy IN LISTS COPIES)
    file(REMOVE "${copy}")
  endforeach()
  if(STAMP)
    file(REMOVE "${STAMP}.started")
  endif()
  fail_audit("${message}" note)
  message(FATAL_ERROR "${who}: ${message}${note}")
endfunction()

# <out> = the shell words of <text> (a compile command, a depfile's list of files) as a CMake list, or the
# step fails naming <what>. CMake's lists do not split at a ';' inside '[' ... ']', so a word holding an
# unbalanced bracket would join the words after it into one element, and a ';' inside a word would split
# it: the step would then check other flags or files than the build uses.
function(words_of text what out)
  string(FIND "${text}" ";" semicolon)
  if(NOT semicolon EQUAL -1)
    string(REPLACE ";" "<semicolon>" text "${text}")
    fail("${what} holds a semicolon, which CMake's lists cannot carry inside a word, so the step cannot read "
         "it as the build does: ${text}")
  endif()
  separate_arguments(words UNIX_COMMAND "${text}")
  foreach(word IN LISTS words)
    if(word MATCHES ";")
      string(REPLACE ";" " " word "${word}")
      fail("${what} holds a '[' or ']' that joins its words into one in CMake's lists, so the step cannot read "
           "it as the build does: ${word}")
    endif()
  endforeach()
  set(${out} "${words}" PARENT_SCOPE)
endfunction()

# <out> = the lines of the file <path> (one of the lists lmfuse_rewrite hands the step) as a CMake list, or
# the step fails naming the line a bracket would join to the next ones (see words_of).
function(lines_of path out)
  file(STRINGS "${path}" lines ENCODING UTF-8)  # every byte of a path kept (by default only ASCII)
  foreach(line IN LISTS lines)
    if(line MATCHES ";")
      string(REPLACE ";" "<line break>" line "${line}")
      fail("${path} has a line holding a '[' or ']' that joins it to the next ones in CMake's lists: ${line}")
    endif()
  endforeach()
  set(${out} "${lines}" PARENT_SCOPE)
endfunction()

# <path> gets the contents <from> (a file), or the step fails naming it.
function(place_copy from path)
  lmfuse_try_place_copy("${from}" "${path}" why)
  if(why)
    fail("${why}")
  endif()
endfunction()

# <out> = the mirror's files that are another name of one of its copies (mirror.files' same_file_as in <audit>:
# a link in the sources), as a list of "<path>|<same file>", paths relative to the mirror.
function(same_files_of audit out)
  set(pairs "")
  string(JSON count ERROR_VARIABLE error LENGTH "${audit}" mirror files)
  if(NOT error AND count GREATER 0)
    math(EXPR last "${count} - 1")
    foreach(i RANGE ${last})
      string(JSON same ERROR_VARIABLE absent GET "${audit}" mirror files ${i} same_file_as)
      if(absent)
        continue()
      endif()
      string(JSON relative GET "${audit}" mirror files ${i} path)
      if(same STREQUAL "" OR IS_ABSOLUTE "${same}" OR same MATCHES "(^|/)\\.\\.(/|$)" OR same MATCHES "[|;]" OR
         relative MATCHES "[|;]" OR relative MATCHES "(^|/)\\.\\.(/|$)" OR relative STREQUAL same)
        fail("the audit has a malformed mirror.files entry (#${i}: same_file_as)")
      endif()
      list(APPEND pairs "${relative}|${same}")
    endforeach()
  endif()
  set(${out} "${pairs}" PARENT_SCOPE)
endfunction()

# Places the mirror's files <relatives> from <from> into OUT_DIR: each a copy, but those <pairs> (same_files_of)
# names as another name of a copy, which become a hard link of it: one file under both names, as in the sources.
function(place_mirror from relatives pairs)
  set(linked "")
  foreach(pair IN LISTS pairs)
    string(REPLACE "|" ";" pair "${pair}")
    list(GET pair 0 name)
    list(APPEND linked "${name}")
  endforeach()
  foreach(relative IN LISTS relatives)
    if(NOT relative IN_LIST linked)
      get_filename_component(folder "${OUT_DIR}/${relative}" DIRECTORY)
      make_folder("${folder}")
      place_copy("${from}/${relative}" "${OUT_DIR}/${relative}")
    endif()
  endforeach()
  foreach(pair IN LISTS pairs)
    string(REPLACE "|" ";" pair "${pair}")
    list(GET pair 0 name)
    list(GET pair 1 same)
    get_filename_component(folder "${OUT_DIR}/${name}" DIRECTORY)
    make_folder("${folder}")
    file(REMOVE "${OUT_DIR}/${name}")
    file(CREATE_LINK "${OUT_DIR}/${same}" "${OUT_DIR}/${name}" RESULT status)
    if(NOT status EQUAL 0)
      fail("cannot make ${OUT_DIR}/${name} the same file as ${OUT_DIR}/${same} (a hard link, as ${name} is of "
           "${same} in the sources): ${status}")
    endif()
  endforeach()
endfunction()

# <path> gets <content>, or the step fails naming it.
function(place_text path content)
  lmfuse_try_place_text("${path}" "${content}" why)
  if(why)
    fail("${why}")
  endif()
endfunction()

# Makes a folder of the mirror, or fails the step through fail() (file(MAKE_DIRECTORY) would end the script
# with the copies made so far in place).
function(make_folder folder)
  if(IS_DIRECTORY "${folder}")
    return()
  endif()
  execute_process(COMMAND "${CMAKE_COMMAND}" -E make_directory "${folder}" RESULT_VARIABLE status
                  OUTPUT_QUIET ERROR_VARIABLE errors)
  if(NOT status EQUAL 0 OR NOT IS_DIRECTORY "${folder}")
    string(STRIP "${errors}" errors)
    fail("cannot make the folder ${folder}: ${errors}")
  endif()
endfunction()

# Removes <paths> (files or folders), or fails the step through fail() naming what could not go
# (file(REMOVE_RECURSE) would end the script with the previous run's copies and audit still in place).
function(remove_paths)
  if(NOT ARGN)
    return()
  endif()
  execute_process(COMMAND "${CMAKE_COMMAND}" -E rm -rf ${ARGN} RESULT_VARIABLE status OUTPUT_QUIET
                  ERROR_VARIABLE errors)
  set(left "")
  foreach(path IN LISTS ARGN)
    if(EXISTS "${path}" OR IS_SYMLINK "${path}")
      list(APPEND left "${path}")
    endif()
  endforeach()
  if(left OR NOT status EQUAL 0)
    string(STRIP "${errors}" errors)
    string(REPLACE ";" ", " left "${left}")
    fail("cannot remove ${left}: ${errors}")
  endif()
endfunction()

# The audit replaces only an earlier audit: any other file at AUDIT (a header, a source: AUDIT may name any
# path) is left as it is, and the step writes nothing there, not even on failure.
if(AUDIT AND EXISTS "${AUDIT}")
  file(READ "${AUDIT}" existing)
  string(JSON schema ERROR_VARIABLE not_json GET "${existing}" schema)
  if(not_json OR NOT schema MATCHES "^lmfuse-audit/")
    set(occupied "${AUDIT}")
    set(AUDIT "")
    fail("AUDIT ${occupied} is a file that is not an lmfuse audit; it is left as it is: name another path")
  endif()
endif()

# A step stopped before its end (the build killed) must run again: its first output, the stamp, goes first,
# and is written again only once everything else is in place.
if(STAMP AND NOT MODE STREQUAL "consumer")
  file(REMOVE "${STAMP}")
endif()

# The folders of the files the step writes outside the mirror (the depfile and its scratch file, the stamp,
# the audit): the build tool makes those of a command's declared outputs at most (Ninja does, Makefiles do
# not), never those of its depfile.
foreach(path IN ITEMS "${DEPFILE}" "${STAMP}" "${AUDIT}")
  if(path)
    get_filename_component(folder "${path}" DIRECTORY)
    make_folder("${folder}")
  endif()
endforeach()

# The stamp is written now, under another name, and renamed into place once the step is done: it keeps the
# time the step started, so a file saved while the step runs (after the tool read it) is newer than the stamp,
# and a build tool that compares the stamp's time (Make) runs the step again rather than taking the stamp for
# proof that the save was seen. The mirror's files are also compared with what the tool read (at the end).
if(STAMP)
  if(MODE STREQUAL "consumer")
    set(stamp_text "checked against ${REWRITTEN_AUDIT}\n")
  else()
    set(stamp_text "${TARGET}: rewritten, checked, audited\n")
  endif()
  place_text("${STAMP}.started" "${stamp_text}")
endif()
# The stamp, the command's first output, says the step is done (removed when it started), with the time it
# started.
function(place_stamp)
  file(RENAME "${STAMP}.started" "${STAMP}" RESULT renamed)
  if(NOT renamed EQUAL 0)
    fail("cannot write ${STAMP} (renaming ${STAMP}.started into place): ${renamed}")
  endif()
endfunction()

# The sites of an audit as "file:line: status reason: detail" lines, but those whose status is in `skip`.
function(describe_sites audit_file skip out)
  set(lines "")
  if(EXISTS "${audit_file}")
    file(READ "${audit_file}" audit)
    string(JSON count ERROR_VARIABLE error LENGTH "${audit}" sites)
    if(NOT error AND count GREATER 0)
      math(EXPR last "${count} - 1")
      foreach(i RANGE ${last})
        string(JSON status ERROR_VARIABLE e GET "${audit}" sites ${i} status)
        if(status IN_LIST skip)
          continue()
        endif()
        string(JSON file ERROR_VARIABLE e GET "${audit}" sites ${i} file)
        string(JSON line ERROR_VARIABLE e GET "${audit}" sites ${i} line)
        string(JSON reason ERROR_VARIABLE e GET "${audit}" sites ${i} reason)
        string(JSON detail ERROR_VARIABLE e GET "${audit}" sites ${i} detail)
        string(APPEND lines "\n  ${file}:${line}: ${status} ${reason}: ${detail}")
      endforeach()
    endif()
  endif()
  set(${out} "${lines}" PARENT_SCOPE)
endfunction()

if(NOT MODE MATCHES "^(tool|carried|consumer)$")
  message(FATAL_ERROR "LmfuseRewriteStep.cmake: MODE must be tool, carried or consumer")
endif()

set(SOURCES "")
if(SOURCES_FILE)
  lines_of("${SOURCES_FILE}" SOURCES)
endif()

# The target's name as a regular expression (a name may hold `+` or `.`): its object folder is
# CMakeFiles/<target>.dir/.
string(REGEX REPLACE "([][+.*()^$?|\\\\])" "\\\\\\1" target_pattern "${TARGET}")

# The compile database: file -> command, read once.
set(database "")
if(COMPILE_COMMANDS AND EXISTS "${COMPILE_COMMANDS}")
  file(READ "${COMPILE_COMMANDS}" database)
  string(JSON entries ERROR_VARIABLE error LENGTH "${database}")
  if(error)
    set(entries 0)
  endif()
endif()
# The arguments of `file`'s compile command in the database whose output lies in the target's object
# folder (a source compiled by several targets has several entries), without the compiler, the output,
# the dependency flags and the file itself. Empty when the database has no such entry. <out>_compiler = how
# the step runs that unit's compiler (see compiler_of).
function(command_of file out)
  set(arguments "")
  set(directory "")
  set(unit_compiler "")
  if(entries GREATER 0)
    math(EXPR last "${entries} - 1")
    foreach(i RANGE ${last})
      string(JSON entry_file GET "${database}" ${i} file)
      if(NOT entry_file STREQUAL file)
        continue()
      endif()
      string(JSON command GET "${database}" ${i} command)
      if(NOT command MATCHES "CMakeFiles/${target_pattern}\\.dir/")
        continue()
      endif()
      string(JSON directory GET "${database}" ${i} directory)
      words_of("${command}" "the compile command of ${file}" words)
      list(POP_FRONT words unit_compiler)  # the compiler
      set(skip_next OFF)
      foreach(word IN LISTS words)
        if(skip_next)
          set(skip_next OFF)
        elseif(word MATCHES "^-(o|MF|MT|MQ)$")
          set(skip_next ON)
        elseif(word MATCHES "^-(c|MD|MMD)$" OR word STREQUAL file)
        else()
          list(APPEND arguments "${word}")
        endif()
      endforeach()
      break()
    endforeach()
  endif()
  compiler_of("${unit_compiler}" unit_compiler)
  set(${out} "${arguments}" PARENT_SCOPE)
  set(${out}_directory "${directory}" PARENT_SCOPE)
  set(${out}_compiler "${unit_compiler}" PARENT_SCOPE)
endfunction()

# <out> = how the step runs a unit's compiler, given the first word of its command in the compile database:
# the C++ compiler behind the target's launchers (`compiler`) for a C++ unit (or where the database has no
# command), else the unit's own compiler (a C unit's, nvcc for a CUDA unit: CXX cannot run their flags).
function(compiler_of word out)
  if(word STREQUAL "" OR word STREQUAL CXX)
    set(${out} "${compiler}" PARENT_SCOPE)
  else()
    set(${out} "${word}" PARENT_SCOPE)
  endif()
endfunction()

# <out> = every unit the compile database lists in the target's object folder (generator expressions and late
# sources included), in any language that includes files: C++, C, CUDA (each checked with its own compiler's
# command, see compiler_of: nvcc and the C compiler write the list of files a unit reads with -M as the C++
# compiler does). Units of languages without a preprocessor that reads the project's headers (Fortran,
# assembly without preprocessing, resource scripts) are left out.
function(target_units out)
  set(units "")
  if(entries GREATER 0)
    math(EXPR last "${entries} - 1")
    foreach(i RANGE ${last})
      string(JSON entry_file GET "${database}" ${i} file)
      string(JSON command GET "${database}" ${i} command)
      if(NOT command MATCHES "CMakeFiles/${target_pattern}\\.dir/")
        continue()
      endif()
      string(TOLOWER "${entry_file}" lower_file)
      string(FIND "${command}" "${CXX} " compiler_at)
      if(NOT compiler_at EQUAL 0 AND
         (lower_file MATCHES "\\.(f|f77|f90|f95|f03|f08|for|ftn|fpp|asm|nasm|rc|def|manifest)$" OR
          entry_file MATCHES "\\.s$"))
        continue()
      endif()
      list(APPEND units "${entry_file}")
    endforeach()
  endif()
  set(${out} "${units}" PARENT_SCOPE)
endfunction()

# <out> = <arguments> without the flags that name the mirror (`-I <mirror dir>`, BEFORE the target's own)
# or an original's folder searched last (`-idirafter <folder>`): what the unit's original compiles with.
function(without_mirror arguments out)
  set(kept "")
  set(previous "")
  foreach(word IN LISTS arguments)
    if(previous MATCHES "^-(I|isystem|iquote|idirafter)$")
      string(FIND "${word}" "${OUT_DIR}" in_mirror)
      if(in_mirror EQUAL -1 AND NOT (previous STREQUAL "-idirafter" AND word IN_LIST source_folders))
        list(APPEND kept "${previous}" "${word}")
      endif()
      set(previous "")
      continue()
    endif()
    if(word MATCHES "^-(I|isystem|iquote|idirafter)$")
      set(previous "${word}")
      continue()
    endif()
    string(FIND "${word}" "${OUT_DIR}" in_mirror)
    if(in_mirror EQUAL -1)
      list(APPEND kept "${word}")
    endif()
  endforeach()
  set(${out} "${kept}" PARENT_SCOPE)
endfunction()

# <out> = the files a unit reads (itself and every header), by real path, preprocessing it with <arguments>
# in <directory>, by the compiler ARGN names (the unit's own, see command_of's <out>_compiler; the C++
# compiler where none is given); a unit that does not preprocess fails the step.
function(files_read unit arguments directory out)
  if(NOT directory)
    set(directory "${SOURCE_ROOT}")
  endif()
  set(run ${compiler})
  if(ARGN)
    set(run ${ARGN})
  endif()
  execute_process(
    COMMAND ${run} ${arguments} -M -MF "${DEPFILE}.part" -MT unit "${unit}"
    WORKING_DIRECTORY "${directory}" RESULT_VARIABLE status OUTPUT_QUIET ERROR_VARIABLE errors)
  if(NOT status EQUAL 0)
    fail("${unit} does not preprocess with its compile command:\n${errors}")
  endif()
  file(READ "${DEPFILE}.part" part)
  string(REGEX REPLACE "^[^:]*:" "" part "${part}")
  string(REPLACE "\\\n" " " part "${part}")
  words_of("${part}" "the list of files ${unit} reads" headers)
  set(files "")
  foreach(header IN LISTS headers)
    get_filename_component(header "${header}" ABSOLUTE BASE_DIR "${directory}")
    list(APPEND files "${header}")
  endforeach()
  set(${out} "${files}" PARENT_SCOPE)
endfunction()

# <out> = what the build compiles for <source>: its copy in the mirror when it lies under EDIT_ROOT, else
# the source itself.
function(unit_of source out)
  get_filename_component(real_source "${source}" REALPATH)
  file(RELATIVE_PATH relative "${real_edit_root}" "${real_source}")
  if(relative MATCHES "^\\.\\./")
    set(${out} "${source}" PARENT_SCOPE)
  else()
    set(${out} "${OUT_DIR}/${relative}" PARENT_SCOPE)
  endif()
endfunction()

# "text" as a JSON string.
function(json_string text out)
  string(REPLACE "\\" "\\\\" text "${text}")
  string(REPLACE "\"" "\\\"" text "${text}")
  set(${out} "\"${text}\"" PARENT_SCOPE)
endfunction()

get_filename_component(real_edit_root "${EDIT_ROOT}" REALPATH)
set(source_folders "")
foreach(source IN LISTS SOURCES)
  get_filename_component(folder "${source}" DIRECTORY)
  list(APPEND source_folders "${folder}")
endforeach()
list(REMOVE_DUPLICATES source_folders)

# <out> = the files an audit's patched sites lie in, by real path here (a carried audit names the files where
# the tool ran: under its mirror.root, which stands for EDIT_ROOT).
function(patched_files_of audit out)
  set(files "")
  string(JSON audit_root ERROR_VARIABLE error GET "${audit}" mirror root)
  string(JSON count ERROR_VARIABLE error LENGTH "${audit}" sites)
  if(NOT error AND count GREATER 0)
    math(EXPR last "${count} - 1")
    foreach(i RANGE ${last})
      string(JSON site_status GET "${audit}" sites ${i} status)
      if(site_status STREQUAL "patched")
        string(JSON site_file GET "${audit}" sites ${i} file)
        if(audit_root)
          file(RELATIVE_PATH in_root "${audit_root}" "${site_file}")
          if(NOT in_root MATCHES "^\\.\\./")
            set(site_file "${real_edit_root}/${in_root}")
          endif()
        endif()
        get_filename_component(site_file "${site_file}" REALPATH BASE_DIR "${SOURCE_ROOT}")
        list(APPEND files "${site_file}")
      endif()
    endforeach()
  endif()
  set(${out} "${files}" PARENT_SCOPE)
endfunction()

if(MODE STREQUAL "consumer")
  # TARGET is linked into one binary with REWRITTEN (lmfuse_rewrite's check of the targets a rewritten one
  # shares a binary with): none of its units may compile the original of a header REWRITTEN's rewrite
  # patched, or the binary holds two definitions of that header's inline functions, the fused one and the
  # original, and the linker keeps either. STAMP and its depfile mark the check done.
  set(who "lmfuse_rewrite(${REWRITTEN})")
  if(NOT EXISTS "${REWRITTEN_AUDIT}")
    fail("there is no audit ${REWRITTEN_AUDIT} to check ${TARGET}, which is linked with ${REWRITTEN}, against")
  endif()
  file(READ "${REWRITTEN_AUDIT}" rewritten_audit)
  patched_files_of("${rewritten_audit}" patched_files)
  set(originals_read "")
  set(copies_differ "")
  set(dependencies "")
  target_units(units)
  if(NOT entries GREATER 0)
    fail("there is no compile database ${COMPILE_COMMANDS} to find ${TARGET}'s units in, so whether it compiles the "
         "original of a header that ${REWRITTEN}'s rewrite patched cannot be checked (${TARGET} is linked "
         "with ${REWRITTEN}); build with a generator that writes one (Ninja, Makefiles)")
  endif()
  foreach(source IN LISTS units)
    command_of("${source}" source_flags)
    files_read("${source}" "${source_flags}" "${source_flags_directory}" headers ${source_flags_compiler})
    foreach(header IN LISTS headers)
      get_filename_component(real_header "${header}" REALPATH)
      if(real_header IN_LIST patched_files)
        list(APPEND originals_read "\n  ${source} includes the original ${header}")
      elseif(MEMBER_OUT_DIR)
        # TARGET is rewritten too: a copy of a header REWRITTEN patched must be REWRITTEN's copy, or the
        # two rewrites (other flags, other rules) are two definitions as well.
        file(RELATIVE_PATH in_mirror "${MEMBER_OUT_DIR}" "${real_header}")
        if(NOT in_mirror MATCHES "^\\.\\./")
          get_filename_component(original "${MEMBER_EDIT_ROOT}/${in_mirror}" REALPATH)
          file(RELATIVE_PATH in_root "${real_edit_root}" "${original}")
          if(original IN_LIST patched_files)
            file(SHA256 "${real_header}" ours)
            set(theirs "")
            if(EXISTS "${REWRITTEN_OUT_DIR}/${in_root}")
              file(SHA256 "${REWRITTEN_OUT_DIR}/${in_root}" theirs)
            endif()
            if(NOT ours STREQUAL theirs)
              list(APPEND copies_differ "\n  ${source} includes ${real_header}, which differs from "
                                        "${REWRITTEN_OUT_DIR}/${in_root}")
            endif()
          endif()
        endif()
      endif()
      string(REPLACE " " "\\ " header "${header}")
      string(APPEND dependencies " \\\n  ${header}")
    endforeach()
  endforeach()
  file(REMOVE "${DEPFILE}.part")
  # Where only a link item that may not link put the two in one binary (a generator expression, whose
  # value is not known when configuring, or a file name), the failure names it.
  set(how "")
  if(LINKED_HOW AND EXISTS "${LINKED_HOW}")
    file(READ "${LINKED_HOW}" how)
  endif()
  if(how)
    set(how " (${how}, and every target a link item may name counts as linked)")
  endif()
  if(copies_differ)
    fail("${TARGET} and ${REWRITTEN} are linked into one binary${how}, and their rewrites of a header differ (one "
         "was analysed under other flags, or refused a site the other patched): the binary would hold two "
         "definitions of its inline functions, and the linker keeps either. Give both targets the same "
         "flags for the header, or include it from one of them only:${copies_differ}")
  endif()
  if(originals_read)
    fail("${TARGET} is linked into one binary with ${REWRITTEN}${how}, and compiles the original of a header whose "
         "loss site ${REWRITTEN}'s rewrite patched: the binary would hold two definitions of its inline "
         "functions, the fused one and the original, and the linker keeps either. Call lmfuse_rewrite(TARGET "
         "${TARGET}) too (its units then compile the rewritten header), or include the header only from "
         "${REWRITTEN}:${originals_read}")
  endif()
  # The stamp last: it is what tells the build tool the check is done.
  place_text("${DEPFILE}" "${STAMP}:${dependencies}\n")
  place_stamp()
  return()
endif()

set(flags "")
list(GET COPIES 0 first_copy)
command_of("${first_copy}" copy_flags)
if(copy_flags)
  without_mirror("${copy_flags}" flags)
else()
  lines_of("${FLAGS_FILE}" flag_lines)
  foreach(line IN LISTS flag_lines)
    if(line STREQUAL "")
      continue()
    elseif(line MATCHES "^SHELL:(.*)$")
      words_of("${CMAKE_MATCH_1}" "the flag ${line}" parts)
      list(APPEND flags ${parts})
    else()
      list(APPEND flags "${line}")
    endif()
  endforeach()
endif()
if(MODE STREQUAL "carried")
  # A mirror made elsewhere (sources and the headers mirrored beside them) is compiled only if it was made
  # from the sources as they are now: every copy its audit lists must have an original under EDIT_ROOT with
  # the SHA-256 the audit recorded, and every file of the mirror but the bookkeeping must be such a copy.
  # All of it is checked before anything is copied into the build tree.
  string(CONCAT rerun "Re-run the lmfuse tool over the sources where Clang is available (a build without "
                      "LMFUSE_REWRITTEN_DIR writes lmfuse_rewritten/${TARGET}/) and carry that folder here.")
  if(NOT EXISTS "${CARRIED_AUDIT}")
    fail("there is no audit ${CARRIED_AUDIT} to check the carried copies against. ${rerun}")
  endif()
  file(READ "${CARRIED_AUDIT}" carried_audit)
  string(JSON count ERROR_VARIABLE error LENGTH "${carried_audit}" mirror files)
  if(error)
    fail("the audit ${CARRIED_AUDIT} records no digest of the originals (mirror.files, lmfuse-audit/2). ${rerun}")
  endif()
  set(listed "")
  set(problems "")
  if(count GREATER 0)
    math(EXPR last "${count} - 1")
    foreach(i RANGE ${last})
      string(JSON relative ERROR_VARIABLE e1 GET "${carried_audit}" mirror files ${i} path)
      string(JSON recorded ERROR_VARIABLE e2 GET "${carried_audit}" mirror files ${i} sha256)
      string(JSON recorded_copy ERROR_VARIABLE e3 GET "${carried_audit}" mirror files ${i} copy_sha256)
      # The tool writes paths under the mirrored root only; anything else could copy outside the mirror.
      if(e1 OR e2 OR e3 OR relative STREQUAL "" OR IS_ABSOLUTE "${relative}" OR relative MATCHES "(^|/)\\.\\.(/|$)")
        fail("the audit ${CARRIED_AUDIT} has a malformed mirror.files entry (#${i}). ${rerun}")
      endif()
      list(APPEND listed "${relative}")
      if(NOT EXISTS "${FROM_DIR}/${relative}")
        string(APPEND problems "\n  ${FROM_DIR}/${relative} is missing (the audit lists a copy of ${relative})")
      else()
        # A copy cut short on the way (a full disk) or edited since the tool wrote it is not what was checked.
        file(SHA256 "${FROM_DIR}/${relative}" digest)
        if(NOT digest STREQUAL recorded_copy)
          string(APPEND problems "\n  ${FROM_DIR}/${relative} is not the copy the tool wrote (SHA-256 ${digest}; "
                                 "the audit recorded ${recorded_copy}): cut short or edited since")
        endif()
      endif()
      set(original "${EDIT_ROOT}/${relative}")
      if(NOT EXISTS "${original}" OR IS_DIRECTORY "${original}")
        string(APPEND problems "\n  ${original} no longer exists (the mirror holds a copy of it)")
      else()
        file(SHA256 "${original}" digest)
        if(NOT digest STREQUAL recorded)
          string(APPEND problems "\n  ${original} has changed since its copy was made (SHA-256 ${digest}; "
                                 "the audit recorded ${recorded})")
        endif()
      endif()
    endforeach()
  endif()
  file(GLOB_RECURSE carried_files LIST_DIRECTORIES false RELATIVE "${FROM_DIR}" "${FROM_DIR}/*")
  foreach(relative IN LISTS carried_files)
    if(NOT relative IN_LIST listed AND NOT relative MATCHES "^(${bookkeeping})(/.*)?$")
      string(APPEND problems "\n  ${FROM_DIR}/${relative} is not a copy the audit lists")
    endif()
  endforeach()
  if(problems)
    fail("the rewritten copies in ${FROM_DIR} were not made from the sources as they are now:${problems}\n${rerun}")
  endif()
  if(NOT EXPECT_PATCHED STREQUAL "")
    # The tool's count: sites patched or already patched.
    string(JSON patched ERROR_VARIABLE e1 GET "${carried_audit}" summary patched)
    string(JSON already ERROR_VARIABLE e2 GET "${carried_audit}" summary already_patched)
    if(e1)
      fail("the carried audit ${CARRIED_AUDIT} has no summary.patched count")
    endif()
    if(e2)
      set(already 0)
    endif()
    math(EXPR done "${patched} + ${already}")
    if(done LESS EXPECT_PATCHED)
      describe_sites("${CARRIED_AUDIT}" "patched;already_patched" reasons)
      fail("the carried sources have ${done} sites patched or already patched, fewer than EXPECT_PATCHED ${EXPECT_PATCHED}:${reasons}")
    endif()
  endif()
  # Checked: the carried copies replace the previous mirror (stale copies of files no longer listed go too).
  file(GLOB previous LIST_DIRECTORIES true "${OUT_DIR}/*")
  list(FILTER previous EXCLUDE REGEX "/(${bookkeeping})$")
  if(previous)
    remove_paths(${previous})
  endif()
  # A carried mirror may have lost its hard links on the way (a copy, an archive): they are made again.
  same_files_of("${carried_audit}" same_files)
  place_mirror("${FROM_DIR}" "${listed}" "${same_files}")
  set(result_audit "${CARRIED_AUDIT}")
else()
  lines_of("${EXTRA_ARGS_FILE}" EXTRA_ARGS)

  # Each source is parsed with the command its unit is compiled with (the copy's, without the mirror's
  # folders: the tool reads the originals), through a compile database of this step's own; each unit
  # compiles with its own flags (a source's COMPILE_DEFINITIONS, the configuration's flags), and the tool
  # must see what the unit will compile. Without a command for every unit (a generator that writes no
  # compile database), one set of flags for all: the first copy's, else the generated flags file (one
  # flag per line; SHELL: entries hold several arguments).
  set(database_entries "[]")
  set(database_complete ON)
  set(index 0)
  foreach(source IN LISTS SOURCES)
    unit_of("${source}" unit)
    command_of("${unit}" unit_arguments)
    if(NOT unit_arguments)
      set(database_complete OFF)
      break()
    endif()
    without_mirror("${unit_arguments}" original_arguments)
    set(arguments "[]")
    set(position 0)
    foreach(word IN ITEMS "${CXX}" ${original_arguments} "${source}")
      json_string("${word}" quoted)
      string(JSON arguments SET "${arguments}" ${position} "${quoted}")
      math(EXPR position "${position} + 1")
    endforeach()
    json_string("${unit_arguments_directory}" directory)
    json_string("${source}" file)
    string(JSON database_entries SET "${database_entries}" ${index}
           "{\"directory\": ${directory}, \"file\": ${file}, \"arguments\": ${arguments}}")
    math(EXPR index "${index} + 1")
  endforeach()
  set(compile_flags -- ${flags})
  if(database_complete)
    make_folder("${OUT_DIR}/.database")
    place_text("${OUT_DIR}/.database/compile_commands.json" "${database_entries}\n")
    set(compile_flags -p "${OUT_DIR}/.database")
  endif()

  # EXTRA_ARGS: the tool's own --extra-arg where it has one, else appended to the flags.
  execute_process(COMMAND "${TOOL}" --help OUTPUT_VARIABLE help ERROR_QUIET)
  set(extra "")
  if(help MATCHES "extra-arg")
    foreach(argument IN LISTS EXTRA_ARGS)
      list(APPEND extra "--extra-arg=${argument}")
    endforeach()
  elseif(NOT database_complete)
    list(APPEND compile_flags ${EXTRA_ARGS})
  else()
    fail("the lmfuse tool ${TOOL} has no --extra-arg, which EXTRA_ARGS need")
  endif()

  # The library's include folders, as the build links it: the tool's re-parse takes only their lmfuse/ headers
  # for the library's, so a header of the program's found first as <lmfuse/torch.h> fails the unit.
  if(NOT help MATCHES "library-include")
    fail("the lmfuse tool ${TOOL} has no --library-include: it is older than this lmfuse package (use the tool "
         "installed with it, or unset LMFUSE_EXECUTABLE)")
  endif()
  lines_of("${LIBRARY_INCLUDES_FILE}" library_includes)
  set(library "")
  foreach(folder IN LISTS library_includes)
    if(IS_DIRECTORY "${folder}")
      list(APPEND library "--library-include=${folder}")
    endif()
  endforeach()

  # The stage keeps the tool's cache (.lmfuse-cache) between runs; everything else in it is this run's.
  set(stage "${OUT_DIR}/.stage")
  file(GLOB stale LIST_DIRECTORIES true "${stage}/*")
  list(FILTER stale EXCLUDE REGEX "/\\.lmfuse-cache$")
  if(stale)
    remove_paths(${stale})
  endif()
  make_folder("${stage}")
  set(STAGE_AUDIT "${stage}/audit.json")
  set(expect "")
  if(NOT EXPECT_PATCHED STREQUAL "")
    set(expect --expect-patched "${EXPECT_PATCHED}")
  endif()
  execute_process(
    COMMAND "${TOOL}" --out-dir "${stage}" --edit-root "${EDIT_ROOT}" --audit "${STAGE_AUDIT}"
            --patterns "${PATTERNS}" ${expect} ${extra} ${library} ${SOURCES} ${compile_flags}
    WORKING_DIRECTORY "${SOURCE_ROOT}"
    RESULT_VARIABLE status
    OUTPUT_VARIABLE output
    ERROR_VARIABLE output)
  # Every site that did not end patched, from this run's audit, follows the tool's own message.
  describe_sites("${STAGE_AUDIT}" "patched;already_patched" reasons)
  if(status EQUAL 3)
    # The tool's own check (--expect-patched): its count, its list of sites and reasons.
    fail("fewer than EXPECT_PATCHED ${EXPECT_PATCHED} sites were patched or already patched:${reasons}\n${output}")
  elseif(NOT status EQUAL 0)
    fail("the lmfuse tool failed (exit ${status}):${reasons}\n${output}")
  endif()
  if(NOT EXISTS "${STAGE_AUDIT}")
    fail("the lmfuse tool wrote no audit (${STAGE_AUDIT})")
  endif()

  # The mirror: staged files replace the previous run's (stale copies of files no longer read go too).
  file(GLOB previous LIST_DIRECTORIES true "${OUT_DIR}/*")
  list(FILTER previous EXCLUDE REGEX "/(${bookkeeping})$")
  if(previous)
    remove_paths(${previous})
  endif()
  file(GLOB_RECURSE staged LIST_DIRECTORIES false RELATIVE "${stage}" "${stage}/*")
  list(FILTER staged EXCLUDE REGEX "^(audit\\.json|\\.lmfuse-cache/.*)$")
  file(READ "${STAGE_AUDIT}" stage_audit)
  same_files_of("${stage_audit}" same_files)
  place_mirror("${stage}" "${staged}" "${same_files}")
  foreach(copy IN LISTS COPIES)
    if(NOT EXISTS "${copy}")
      fail("the lmfuse tool mirrored no copy of ${copy}")
    endif()
  endforeach()
  set(result_audit "${STAGE_AUDIT}")
endif()

# The files the tool rewrote: the patched sites' files, by real path here.
file(READ "${result_audit}" audit)
patched_files_of("${audit}" patched_files)
# The files of the project the mirror holds a copy of (the audit's mirror.files, relative to EDIT_ROOT), by real
# path here: a unit compiled from a copy must read their copies only, never these originals.
set(mirrored_originals "")
string(JSON mirrored_count ERROR_VARIABLE no_mirrored LENGTH "${audit}" mirror files)
if(NOT no_mirrored AND mirrored_count GREATER 0)
  math(EXPR last "${mirrored_count} - 1")
  foreach(i RANGE ${last})
    string(JSON relative GET "${audit}" mirror files ${i} path)
    get_filename_component(real_original "${real_edit_root}/${relative}" REALPATH)
    list(APPEND mirrored_originals "${real_original}")
  endforeach()
endif()

# <out> = <files> by real path, with a mirrored file standing for its original: what a copy's reads are
# compared with its original's by.
function(resolved_files files out)
  set(result "")
  foreach(file IN LISTS files)
    file(RELATIVE_PATH in_mirror "${OUT_DIR}" "${file}")
    if(NOT in_mirror MATCHES "^\\.\\./")
      set(file "${real_edit_root}/${in_mirror}")
    endif()
    get_filename_component(real "${file}" REALPATH)
    list(APPEND result "${real}")
  endforeach()
  list(REMOVE_DUPLICATES result)
  set(${out} "${result}" PARENT_SCOPE)
endfunction()

# <out> = the folders <arguments> (a unit's command, run in <directory>) names with -I, -isystem, -iquote
# or -idirafter (<option> picks one; separate or joined), by real path.
function(include_folders arguments directory option out)
  set(result "")
  set(previous "")
  foreach(word IN LISTS arguments)
    set(folder "")
    if(previous)
      if(previous MATCHES "^-(${option})$")
        set(folder "${word}")
      endif()
      set(previous "")
    elseif(word MATCHES "^-(I|isystem|iquote|idirafter)$")
      set(previous "${word}")
    elseif(word MATCHES "^-(I|isystem|iquote|idirafter)(.+)$")
      set(joined "${CMAKE_MATCH_2}")
      if(CMAKE_MATCH_1 MATCHES "^(${option})$")
        set(folder "${joined}")
      endif()
    endif()
    if(NOT folder STREQUAL "")
      if(NOT directory)
        set(directory "${SOURCE_ROOT}")
      endif()
      get_filename_component(folder "${folder}" REALPATH BASE_DIR "${directory}")
      list(APPEND result "${folder}")
    endif()
  endforeach()
  set(${out} "${result}" PARENT_SCOPE)
endfunction()

# <out> = the files among <files> that belong to the project: under EDIT_ROOT, by real path, with a mirrored
# file standing for its original, and the build folder's files left out.
function(project_files files out)
  get_filename_component(real_binary_dir "${BINARY_DIR}" REALPATH)
  resolved_files("${files}" resolved)
  set(result "")
  foreach(real IN LISTS resolved)
    file(RELATIVE_PATH in_root "${real_edit_root}" "${real}")
    file(RELATIVE_PATH in_build "${real_binary_dir}" "${real}")
    if(NOT in_root MATCHES "^\\.\\./" AND (in_build MATCHES "^\\.\\./" OR NOT BINARY_DIR))
      list(APPEND result "${real}")
    endif()
  endforeach()
  set(${out} "${result}" PARENT_SCOPE)
endfunction()

# The units the audit records macros of (mirror.units): a unit under EDIT_ROOT by its path there, one
# outside it (generated into a build folder, which lies elsewhere where the mirror was made) by the SHA-256
# of its contents.
string(JSON unit_records ERROR_VARIABLE no_units GET "${audit}" mirror units)
if(no_units)
  fail("the audit ${result_audit} records no macros of its units (mirror.units, lmfuse-audit/3), so what the "
       "rewrite's analysis depended on cannot be checked against this build. Re-run the lmfuse tool over the "
       "sources (a build without LMFUSE_REWRITTEN_DIR writes lmfuse_rewritten/${TARGET}/).")
endif()
string(JSON record_count LENGTH "${unit_records}")
if(record_count GREATER 0)
  math(EXPR last "${record_count} - 1")
  foreach(i RANGE ${last})
    string(JSON record_path GET "${unit_records}" ${i} path)
    string(JSON record_digest GET "${unit_records}" ${i} sha256)
    if(IS_ABSOLUTE "${record_path}")
      set(unit_record_${record_digest} ${i})
    else()
      string(MD5 key "${record_path}")
      set(unit_record_${key} ${i})
    endif()
  endforeach()
endif()
# <out> = <real_source>'s key among the audit's units (see above).
function(unit_key real_source out)
  file(RELATIVE_PATH relative "${real_edit_root}" "${real_source}")
  if(relative MATCHES "^\\.\\./")
    file(SHA256 "${real_source}" key)
  else()
    string(MD5 key "${relative}")
  endif()
  set(${out} "${key}" PARENT_SCOPE)
endfunction()

# <out> = <text> with the characters that split or group CMake lists (`;`, `[`, `]`) spelled out.
function(list_safe text out)
  string(REPLACE ";" "<semicolon>" text "${text}")
  string(REPLACE "[" "<lbracket>" text "${text}")
  string(REPLACE "]" "<rbracket>" text "${text}")
  set(${out} "${text}" PARENT_SCOPE)
endfunction()

# Sets <prefix>_<NAME> (whitespace dropped, for the comparison: two preprocessors space tokens
# differently), <prefix>_line_<NAME> (as printed) and <prefix>_defined_<NAME> for every `#define NAME...` line
# of the -dM output in the variable <variable>, in the caller's scope (a macro: it is given the variable's
# name, since a macro pastes its arguments' text into its body).
macro(read_definitions variable prefix)
  list_safe("${${variable}}" _text)
  string(REPLACE "\n" ";" _lines "${_text}")
  foreach(_line IN LISTS _lines)
    if(_line MATCHES "^#define ([A-Za-z_$][A-Za-z0-9_$]*)(.*)$")
      set(_name "${CMAKE_MATCH_1}")
      string(REGEX REPLACE "[ \t]" "" ${prefix}_${_name} "${CMAKE_MATCH_1}${CMAKE_MATCH_2}")
      set(${prefix}_line_${_name} "${_line}")
      set(${prefix}_defined_${_name} ON)
    endif()
  endforeach()
endmacro()

# "`#define <text>`<suffix>", or "it undefined" for an empty <text>.
function(shown_definition text suffix out)
  list_safe("${text}" text)
  if(text STREQUAL "")
    set(${out} "it undefined" PARENT_SCOPE)
  else()
    set(${out} "`#define ${text}`${suffix}" PARENT_SCOPE)
  endif()
endfunction()

# Appends to <out> a line per macro that <unit> (compiled from <source> with <arguments> in <directory>)
# sees otherwise than the tool's analysis did (record #<index> of mirror.units), asking the build's own
# compiler (-dM -E) twice: how the unit ends, and how it starts (an empty unit under the same command: the
# flags and the compiler's own). A macro a library header defines is compared at the end only where that
# header is the one the tool read (the same file, the same digest): against another version of the library
# its definition may differ and the rewrite's calls are the runtime's own.
function(macro_mismatches source unit arguments directory index out)
  if(NOT directory)
    set(directory "${SOURCE_ROOT}")
  endif()
  set(empty "${OUT_DIR}/.database/empty.cpp")
  if(NOT EXISTS "${empty}")
    make_folder("${OUT_DIR}/.database")
    place_text("${empty}" "")
  endif()
  # One walk over the unit's records sorts them by how the build's compiler is asked about each:
  # - the feature tests (origin feature-test: __has_builtin(x) and the other built-in calls, defined() of a
  #   built-in macro, #elifdef / #elifndef) at the end of the unit, where a library's fallback is in effect (c10
  #   defines __has_feature(x) as 0 for a compiler without one): a wrapper includes the unit and then defines
  #   LMFUSE_FEATURE_TEST_<i> for each test whose answer here is the one the tool recorded;
  # - the __has_include tests (origin include-test) from the folder the build compiles the testing file from;
  # - every other macro (definitions) by how the unit ends and how it starts.
  string(JSON macros GET "${unit_records}" ${index} macros)
  string(JSON count LENGTH "${macros}")
  set(feature_tests "")
  set(feature_probe "")
  set(test_folders "")
  set(definitions "")
  if(count GREATER 0)
    math(EXPR last "${count} - 1")
    foreach(i RANGE ${last})
      string(JSON origin GET "${macros}" ${i} origin)
      if(origin STREQUAL "include-test")
        string(JSON tester GET "${macros}" ${i} file)
        include_test_folder("${tester}" folder)
        string(MD5 key "${folder}")
        if(NOT DEFINED tests_${key})
          list(APPEND test_folders "${folder}")
        endif()
        list(APPEND tests_${key} ${i})
        continue()
      elseif(NOT origin STREQUAL "feature-test")
        list(APPEND definitions ${i})
        continue()
      endif()
      string(JSON test GET "${macros}" ${i} name)
      string(JSON recorded GET "${macros}" ${i} definition)
      list(APPEND feature_tests ${i})
      set(mark "LMFUSE_FEATURE_TEST_${i}")
      if(test MATCHES "^#(elifdef|elifndef)$")
        set(operand "LMFUSE_FEATURE_PROBE_DEFINED")
        if(CMAKE_MATCH_1 STREQUAL "elifndef")
          set(operand "LMFUSE_FEATURE_PROBE_UNDEFINED")
        endif()
        string(APPEND feature_probe "#define LMFUSE_FEATURE_PROBE_DEFINED\n#ifdef LMFUSE_FEATURE_PROBE_UNDEFINED\n"
                                    "${test} ${operand}\n#define ${mark} 1\n#endif\n")
      elseif(recorded MATCHES "^-?[0-9]+$" AND test MATCHES "^defined\\(([A-Za-z_][A-Za-z0-9_]*)\\)$")
        string(APPEND feature_probe "#if (${test}) == (${recorded})\n#define ${mark} 1\n#endif\n")
      elseif(recorded MATCHES "^-?[0-9]+$" AND test MATCHES "^([A-Za-z_][A-Za-z0-9_]*)[ \t]*\\(")
        string(APPEND feature_probe "#if defined(${CMAKE_MATCH_1})\n#if (${test}) == (${recorded})\n"
                                    "#define ${mark} 1\n#endif\n#endif\n")
      endif()  # a value the tool could not evaluate ("?"): never marked, reported below
    endforeach()
  endif()
  foreach(probe IN ITEMS end start)
    set(input "${unit}")
    if(probe STREQUAL "start")
      set(input "${empty}")
    elseif(feature_tests)
      string(MD5 key "${unit}")
      set(input "${OUT_DIR}/.database/features-${key}.cpp")
      place_text("${input}" "#include \"${unit}\"\n${feature_probe}")
    endif()
    execute_process(COMMAND ${compiler} ${arguments} -dM -E "${input}" WORKING_DIRECTORY "${directory}"
                    RESULT_VARIABLE status OUTPUT_VARIABLE defined ERROR_VARIABLE errors)
    if(NOT status EQUAL 0)
      fail("${input} does not preprocess with ${unit}'s compile command:\n${errors}")
    endif()
    read_definitions(defined ${probe})
  endforeach()
  set(found "${${out}}")
  foreach(i IN LISTS feature_tests)
    if(NOT end_defined_LMFUSE_FEATURE_TEST_${i})
      string(JSON test GET "${macros}" ${i} name)
      string(JSON recorded GET "${macros}" ${i} definition)
      string(JSON tester GET "${macros}" ${i} file)
      if(test MATCHES "^#")
        string(APPEND found "\n  ${source}: `${test}` in ${tester} is no directive the build's compiler takes here, "
                            "but the rewrite was analysed where it was one")
      elseif(recorded STREQUAL "?")
        string(APPEND found "\n  ${source}: `${test}` in ${tester} could not be evaluated by the tool, so the build's "
                            "compiler cannot be checked to answer it as the analysis did")
      else()
        string(APPEND found "\n  ${source}: `${test}` in ${tester} is not ${recorded} here (or not known to the "
                            "build's compiler), but the rewrite was analysed where it was ${recorded}")
      endif()
    endif()
  endforeach()
  foreach(i IN LISTS definitions)
    string(JSON name GET "${macros}" ${i} name)
    string(JSON origin GET "${macros}" ${i} origin)
    string(JSON recorded ERROR_VARIABLE absent GET "${macros}" ${i} definition)
    if(absent)
      set(recorded "")
    endif()
    # Used by the project's files where it was defined otherwise than at the end (a header after the use
    # redefined or #undef'd it): what the build's compiler made of it there cannot be asked of it.
    string(JSON at_use_where ERROR_VARIABLE no_at_use GET "${macros}" ${i} at_use where)
    if(NOT no_at_use)
      string(JSON at_use_definition GET "${macros}" ${i} at_use definition)
      shown_definition("${at_use_definition}" "" at_use_shown)
      shown_definition("${recorded}" "" end_shown)
      string(APPEND found "\n  ${source}: ${name} is ${at_use_shown} where ${at_use_where} uses it, and a header "
                          "redefines or #undefs it after that use (${end_shown} at the end of the unit): the build "
                          "cannot check that its compiler defines it there as the analysis saw (define it once, or "
                          "leave it as it is after its use)")
    endif()
    # How the unit ends.
    set(compare ON)
    if(origin STREQUAL "library")
      string(JSON header GET "${macros}" ${i} header)
      string(JSON header_digest GET "${macros}" ${i} header_sha256)
      set(digest "")
      if(EXISTS "${header}")
        file(SHA256 "${header}" digest)
      endif()
      if(NOT digest STREQUAL header_digest)
        set(compare OFF)
      endif()
    endif()
    list_safe("${recorded}" expected)
    string(REGEX REPLACE "[ \t]" "" expected "${expected}")
    if(compare AND NOT ("${end_${name}}" STREQUAL "${expected}" AND
                        (end_defined_${name} OR origin STREQUAL "undefined")))
      set(here "undefined")
      if(end_defined_${name})
        set(here "`${end_line_${name}}`")
      endif()
      shown_definition("${recorded}" " (${origin})" there)
      string(APPEND found "\n  ${source}: ${name} is ${here} here, but the rewrite was analysed with ${there}")
    endif()
    # How the unit starts: what the flags and the compiler define before any file (a file may #undef a
    # flag after testing it, and the end would not tell).
    string(JSON predefined ERROR_VARIABLE absent GET "${macros}" ${i} predefined)
    if(absent)
      set(predefined "")
      if(origin MATCHES "^(command-line|built-in)$")
        set(predefined "${recorded}")
      endif()
    endif()
    list_safe("${predefined}" expected)
    string(REGEX REPLACE "[ \t]" "" expected "${expected}")
    if(NOT "${start_${name}}" STREQUAL "${expected}")
      set(here "undefined")
      if(start_defined_${name})
        set(here "`${start_line_${name}}`")
      endif()
      shown_definition("${predefined}" "" there)
      string(APPEND found "\n  ${source}: ${name} is ${here} before any file here (a flag or the compiler), "
                          "but the rewrite was analysed with ${there} before any file")
    endif()
  endforeach()
  # The __has_include tests: each folder's tests in one probe, preprocessed under the unit's command with
  # that folder searched first for quoted names, as it is for the file that makes them.
  foreach(folder IN LISTS test_folders)
    string(MD5 key "${folder}")
    set(probe_text "")
    foreach(i IN LISTS tests_${key})
      string(JSON name GET "${macros}" ${i} name)
      string(APPEND probe_text "#if ${name}\n#define LMFUSE_INCLUDE_TEST_${i} 1\n#else\n"
                               "#define LMFUSE_INCLUDE_TEST_${i} 0\n#endif\n")
    endforeach()
    set(probe "${OUT_DIR}/.database/include-tests-${key}.cpp")
    place_text("${probe}" "${probe_text}")
    execute_process(COMMAND ${compiler} -iquote "${folder}" ${arguments} -dM -E "${probe}"
                    WORKING_DIRECTORY "${directory}" RESULT_VARIABLE status OUTPUT_VARIABLE defined ERROR_VARIABLE errors)
    if(NOT status EQUAL 0)
      fail("the __has_include tests of ${unit} do not preprocess with its compile command:\n${errors}")
    endif()
    read_definitions(defined test)
    foreach(i IN LISTS tests_${key})
      string(JSON name GET "${macros}" ${i} name)
      string(JSON recorded GET "${macros}" ${i} definition)
      string(JSON tester GET "${macros}" ${i} file)
      if(NOT "${test_LMFUSE_INCLUDE_TEST_${i}}" STREQUAL "LMFUSE_INCLUDE_TEST_${i}${recorded}")
        set(here "false")
        set(there "true")
        if(recorded STREQUAL "0")
          set(here "true")
          set(there "false")
        endif()
        string(APPEND found "\n  ${source}: `${name}` in ${tester} is ${here} here, but the rewrite was analysed "
                            "where it was ${there}")
      endif()
    endforeach()
  endforeach()
  set(${out} "${found}" PARENT_SCOPE)
endfunction()

# <out> = the folder the build compiles <file> (a path under EDIT_ROOT, as the audit records a file that
# makes an __has_include test) from: its rewritten copy's where the mirror holds one, else its own.
function(include_test_folder file out)
  if(IS_ABSOLUTE "${file}")
    set(path "${file}")
  elseif(EXISTS "${OUT_DIR}/${file}")
    set(path "${OUT_DIR}/${file}")
  else()
    set(path "${real_edit_root}/${file}")
  endif()
  get_filename_component(folder "${path}" DIRECTORY)
  set(${out} "${folder}" PARENT_SCOPE)
endfunction()

# Every unit, compiled as the build compiles it (its own command), must read the rewritten copy of each
# patched header, never the original, and the same files of the project as its original would (an include
# the mirror resolves elsewhere compiles other code); its header list also feeds the depfile.
set(dependencies "")
set(bypassing "")
set(twice "")
set(elsewhere "")
set(demoted "")
set(macros_differ "")
set(language_flags_dropped "")
# <out> (and <out>_directory) = how the build compiles <unit>: its command, else the flags shared by all.
function(unit_command unit out)
  command_of("${unit}" arguments)
  if(NOT arguments)
    set(arguments ${flags})
  endif()
  set(${out} "${arguments}" PARENT_SCOPE)
  set(${out}_directory "${arguments_directory}" PARENT_SCOPE)
  set(${out}_compiler "${arguments_compiler}" PARENT_SCOPE)
endfunction()

# What a rewritten copy reads beyond its original: the header the rewrite includes (the rule set's
# replacement.include) and what that includes.
set(pattern_text "")
if(PATTERNS AND EXISTS "${PATTERNS}")
  file(READ "${PATTERNS}" pattern_text)
endif()
string(REGEX MATCH "\nreplacement:[ \t]*\n([ \t]*#[^\n]*\n)*[ \t]+include:[ \t]*([^ \t\n#]+)" _ "${pattern_text}")
set(runtime_reads "")
if(CMAKE_MATCH_2)
  make_folder("${OUT_DIR}/.database")
  place_text("${OUT_DIR}/.database/rewrite-include.cpp" "#include <${CMAKE_MATCH_2}>\n")
  list(GET SOURCES 0 first_source)
  unit_of("${first_source}" first_unit)
  unit_command("${first_unit}" include_flags)
  files_read("${OUT_DIR}/.database/rewrite-include.cpp" "${include_flags}" "${include_flags_directory}" included)
  resolved_files("${included}" runtime_reads)
endif()
foreach(source IN LISTS SOURCES)
  get_filename_component(real_source "${source}" REALPATH)
  unit_of("${source}" unit)
  unit_command("${unit}" unit_flags)
  files_read("${unit}" "${unit_flags}" "${unit_flags_directory}" headers ${unit_flags_compiler})
  set(reads_rewritten OFF)
  if(real_source IN_LIST patched_files)
    set(reads_rewritten ON)
  endif()
  foreach(header IN LISTS headers)
    # Compared by real path: the audit names files as the tool read them, links resolved, and a unit may
    # reach the same file through a linked folder.
    get_filename_component(real_header "${header}" REALPATH)
    if(real_header IN_LIST patched_files AND NOT real_header STREQUAL real_source)
      # A precompiled header is built from the originals it includes, before any copy.
      set(through "")
      set(precompiled ${headers})
      list(FILTER precompiled INCLUDE REGEX "/cmake_pch\\.[^/]*$")
      if(precompiled)
        list(GET precompiled 0 precompiled)
        string(CONCAT through " (through the target's precompiled headers, ${precompiled}, which are built "
                              "from the originals: take the header out of target_precompile_headers(), or set "
                              "the target's DISABLE_PRECOMPILE_HEADERS)")
      endif()
      list(APPEND bypassing "\n  ${source} includes the original ${header}, not its rewritten copy${through}")
    endif()
    # A mirrored file stands for its original (the mirror is this step's output, never its input).
    file(RELATIVE_PATH in_mirror "${OUT_DIR}" "${header}")
    if(NOT in_mirror MATCHES "^\\.\\./")
      set(header "${EDIT_ROOT}/${in_mirror}")
      get_filename_component(real_original "${header}" REALPATH)
      if(real_original IN_LIST patched_files)
        set(reads_rewritten ON)
      endif()
    endif()
    string(REPLACE " " "\\ " header "${header}")
    string(APPEND dependencies " \\\n  ${header}")
  endforeach()
  # A unit must never read the original of a file the mirror holds a copy of: beside the copy it reads that
  # file twice (a wrapper's `#include_next` from its copy finds the original wrapper next on the include
  # path, which runs again), and alone it compiles the original rather than the copy the tool analysed (an
  # include by a path that skips the mirror: absolute, or relative to a folder outside it). The comparison
  # of a copy's reads with its original's (below) cannot tell, since a mirrored file stands for its original
  # there. A unit compiled as it is (a source outside EDIT_ROOT) may read an original that is not patched (the
  # check above names a patched one), but never both it and its copy. lmfuse's own headers, which the
  # rewrite includes, are left out.
  set(copies_read "")
  foreach(header IN LISTS headers)
    file(RELATIVE_PATH in_mirror "${OUT_DIR}" "${header}")
    if(NOT in_mirror MATCHES "^\\.\\./")
      list(APPEND copies_read "${in_mirror}")
    endif()
  endforeach()
  foreach(header IN LISTS headers)
    file(RELATIVE_PATH in_mirror "${OUT_DIR}" "${header}")
    if(NOT in_mirror MATCHES "^\\.\\./")
      continue()
    endif()
    get_filename_component(real_header "${header}" REALPATH)
    if(NOT real_header IN_LIST mirrored_originals OR real_header IN_LIST runtime_reads OR
       (real_header IN_LIST patched_files AND NOT real_header STREQUAL real_source))
      continue()  # not mirrored, lmfuse's own, or a patched original (named above, as bypassing)
    endif()
    file(RELATIVE_PATH relative "${real_edit_root}" "${real_header}")
    if(relative IN_LIST copies_read)
      list(APPEND twice "\n  ${source} reads both ${OUT_DIR}/${relative} and its original ${header} (an "
                        "`#include_next` in the copy, or an include by a path that skips the mirror, reaches the "
                        "original): the file's code runs twice")
    elseif(NOT unit STREQUAL source)
      list(APPEND twice "\n  ${source}'s copy reads the original ${header}, not its copy ${OUT_DIR}/${relative} (an "
                        "`#include_next`, or an include by a path that skips the mirror: absolute, or relative to a "
                        "folder outside it)")
    endif()
  endforeach()
  # Each unit's command adds the mirror's folders in front and each source's folder last (-idirafter, the
  # fallback of a relative include that leaves the mirror). A folder its command names both as a fallback
  # and otherwise (-I, -isystem, -iquote) is searched only in its -idirafter place by GCC and Clang, behind
  # every other include folder: the unit's includes could resolve elsewhere than its original's.
  include_folders("${unit_flags}" "${unit_flags_directory}" "idirafter" fallbacks)
  include_folders("${unit_flags}" "${unit_flags_directory}" "I|isystem|iquote" searched)
  foreach(folder IN LISTS source_folders)
    get_filename_component(real_folder "${folder}" REALPATH)
    if(real_folder IN_LIST fallbacks AND real_folder IN_LIST searched)
      list(APPEND demoted "\n  ${source}: ${folder}")
    endif()
  endforeach()
  if(NOT unit STREQUAL source AND unit_flags_directory)
    without_mirror("${unit_flags}" original_flags)
    files_read("${source}" "${original_flags}" "${unit_flags_directory}" original_headers ${unit_flags_compiler})
    # Every file, the project's and the libraries': a library header resolved from another folder is other
    # code as well.
    resolved_files("${headers}" copy_reads)
    resolved_files("${original_headers}" original_reads)
    set(only_copy ${copy_reads})
    list(REMOVE_ITEM only_copy ${original_reads} ${runtime_reads})
    set(only_original ${original_reads})
    list(REMOVE_ITEM only_original ${copy_reads})
    # The first few of each: a header found elsewhere brings its own includes along.
    set(shown 0)
    foreach(file IN LISTS only_copy)
      math(EXPR shown "${shown} + 1")
      if(shown LESS_EQUAL 5)
        list(APPEND elsewhere "\n  ${source}'s copy reads ${file}, which the original does not")
      endif()
    endforeach()
    set(shown 0)
    foreach(file IN LISTS only_original)
      math(EXPR shown "${shown} + 1")
      if(shown LESS_EQUAL 5)
        list(APPEND elsewhere "\n  ${source}'s copy does not read ${file}, which the original does")
      endif()
    endforeach()
    list(LENGTH only_copy more_copy)
    list(LENGTH only_original more_original)
    if(more_copy GREATER 5 OR more_original GREATER 5)
      list(APPEND elsewhere "\n  (${more_copy} files read by ${source}'s copy only, ${more_original} by its original only)")
    endif()
  endif()
  if(reads_rewritten)
    unit_key("${real_source}" key)
    if(DEFINED unit_record_${key})
      set(mismatches "")
      macro_mismatches("${source}" "${unit}" "${unit_flags}" "${unit_flags_directory}" ${unit_record_${key}}
                       mismatches)
      # Flags the tool's parse dropped (Clang does not know them) that may change how this compiler reads the
      # unit: the analysis read another language.
      string(JSON dropped ERROR_VARIABLE no_dropped GET "${unit_records}" ${unit_record_${key}} dropped_flags)
      if(NOT no_dropped)
        string(JSON count LENGTH "${dropped}")
        math(EXPR last "${count} - 1")
        foreach(i RANGE ${last})
          string(JSON flag GET "${dropped}" ${i})
          string(APPEND language_flags_dropped "\n  ${source}: ${flag}")
        endforeach()
      endif()
      # A unit that starts with the target's precompiled headers reads what they include before any file of
      # its own, compiled from the originals (or, through the mirror's folders, from copies made for another
      # analysis): that, not a flag, is where such macros come from.
      set(precompiled ${unit_flags})
      list(FILTER precompiled INCLUDE REGEX "cmake_pch\\.[^/]*$")
      if(mismatches AND precompiled)
        list(GET precompiled 0 precompiled)
        string(APPEND macros_differ "\n  ${source} starts with the target's precompiled headers (${precompiled}), "
                                    "which the rewrite's analysis did not read first: take the rewritten header out "
                                    "of target_precompile_headers(), or set the target's DISABLE_PRECOMPILE_HEADERS")
      endif()
      string(APPEND macros_differ "${mismatches}")
    else()
      string(APPEND macros_differ "\n  ${source} reads a rewritten file here, but the tool saw it read none "
                                  "(it was analysed under other flags)")
    endif()
  endif()
endforeach()
if(bypassing)
  fail("a translation unit would compile the original of a patched header (its include path reaches the "
       "original first: add the header's folder to the target's own include directories, or include it with "
       "quotes from a folder under EDIT_ROOT):${bypassing}")
endif()
if(demoted)
  fail("a unit's compile command names the folder of one of the target's sources both as an include folder "
       "(-I, -isystem, -iquote) and as the fallback lmfuse_rewrite adds for it (-idirafter, searched last): "
       "the compiler then searches it only last, so the rewritten copy could include other files than its "
       "original. lmfuse_rewrite adds no fallback for a folder among the target's INCLUDE_DIRECTORIES, spelt "
       "as they are: give the folder with target_include_directories() (not as a flag in COMPILE_OPTIONS "
       "or CMAKE_CXX_FLAGS, not through a link or `..`):${demoted}")
endif()
if(elsewhere)
  fail("a rewritten copy would include other files than its original (an include resolved from the mirror, "
       "or through the fallback folders lmfuse_rewrite adds, finds another file first):${elsewhere}")
endif()
if(twice)
  fail("a unit compiled from the rewritten copies reads the original of a file the mirror holds a copy of, so it "
       "would compile that file twice, or the original rather than the copy the tool analysed. The mirror puts "
       "each include folder under EDIT_ROOT in front of its original: an `#include_next` from a copy continues "
       "with the original folder, and a path that skips the mirror reaches the original. Keep a header that "
       "wraps another of the same name with `#include_next` out of EDIT_ROOT (or put the wrapped header's folder "
       "under EDIT_ROOT too, so that its copy comes next), and include the project's files through the include "
       "folders or relative to the including file:${twice}")
endif()
if(language_flags_dropped)
  fail("the lmfuse tool's parse (Clang) dropped flags of this build that Clang does not know and that may change "
       "how the build's compiler reads the program (not only what it warns about or how it optimises), so the "
       "rewrite was analysed in another language than this build compiles: remove them from the target's flags, "
       "or build the target with Clang:${language_flags_dropped}")
endif()
if(macros_differ)
  fail("this build compiles the rewritten code with macros or headers the rewrite was not analysed with (another "
       "flag, compiler, configuration or include path than the lmfuse tool's), so it could compute otherwise than "
       "the tool found: "
       "build with the flags the sources were rewritten with, or re-run the lmfuse tool under these:${macros_differ}")
endif()

# Every other unit the build compiles into the target (a source given as a generator expression, or added
# after lmfuse_rewrite(): the compile database lists it, the call never saw it) must read nothing of the
# project: a model it includes would compile as the original, or beside a rewritten copy of itself.
lines_of("${UNITS_FILE}" known_units)
set(unseen "")
# <unit> (a source, or one that a unity source includes, compiled with that unity source's <arguments>) is one
# the call never saw: it must read nothing under EDIT_ROOT.
macro(check_unseen unit arguments directory unit_compiler)
  files_read("${unit}" "${arguments}" "${directory}" all_reads ${unit_compiler})
  project_files("${all_reads}" reads)
  if(reads)
    # Name a header it reads where there is one: the unit itself may be the only file of the project.
    get_filename_component(real_entry "${unit}" REALPATH)
    set(headers_read ${reads})
    list(REMOVE_ITEM headers_read "${real_entry}")
    if(headers_read)
      list(GET headers_read 0 first_read)
      list(APPEND unseen "\n  ${unit} (it reads ${first_read})")
    else()
      list(APPEND unseen "\n  ${unit} (it lies under EDIT_ROOT)")
    endif()
  endif()
endmacro()
target_units(units)
foreach(entry_file IN LISTS units)
  if(entry_file IN_LIST known_units OR entry_file IN_LIST SOURCES)
    continue()
  endif()
  command_of("${entry_file}" entry_flags)
  if(NOT entry_file MATCHES "/CMakeFiles/${target_pattern}\\.dir/Unity/")
    check_unseen("${entry_file}" "${entry_flags}" "${entry_flags_directory}" "${entry_flags_compiler}")
    continue()
  endif()
  # A unity source compiles the target's sources that are not copies (those the call saw were checked above)
  # and any other source of the target that unity builds take in (one the call never saw): each of those is a
  # unit of its own here, with the unity source's command. The unity source must not read the original of a
  # patched file either (code CMake puts before or after each include, UNITY_BUILD_CODE_BEFORE_INCLUDE).
  file(STRINGS "${entry_file}" unity_lines ENCODING UTF-8 REGEX "^#include \"")
  foreach(line IN LISTS unity_lines)
    string(REGEX REPLACE "^#include \"(.*)\"$" "\\1" included "${line}")
    if(NOT included IN_LIST known_units AND NOT included IN_LIST SOURCES)
      check_unseen("${included}" "${entry_flags}" "${entry_flags_directory}" "${entry_flags_compiler}")
    endif()
  endforeach()
  files_read("${entry_file}" "${entry_flags}" "${entry_flags_directory}" unity_reads ${entry_flags_compiler})
  foreach(header IN LISTS unity_reads)
    get_filename_component(real_header "${header}" REALPATH)
    if(real_header IN_LIST patched_files)
      list(APPEND unseen "\n  ${entry_file} (it reads the original ${header}, not its rewritten copy)")
    endif()
  endforeach()
endforeach()
file(REMOVE "${DEPFILE}.part")
if(unseen)
  fail("the target compiles units that lmfuse_rewrite() did not see, and they read files of the project under "
       "EDIT_ROOT ${EDIT_ROOT}, which would compile as the originals: list each as a plain source of the target "
       "before calling lmfuse_rewrite() (not through a generator expression, not added after the call):${unseen}")
endif()
# The step runs again when a file a unit reads changes or goes; a carried mirror's copies count too.
if(MODE STREQUAL "carried")
  foreach(relative IN LISTS listed)
    string(REPLACE " " "\\ " path "${FROM_DIR}/${relative}")
    string(APPEND dependencies " \\\n  ${path}")
  endforeach()
endif()
# A file of the mirror saved while the step ran, after the tool read it: the copies are of the contents before
# the save, and the build tool may not see the save (Ninja takes the time of the outputs written since, which
# is later). The step fails, leaving the stamp absent, so the next build runs it again on the files as they are.
if(NOT MODE STREQUAL "carried")
  string(JSON mirror_root ERROR_VARIABLE no_root GET "${audit}" mirror root)
  string(JSON mirror_count ERROR_VARIABLE no_files LENGTH "${audit}" mirror files)
  set(saved "")
  if(NOT no_root AND NOT no_files AND mirror_count GREATER 0)
    math(EXPR last "${mirror_count} - 1")
    foreach(i RANGE ${last})
      string(JSON relative GET "${audit}" mirror files ${i} path)
      string(JSON recorded GET "${audit}" mirror files ${i} sha256)
      set(original "${mirror_root}/${relative}")
      set(digest "(gone)")
      if(EXISTS "${original}" AND NOT IS_DIRECTORY "${original}")
        file(SHA256 "${original}" digest)
      endif()
      if(NOT digest STREQUAL recorded)
        string(APPEND saved "\n  ${original}")
      endif()
    endforeach()
  endif()
  if(saved)
    fail("files changed while the rewrite step ran, after the lmfuse tool read them, so its copies are of what "
         "they held before:${saved}\nBuild again: the step runs again on the files as they are now.")
  endif()
endif()
# The depfile names the command's first output, the stamp (LmfuseRewrite.cmake).
string(REPLACE " " "\\ " depfile_target "${STAMP}")
place_text("${DEPFILE}" "${depfile_target}: ${dependencies}\n")
# The audit, then the stamp, last: until the stamp is in place, the step's first output is missing (removed when
# it started), so a step stopped before (a failed write, the build killed) runs again.
lmfuse_try_place_copy("${result_audit}" "${AUDIT}" why)
if(why)
  set(AUDIT_UNWRITABLE ON)  # fail() does not try again; the previous audit is left whole
  fail("${why}")
endif()
# Done: the stamp, the command's first output, says so (removed when the step started).
place_stamp()
