# lmfuse_rewrite(TARGET <target> [SOURCES <file>...] [EDIT_ROOT <dir>] [EXTRA_ARGS <flag>...]
#                [AUDIT <path>] [EXPECT_PATCHED <n>] [PATTERNS <file>])
#
# Compiles every C++ translation unit of <target> from an lmfuse-rewritten mirror of EDIT_ROOT:
# - at build time the lmfuse tool runs over all of the target's C++ sources (SOURCES, when given, are
#   added to them) with the target's own flags, and mirrors every file under EDIT_ROOT that they read
#   (default: the project's source dir) into ${CMAKE_CURRENT_BINARY_DIR}/lmfuse_rewritten/<target>/:
#   rewritten where a site was patched, a plain copy otherwise, all with #line directives so diagnostics
#   point at the originals; the originals are never touched;
# - the target compiles the mirrored copies of its sources, and finds the mirrored headers first: a quote
#   include resolves next to the copy, and every include directory of the target (and of the targets it
#   links when lmfuse_rewrite is called) that lies under EDIT_ROOT gets its mirror put in front. So every
#   unit that includes a patched header compiles the rewritten one; the step checks that with each unit's
#   own compile command and fails naming any unit that would still read an original patched header (a
#   header among the target's precompiled headers is one: they are built from the originals), or whose
#   copy would read other files than its original;
# - each copy compiles as its original would: it takes the original's source properties set before the
#   call (COMPILE_DEFINITIONS, COMPILE_OPTIONS, COMPILE_FLAGS, INCLUDE_DIRECTORIES, ...), stays out of
#   unity builds, and the tool parses each source with its copy's own compile command (from the compile
#   database; with a generator that writes none, with the target's flags and the configuration's);
# - every unit that reads a rewritten file must see each macro the project's files name (tested with
#   #ifdef/#if or expanded, the audit's mirror.units) as the tool saw it: the step asks the build's own
#   compiler, with the unit's own command (`-dM -E`), and fails naming the unit and the macro where a flag,
#   the configuration or the compiler (`__clang__`) defines it otherwise, since the copy would then compile
#   other code than was analysed (a macro from a library header is compared where that header is the one
#   the tool read);
# - every source must be visible to this call: the step fails naming any other unit the build compiles
#   into the target (a source given as a generator expression, or added after this call), in any language
#   (C++, C, CUDA: each asked with its own compiler's command), that reads a file under EDIT_ROOT, since it
#   would compile the originals;
# - a unit compiled from the copies must read no original of a file the mirror holds a copy of (an
#   `#include_next` in a mirrored wrapper continues with the wrapper's original folder, and reads the
#   original wrapper again; an include by a path that skips the mirror reads the original): the step fails
#   naming the unit and the file;
# - every other target linked into one binary with <target> (it links <target>, or an executable or shared
#   library links both; a target named anywhere in a link item's generator expression, or whose library
#   file a path or -l<name> may name, counts as linked, since the expression's value is not known when
#   configuring) gets a build-time check, made at the end of configuring, that none of its units
#   compiles the original of a header <target>'s rewrite patched, nor, rewritten itself, another copy of it
#   (its own rewrite under other flags): the binary would hold two definitions of the header's inline
#   functions, and the linker keeps either. Its build fails naming the unit (call lmfuse_rewrite on it
#   too, or include the header only from <target>); lmfuse's own targets (LMFUSE_RUNTIME) are not checked;
# - sources outside EDIT_ROOT (e.g. generated in the build tree) are compiled as they are; a site in one
#   of them is an error of the tool ("lies outside the source root"): set EDIT_ROOT to a folder holding it;
# - EXTRA_ARGS are flags for the tool's parse only (like clang-tidy's --extra-arg); flags Clang does not
#   know (GCC-only options) are dropped by the tool with a note;
# - it reruns only when a source, a header they include (depfile, Ninja and Makefiles), the pattern set,
#   the tool (the in-tree target's file, or the installed executable) or the target's flags change;
# - every file the step writes (copies, audit, depfile, stamps, lists) goes to a temporary beside it that
#   is renamed into place once written whole and checked: a failed write (a full disk) fails the build
#   naming the file and leaves the previous one intact;
# - a copy searches the include folders in its original's order: a source's folder gets the -idirafter
#   fallback only where the target's include directories do not hold it, and the step fails where a unit's
#   command names a source's folder both ways, or where a copy reads any file its original does not (or
#   the reverse);
# - it needs a single-configuration generator: with a multi-config one (Ninja Multi-Config, Visual Studio,
#   Xcode) configuring fails, since one analysis, mirror and audit would serve every configuration;
# - EXPECT_PATCHED is the tool's --expect-patched (sites patched or already patched; exit 3): the build
#   fails with the tool's list of every site and its reason;
# - the audit JSON goes to AUDIT (default: lmfuse_rewritten/<target>/audit.json) and is always the last
#   run's: a failed run leaves its own audit, or none (or, where its own cannot be written, the previous one,
#   whole, and the failure says so);
# - <target> links lmfuse::torch, and the tool is given its include folders (--library-include): a header of
#   the program's read as one of the library's (its own lmfuse/torch.h first on the include path) fails the
#   build, naming it; the compile database (compile_commands.json) also lists the original
#   sources with the target's flags (through the never-built object library <target>_lmfuse_originals),
#   so `lmfuse -p <build dir> <source>` works on them.
#
# Where the tool cannot run (a machine without Clang), set LMFUSE_REWRITTEN_DIR to a folder holding a
# mirror made elsewhere: <dir>/<target>/<path relative to EDIT_ROOT> plus <dir>/<target>/audit.json (a
# copy of lmfuse_rewritten/ from a build that ran the tool). The audit lists every copy with the SHA-256
# of the original it was made from (lmfuse-audit/2 and later, `mirror`), and the mirror is compiled only while it
# was made from the sources as they are:
# - configuring fails when the audit is missing or records no digests (nothing could tell the copies from
#   stale ones), when it lists no copy of a source under EDIT_ROOT, or when a copy or original it lists
#   does not exist;
# - at build time, before any copy reaches the build tree, the step checks every listed original under
#   EDIT_ROOT against its digest and fails naming each one changed or gone since, each listed copy
#   missing from the mirror, and each file of the mirror the audit does not list (the bookkeeping of the
#   build that made it aside); the fix is to re-run the tool where Clang is available and carry the new
#   mirror. A failed check leaves no copy of a source and no audit, so the next build checks again;
# - then every unit is checked as in the tool's own mode (above): the rewritten copies it reads, the project
#   files it reads against its original's, the macros the analysis depended on against this build's
#   compiler and flags (a mirror made under other flags, `-DSOFTCAP` or another build type whose NDEBUG
#   the model tests, is refused naming the macro; one made against another version of a library is
#   not compared on that library's macros), and no unseen unit reading the project's files;
# - the check reruns when the audit, a listed copy or any listed original (a header too) changes or goes.
include_guard(GLOBAL)

set(LMFUSE_REWRITTEN_DIR "" CACHE PATH
    "Mirror made elsewhere (<dir>/<target>/<relative path>, <dir>/<target>/audit.json), compiled instead of running the lmfuse tool")
set(_LMFUSE_REWRITE_STEP "${CMAKE_CURRENT_LIST_DIR}/LmfuseRewriteStep.cmake" CACHE INTERNAL "")

include("${CMAKE_CURRENT_LIST_DIR}/LmfuseWriteFile.cmake")

# Writes <content> to <path> whole or not at all (on every configure, as file(WRITE) does: the step reruns
# after each, which is how it sees a change of a source's own properties).
function(_lmfuse_write_list path content)
  lmfuse_try_place_text("${path}" "${content}" why)
  if(why)
    message(FATAL_ERROR "lmfuse_rewrite: ${why}")
  endif()
endfunction()

# The tool and the pattern set: the in-tree targets, or what lmfuse-config.cmake found.
# <path> = how the build launches target's compiler, one line each: the compile rule's launcher
# (RULE_LAUNCH_COMPILE: the target's, else its folder's, else the global one; a command line) and the
# compiler launcher (CXX_COMPILER_LAUNCHER, a list: one word a line), as the build has them when it is
# generated. The step runs its checks of a unit's compile command through them: a launcher may add flags
# of its own (a definition the model tests), which the compile database does not show.
function(_lmfuse_launcher_file target path)
  get_property(folder_rule DIRECTORY PROPERTY RULE_LAUNCH_COMPILE)
  get_property(global_rule GLOBAL PROPERTY RULE_LAUNCH_COMPILE)
  if(NOT folder_rule)
    set(folder_rule "${global_rule}")
  endif()
  set(rule "$<TARGET_PROPERTY:${target},RULE_LAUNCH_COMPILE>")
  file(GENERATE OUTPUT "${path}" CONTENT
"rule $<IF:$<BOOL:${rule}>,${rule},${folder_rule}>
$<$<BOOL:$<TARGET_PROPERTY:${target},CXX_COMPILER_LAUNCHER>>:word $<JOIN:$<TARGET_PROPERTY:${target},CXX_COMPILER_LAUNCHER>,
word >
>")
endfunction()

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

# The target's C++ (and CUDA) units, absolute: sources whose LANGUAGE says so, or whose extension CMake compiles
# as C++ (CMAKE_CXX_SOURCE_FILE_EXTENSIONS: `.cpp`, `.CPP`, `.C`, ...) or as CUDA; not HEADER_FILE_ONLY ones,
# which are included by a unit rather than compiled.
function(_lmfuse_cxx_sources target out)
  get_target_property(sources "${target}" SOURCES)
  get_target_property(source_dir "${target}" SOURCE_DIR)
  set(extensions ${CMAKE_CXX_SOURCE_FILE_EXTENSIONS} cu)
  set(result "")
  foreach(source IN LISTS sources)
    if(source MATCHES "\\$<")
      continue()
    endif()
    get_filename_component(absolute "${source}" ABSOLUTE BASE_DIR "${source_dir}")
    get_source_file_property(language "${absolute}" TARGET_DIRECTORY "${target}" LANGUAGE)
    get_source_file_property(header_only "${absolute}" TARGET_DIRECTORY "${target}" HEADER_FILE_ONLY)
    get_filename_component(extension "${source}" LAST_EXT)
    string(REGEX REPLACE "^\\." "" extension "${extension}")
    if(header_only)
      continue()
    endif()
    if(language MATCHES "^(CXX|CUDA)$" OR (NOT language AND extension IN_LIST extensions))
      list(APPEND result "${absolute}")
    endif()
  endforeach()
  set(${out} "${result}" PARENT_SCOPE)
endfunction()

# The include directories of the target and of the targets of this build it links directly (as set so far;
# not lmfuse's own), absolute.
function(_lmfuse_include_dirs target out)
  get_target_property(source_dir "${target}" SOURCE_DIR)
  get_target_property(dirs "${target}" INCLUDE_DIRECTORIES)
  get_target_property(links "${target}" LINK_LIBRARIES)
  foreach(link IN LISTS links)
    if(TARGET "${link}")
      get_target_property(imported "${link}" IMPORTED)
      get_target_property(runtime "${link}" LMFUSE_RUNTIME)  # lmfuse's own (the call links lmfuse::torch)
      if(NOT imported AND NOT runtime)
        get_target_property(interface "${link}" INTERFACE_INCLUDE_DIRECTORIES)
        if(interface)
          list(APPEND dirs ${interface})
        endif()
      endif()
    endif()
  endforeach()
  set(result "")
  foreach(dir IN LISTS dirs)
    if(dir MATCHES "^\\$<BUILD_INTERFACE:([^>]*)>$")
      set(dir "${CMAKE_MATCH_1}")
    endif()
    if(dir AND NOT dir MATCHES "\\$<")
      get_filename_component(dir "${dir}" ABSOLUTE BASE_DIR "${source_dir}")
      list(APPEND result "${dir}")
    endif()
  endforeach()
  list(REMOVE_DUPLICATES result)
  set(${out} "${result}" PARENT_SCOPE)
endfunction()

# <out> = the mirror's counterpart (under <out_dir>) of each of the target's include folders (see
# _lmfuse_include_dirs) that lies under <real_root>: the folders a copy's includes search before the originals'.
# <out>_originals = those include folders, in the same order.
function(_lmfuse_mirror_dirs target real_root out_dir out)
  _lmfuse_include_dirs("${target}" include_dirs)
  set(mirror_dirs "")
  set(originals "")
  foreach(dir IN LISTS include_dirs)
    string(FIND "${dir}/" "${out_dir}/" in_mirror)
    if(in_mirror EQUAL 0)  # the mirror's own folders, once the call has added them
      continue()
    endif()
    _lmfuse_under_root("${dir}" "${real_root}" relative)
    if(relative)
      list(APPEND mirror_dirs "${out_dir}/${relative}")
      list(APPEND originals "${dir}")
    endif()
  endforeach()
  set(${out} "${mirror_dirs}" PARENT_SCOPE)
  set(${out}_originals "${originals}" PARENT_SCOPE)
endfunction()

# <out> = the path of <path> relative to <real_root> (an EDIT_ROOT with links resolved), by real paths as
# the tool mirrors them: "." for the root itself, "" when it does not lie under it.
function(_lmfuse_under_root path real_root out)
  get_filename_component(real_path "${path}" REALPATH)
  file(RELATIVE_PATH relative "${real_root}" "${real_path}")
  if(relative STREQUAL "")
    set(relative ".")
  elseif(relative MATCHES "^\\.\\.(/|$)" OR IS_ABSOLUTE "${relative}")
    set(relative "")
  endif()
  set(${out} "${relative}" PARENT_SCOPE)
endfunction()

# A configure error of LMFUSE_REWRITTEN_DIR (the message in pieces, joined), with the one way out.
function(_lmfuse_carried_error target)
  string(CONCAT message ${ARGN})
  message(FATAL_ERROR "lmfuse_rewrite(TARGET ${target}): ${message}: re-run the lmfuse tool over the target's "
                      "sources where Clang is available (a build without LMFUSE_REWRITTEN_DIR writes "
                      "lmfuse_rewritten/${target}/) and carry that folder here")
endfunction()

# <out> = the paths (relative to EDIT_ROOT) of the copies a carried audit lists in its `mirror` member,
# which an lmfuse that writes lmfuse-audit/2 records for every --out-dir run. An audit that is missing or
# has no such list is a configure error: nothing could tell the copies from stale ones.
function(_lmfuse_carried_listing target audit_file out)
  if(NOT EXISTS "${audit_file}")
    _lmfuse_carried_error("${target}" "LMFUSE_REWRITTEN_DIR holds no audit ${audit_file}, so its copies "
                                      "cannot be checked against the sources")
  endif()
  file(READ "${audit_file}" text)
  string(JSON count ERROR_VARIABLE error LENGTH "${text}" mirror files)
  if(error)
    string(JSON schema ERROR_VARIABLE no_schema GET "${text}" schema)
    _lmfuse_carried_error("${target}" "the audit ${audit_file} (schema '${schema}') records no digest of the "
                                      "originals its copies were made from (lmfuse-audit/2 from --out-dir does)")
  endif()
  set(listed "")
  if(count GREATER 0)
    math(EXPR last "${count} - 1")
    foreach(i RANGE ${last})
      string(JSON path ERROR_VARIABLE error GET "${text}" mirror files ${i} path)
      if(error OR path STREQUAL "" OR IS_ABSOLUTE "${path}" OR path MATCHES "(^|/)\\.\\.(/|$)")
        _lmfuse_carried_error("${target}" "the audit ${audit_file} has a malformed mirror.files entry (#${i})")
      endif()
      list(APPEND listed "${path}")
    endforeach()
  endif()
  set(${out} "${listed}" PARENT_SCOPE)
endfunction()

# <out> = the targets of the build defined under <dir> and its subdirectories.
function(_lmfuse_targets_under dir out)
  get_property(targets DIRECTORY "${dir}" PROPERTY BUILDSYSTEM_TARGETS)
  get_property(subdirectories DIRECTORY "${dir}" PROPERTY SUBDIRECTORIES)
  foreach(subdirectory IN LISTS subdirectories)
    _lmfuse_targets_under("${subdirectory}" more)
    list(APPEND targets ${more})
  endforeach()
  set(${out} "${targets}" PARENT_SCOPE)
endfunction()

# <files> = "<name>|<target>" for every library target of <targets>: the names its file may be linked by
# (`-l<name>`, or a path whose file name is lib<name>.<suffix>): the target's name and its OUTPUT_NAMEs.
function(_lmfuse_library_files targets files)
  set(pairs "")
  foreach(target IN LISTS targets)
    get_target_property(type "${target}" TYPE)
    get_target_property(exports "${target}" ENABLE_EXPORTS)
    if(NOT type MATCHES "^(STATIC_LIBRARY|SHARED_LIBRARY|MODULE_LIBRARY)$" AND NOT (type STREQUAL "EXECUTABLE" AND exports))
      continue()
    endif()
    set(names "${target}")
    foreach(property IN ITEMS OUTPUT_NAME ARCHIVE_OUTPUT_NAME LIBRARY_OUTPUT_NAME RUNTIME_OUTPUT_NAME)
      get_target_property(name "${target}" ${property})
      if(name)
        list(APPEND names "${name}")
      endif()
    endforeach()
    list(REMOVE_DUPLICATES names)
    foreach(name IN LISTS names)
      list(APPEND pairs "${name}|${target}")
    endforeach()
  endforeach()
  set(${files} "${pairs}" PARENT_SCOPE)
endfunction()

# <out> = the targets of <library_files> (see _lmfuse_library_files) a link item that is a file path or a
# linker flag (-l<name>, -l:<file>, -Wl,<...>) may link.
function(_lmfuse_linked_by_file item library_files out)
  set(found "")
  string(REPLACE "," ";" pieces "${item}")
  foreach(piece IN LISTS pieces)
    if(piece MATCHES "^-l:(.+)$" OR piece MATCHES "^-l(.+)$")
      set(piece "${CMAKE_MATCH_1}")
    elseif(NOT piece MATCHES "[/\\\\]|\\.(a|so|lib|dylib|dll|tbd)([.0-9]*)$")
      continue()
    endif()
    get_filename_component(file "${piece}" NAME)
    string(REGEX REPLACE "\\..*$" "" base "${file}")  # the name before every suffix (libm.so.6: libm)
    set(names "${base}")
    if(base MATCHES "^lib(.+)$")
      list(APPEND names "${CMAKE_MATCH_1}")
    endif()
    foreach(pair IN LISTS library_files)
      string(REPLACE "|" ";" pair "${pair}")
      list(GET pair 0 name)
      list(GET pair 1 target)
      if(name IN_LIST names)
        list(APPEND found "${target}")
      endif()
    endforeach()
  endforeach()
  set(${out} "${found}" PARENT_SCOPE)
endfunction()

# <out> = <target> and every target of this build it links, directly or through others (LINK_LIBRARIES, and
# INTERFACE_LINK_LIBRARIES of those it reaches) or compiles in ($<TARGET_OBJECTS:> among its sources): what
# may end up in one binary with it. What a generator expression evaluates to is not known when configuring,
# so every target a link item's expression names counts as linked (and so does every target named by a
# property it reads with $<TARGET_PROPERTY:>), as does every library target whose file a path or a linker
# flag (-l<name>) may name: the check this serves must not miss a binary, and checking one too many only
# fails a build whose unit compiles an original header. An imported target compiles nothing here and is not a
# member, but what it links is followed (a package's or a shim's INTERFACE target may link this build's
# libraries, by name or by file), as are INTERFACE_LINK_LIBRARIES_DIRECT, which CMake links into each consumer.
# <notes> = "<member>|<item>" for each member reached only that way, with the link item that named it.
function(_lmfuse_link_closure target library_files out notes)
  set(closure "")
  set(indirect "")
  set(imported_seen "")
  set(properties_read "")
  set(pending "${target}")
  set(pending_items "-")  # the link item that named each pending target, "-" where it was a target's name
  while(pending)
    list(POP_FRONT pending current)
    list(POP_FRONT pending_items through)
    if(NOT TARGET "${current}")
      continue()
    endif()
    get_target_property(aliased "${current}" ALIASED_TARGET)
    if(aliased)
      set(current "${aliased}")
    endif()
    get_target_property(imported "${current}" IMPORTED)
    if(current IN_LIST closure OR current IN_LIST imported_seen)
      continue()
    endif()
    get_target_property(type "${current}" TYPE)
    set(links "")
    set(link_properties LINK_LIBRARIES INTERFACE_LINK_LIBRARIES INTERFACE_LINK_LIBRARIES_DIRECT)
    if(imported)
      list(APPEND imported_seen "${current}")
      string(TOUPPER "${CMAKE_BUILD_TYPE}" config)
      set(link_properties INTERFACE_LINK_LIBRARIES INTERFACE_LINK_LIBRARIES_DIRECT IMPORTED_LINK_INTERFACE_LIBRARIES
                          IMPORTED_LINK_INTERFACE_LIBRARIES_${config} IMPORTED_LOCATION IMPORTED_LOCATION_${config}
                          IMPORTED_OBJECTS IMPORTED_OBJECTS_${config})
    else()
      list(APPEND closure "${current}")
      if(NOT through STREQUAL "-")
        list(APPEND indirect "${current}|${through}")
      endif()
    endif()
    foreach(property IN LISTS link_properties)
      if(type STREQUAL "INTERFACE_LIBRARY" AND property STREQUAL "LINK_LIBRARIES")
        continue()
      endif()
      get_target_property(value "${current}" ${property})
      if(value)
        list(APPEND links ${value})
      endif()
    endforeach()
    # Link options may name a library too (`$<TARGET_FILE:name>`, its path, `-Wl,<path>`): each is read word by
    # word, as a generator expression is.
    set(options "")
    foreach(property IN ITEMS LINK_OPTIONS INTERFACE_LINK_OPTIONS LINK_FLAGS)
      if((type STREQUAL "INTERFACE_LIBRARY" OR imported) AND NOT property STREQUAL "INTERFACE_LINK_OPTIONS")
        continue()
      endif()
      get_target_property(value "${current}" ${property})
      if(value AND property STREQUAL "LINK_FLAGS")
        separate_arguments(value UNIX_COMMAND "${value}")
      endif()
      if(value)
        list(APPEND options ${value})
      endif()
    endforeach()
    list(APPEND links ${options})
    # Object libraries whose objects it compiles in.
    _lmfuse_objects_compiled_in("${current}" objects)
    list(APPEND links ${objects})
    while(links)
      list(POP_FRONT links link)
      if(TARGET "${link}")
        list(APPEND pending "${link}")
        list(APPEND pending_items "-")
        continue()
      endif()
      set(named "")
      if(link MATCHES "\\$<|>" OR link IN_LIST options)  # a generator expression (or a piece of one the list
                                                            # split at a ';'), or a link option
        string(REGEX MATCHALL "\\$<TARGET_PROPERTY:[^<>]+>" reads "${link}")
        foreach(read IN LISTS reads)
          if(read MATCHES "^\\$<TARGET_PROPERTY:([^,]+),(.+)>$")
            set(owner "${CMAKE_MATCH_1}")
            set(property "${CMAKE_MATCH_2}")
          elseif(read MATCHES "^\\$<TARGET_PROPERTY:(.+)>$")
            set(owner "${current}")
            set(property "${CMAKE_MATCH_1}")
          endif()
          if(TARGET "${owner}" AND NOT "${owner}|${property}" IN_LIST properties_read)
            list(APPEND properties_read "${owner}|${property}")
            get_target_property(value "${owner}" "${property}")
            if(value)
              list(APPEND links ${value})
            endif()
          endif()
        endforeach()
        string(REGEX MATCHALL "[A-Za-z0-9_.+/-]+(::[A-Za-z0-9_.+/-]+)*" words "${link}")
        foreach(word IN LISTS words)
          if(TARGET "${word}")
            list(APPEND named "${word}")
          else()  # a library's file or -l<name> inside the expression
            _lmfuse_linked_by_file("${word}" "${library_files}" by_file)
            list(APPEND named ${by_file})
          endif()
        endforeach()
      else()
        _lmfuse_linked_by_file("${link}" "${library_files}" named)
      endif()
      foreach(member IN LISTS named)
        list(APPEND pending "${member}")
        string(REPLACE ";" "," item "${link}")
        list(APPEND pending_items "${item}")
      endforeach()
    endwhile()
  endwhile()
  set(${out} "${closure}" PARENT_SCOPE)
  set(${notes} "${indirect}" PARENT_SCOPE)
endfunction()

# The object libraries whose objects a target compiles in, or hands to its consumers: every target named inside
# a $<TARGET_OBJECTS:...> among its SOURCES or INTERFACE_SOURCES (the name may itself be an expression, whose
# value is not known when configuring: each target it names counts).
function(_lmfuse_objects_compiled_in target out)
  set(names "")
  foreach(property IN ITEMS SOURCES INTERFACE_SOURCES)
    get_target_property(sources "${target}" ${property})
    foreach(source IN LISTS sources)
      string(FIND "${source}" "$<TARGET_OBJECTS:" at)
      if(at EQUAL -1)
        continue()
      endif()
      string(SUBSTRING "${source}" ${at} -1 expression)
      string(REGEX MATCHALL "[A-Za-z0-9_.+/-]+(::[A-Za-z0-9_.+/-]+)*" words "${expression}")
      foreach(word IN LISTS words)
        if(TARGET "${word}")
          list(APPEND names "${word}")
        endif()
      endforeach()
    endforeach()
  endforeach()
  list(REMOVE_DUPLICATES names)
  set(${out} "${names}" PARENT_SCOPE)
endfunction()

# A rewritten object library's objects call lmfuse's runtime; a target that compiles them in
# ($<TARGET_OBJECTS:name> among its sources) without linking the object library would not link it, and its
# link would fail on undefined lmfuse symbols: it links lmfuse::torch as the object library does (appended
# to the link property, which leaves its target_link_libraries signature as it was; a static library
# passes it on to what links it).
function(_lmfuse_link_runtime_where_objects_go targets rewritten)
  foreach(consumer IN LISTS targets)
    _lmfuse_objects_compiled_in("${consumer}" objects)
    foreach(object IN LISTS objects)
      if(TARGET "${object}")
        get_target_property(aliased "${object}" ALIASED_TARGET)
        if(aliased)
          set(object "${aliased}")
        endif()
      endif()
      if(NOT object IN_LIST rewritten)
        continue()
      endif()
      # The name is looked up where the consumer was made: lmfuse::torch, imported by find_package(lmfuse),
      # is seen only in that folder and those below it.
      get_target_property(folder "${consumer}" SOURCE_DIR)
      _lmfuse_folder_sees_runtime("${folder}" seen)
      if(NOT seen)
        message(FATAL_ERROR "lmfuse_rewrite: ${consumer} compiles in the objects of ${object} "
                            "($<TARGET_OBJECTS:${object}>), whose rewritten units call lmfuse's runtime, but "
                            "lmfuse::torch is not known in ${folder}, where ${consumer} is made: call "
                            "find_package(lmfuse) there or in a folder above it, or link ${object} to ${consumer}.")
      endif()
      get_target_property(type "${consumer}" TYPE)
      if(NOT type STREQUAL "INTERFACE_LIBRARY")
        set_property(TARGET "${consumer}" APPEND PROPERTY LINK_LIBRARIES lmfuse::torch)
      endif()
      if(type MATCHES "^(STATIC_LIBRARY|OBJECT_LIBRARY|INTERFACE_LIBRARY)$")
        set_property(TARGET "${consumer}" APPEND PROPERTY INTERFACE_LINK_LIBRARIES "$<LINK_ONLY:lmfuse::torch>")
      endif()
      break()
    endforeach()
  endforeach()
endfunction()

# Whether the name lmfuse::torch means lmfuse's runtime in <folder>: a target made in the build (lmfuse
# added as a subfolder, or an imported target made global), or one imported there or in a folder above it.
function(_lmfuse_folder_sees_runtime folder out)
  set(${out} FALSE PARENT_SCOPE)
  if(TARGET lmfuse::torch)
    get_target_property(imported lmfuse::torch IMPORTED)
    get_target_property(global lmfuse::torch IMPORTED_GLOBAL)
    if(NOT imported OR global)
      set(${out} TRUE PARENT_SCOPE)
      return()
    endif()
  endif()
  while(folder)
    get_directory_property(imported DIRECTORY "${folder}" IMPORTED_TARGETS)
    if("lmfuse::torch" IN_LIST imported)
      set(${out} TRUE PARENT_SCOPE)
      return()
    endif()
    get_directory_property(folder DIRECTORY "${folder}" PARENT_DIRECTORY)
  endwhile()
endfunction()

# Run once, at the end of configuring (deferred by the first lmfuse_rewrite call): every target that ends
# up in one binary with a rewritten one (an executable or shared library and all it links) gets a
# build-time check (the step's MODE=consumer) that none of its units compiles the original of a header
# that target's rewrite patched, nor, when it is rewritten too, another copy of it than that target's: the
# binary would hold two definitions of the header's inline functions, and the linker keeps either. Its objects wait
# for the check, which waits for the rewritten target's step (its audit names the patched headers).
# Whether a call deferred to the end of <directory> that is not one of lmfuse's own is still to run: such a call
# (a finaliser, as Qt's qt_finalize_target) may still link a target or set a property the checks read, so they
# defer themselves again until they are the last.
function(_lmfuse_others_pending directory out)
  cmake_language(DEFER DIRECTORY "${directory}" GET_CALL_IDS ids)
  foreach(id IN LISTS ids)
    cmake_language(DEFER DIRECTORY "${directory}" GET_CALL ${id} call)
    list(GET call 0 command)
    if(NOT command MATCHES "^_lmfuse_")
      set(${out} ON PARENT_SCOPE)
      return()
    endif()
  endforeach()
  set(${out} OFF PARENT_SCOPE)
endfunction()

function(_lmfuse_check_linked_targets)
  _lmfuse_others_pending("${CMAKE_SOURCE_DIR}" later)
  if(later)
    cmake_language(DEFER DIRECTORY "${CMAKE_SOURCE_DIR}" CALL _lmfuse_check_linked_targets)
    return()
  endif()
  get_property(rewritten GLOBAL PROPERTY LMFUSE_REWRITTEN_TARGETS)
  # What each call read of its target must still hold now that the whole project is read (code after the
  # call, in its folder or in a folder above it, or in a deferred call, may have changed it).
  foreach(target IN LISTS rewritten)
    _lmfuse_check_after_call("${target}")
  endforeach()
  _lmfuse_targets_under("${CMAKE_SOURCE_DIR}" all_targets)
  _lmfuse_library_files("${all_targets}" library_files)
  _lmfuse_link_runtime_where_objects_go("${all_targets}" "${rewritten}")
  set(pairs "")
  foreach(binary IN LISTS all_targets)
    get_target_property(type "${binary}" TYPE)
    if(NOT type MATCHES "^(EXECUTABLE|SHARED_LIBRARY|MODULE_LIBRARY)$")
      continue()
    endif()
    _lmfuse_link_closure("${binary}" "${library_files}" closure notes)
    set(found "")
    foreach(member IN LISTS closure)
      if(member IN_LIST rewritten)
        list(APPEND found "${member}")
      endif()
    endforeach()
    foreach(member IN LISTS closure)
      get_target_property(member_type "${member}" TYPE)
      get_target_property(runtime "${member}" LMFUSE_RUNTIME)  # lmfuse's own: includes no user header
      if(runtime OR member_type MATCHES "^(INTERFACE_LIBRARY|UTILITY)$")
        continue()
      endif()
      foreach(target IN LISTS found)
        if(NOT member STREQUAL target AND NOT "${member}|${target}" IN_LIST pairs)
          list(APPEND pairs "${member}|${target}")
          # Where the pair was found through a link item that may not link (a generator expression, a
          # file name), the check's failure names that item.
          set(how "")
          foreach(note IN LISTS notes)
            string(FIND "${note}" "|" bar)
            string(SUBSTRING "${note}" 0 ${bar} named)
            math(EXPR bar "${bar} + 1")
            string(SUBSTRING "${note}" ${bar} -1 item)
            if(named STREQUAL target OR named STREQUAL member)
              set(how "${binary} links `${item}`, which may name ${named}")
              break()
            endif()
          endforeach()
          string(MAKE_C_IDENTIFIER "${member}|${target}" key)
          set(_lmfuse_how_${key} "${how}")
        endif()
      endforeach()
    endforeach()
  endforeach()
  foreach(pair IN LISTS pairs)
    string(REPLACE "|" ";" pair "${pair}")
    list(GET pair 0 member)
    list(GET pair 1 target)
    get_target_property(audits "${target}" LMFUSE_AUDIT)
    list(GET audits 0 audit)
    get_target_property(edit_root "${target}" LMFUSE_EDIT_ROOT)
    get_target_property(out_dir "${target}" LMFUSE_OUT_DIR)
    get_target_property(member_binary_dir "${member}" BINARY_DIR)
    # A rewritten member compiles its own copies: they must be the same as the target's.
    set(member_arguments "")
    if(member IN_LIST rewritten)
      get_target_property(member_out_dir "${member}" LMFUSE_OUT_DIR)
      get_target_property(member_edit_root "${member}" LMFUSE_EDIT_ROOT)
      set(member_arguments "-DMEMBER_OUT_DIR=${member_out_dir}" "-DMEMBER_EDIT_ROOT=${member_edit_root}")
    endif()
    set(check "${member}_lmfuse_linked_with_${target}")
    string(MAKE_C_IDENTIFIER "${check}" check)
    set(stamp "${member_binary_dir}/lmfuse_linked/${check}.stamp")
    set(depfile_arguments "")
    if(CMAKE_GENERATOR MATCHES "Ninja|Makefiles")
      set(depfile_arguments DEPFILE "${stamp}.d")
    endif()
    # How the two were found in one binary, where a link item only may have linked them (empty otherwise):
    # written to a file, since the item may hold a generator expression the command would evaluate.
    string(MAKE_C_IDENTIFIER "${member}|${target}" key)
    _lmfuse_write_list("${stamp}.how" "${_lmfuse_how_${key}}")
    _lmfuse_launcher_file("${member}" "${stamp}.launcher")
    add_custom_command(
      OUTPUT "${stamp}"
      COMMAND "${CMAKE_COMMAND}" "-DMODE=consumer" "-DTARGET=${member}" "-DREWRITTEN=${target}"
              "-DLINKED_HOW=${stamp}.how"
              "-DREWRITTEN_AUDIT=${audit}" "-DREWRITTEN_OUT_DIR=${out_dir}" ${member_arguments}
              "-DLAUNCHER_FILE=${stamp}.launcher"
              "-DEDIT_ROOT=${edit_root}" "-DSOURCE_ROOT=${edit_root}"
              "-DCOMPILE_COMMANDS=${CMAKE_BINARY_DIR}/compile_commands.json" "-DCXX=${CMAKE_CXX_COMPILER}"
              "-DSTAMP=${stamp}" "-DDEPFILE=${stamp}.d"
              -P "${_LMFUSE_REWRITE_STEP}"
      DEPENDS "${_LMFUSE_REWRITE_STEP}" ${depfile_arguments}
      COMMENT "lmfuse: checking that ${member} compiles no original of a header rewritten for ${target}"
      VERBATIM)
    add_custom_target("${check}" DEPENDS "${stamp}")
    set_property(TARGET "${check}" PROPERTY LMFUSE_OWN ON)
    add_dependencies("${check}" "${target}_lmfuse_step")
    if(member IN_LIST rewritten)
      add_dependencies("${check}" "${member}_lmfuse_step")
    endif()
    add_dependencies("${member}" "${check}")
    set_property(TARGET "${member}" PROPERTY EXPORT_COMPILE_COMMANDS ON)
  endforeach()
endfunction()

# The source properties a copy takes from its original (set before the call, in any folder's scope).
set(_LMFUSE_SOURCE_PROPERTIES COMPILE_DEFINITIONS COMPILE_OPTIONS COMPILE_FLAGS INCLUDE_DIRECTORIES OBJECT_DEPENDS
                              LANGUAGE SKIP_PRECOMPILE_HEADERS CACHE INTERNAL "")

# Run once the whole project is read (_lmfuse_check_linked_targets): what lmfuse_rewrite(TARGET <target>) read
# of the target must still hold when the build is generated.
# - A property set on an original source after the call would reach neither its copy, which is compiled
#   instead, nor the tool's analysis: it is an error naming the property.
# - The step reads each unit's command from the compile database: EXPORT_COMPILE_COMMANDS must stay ON.
function(_lmfuse_check_after_call target)
  set(who "lmfuse_rewrite(TARGET ${target})")
  get_target_property(originals "${target}" LMFUSE_ORIGINALS)
  get_target_property(copies "${target}" LMFUSE_COPIES)
  foreach(original copy IN ZIP_LISTS originals copies)
    foreach(property IN LISTS _LMFUSE_SOURCE_PROPERTIES ITEMS HEADER_FILE_ONLY)
      get_source_file_property(now "${original}" TARGET_DIRECTORY "${target}" ${property})
      get_source_file_property(taken "${copy}" TARGET_DIRECTORY "${target}" ${property})
      if(NOT now STREQUAL taken)
        message(FATAL_ERROR "${who}: the source property ${property} of ${original} was set after the call "
                            "(now '${now}', '${taken}' when the call copied it): its rewritten copy is compiled "
                            "instead of it and the rewrite was analysed without it. Set it before lmfuse_rewrite().")
      endif()
    endforeach()
  endforeach()
  # An include folder under EDIT_ROOT (the target's, or one a library linked to it brings) added after the
  # call has no mirror folder in front of it: a copy's include would reach the original header.
  get_target_property(real_root "${target}" LMFUSE_EDIT_ROOT)
  get_target_property(out_dir "${target}" LMFUSE_OUT_DIR)
  get_target_property(mirrored "${target}" LMFUSE_MIRROR_DIRS)
  _lmfuse_mirror_dirs("${target}" "${real_root}" "${out_dir}" mirror_dirs)
  foreach(dir original IN ZIP_LISTS mirror_dirs mirror_dirs_originals)
    if(NOT dir IN_LIST mirrored)
      message(FATAL_ERROR "${who}: the include folder ${original} was added to the target (or to a "
                          "library it links) after the call, which gives each include folder under EDIT_ROOT its "
                          "rewritten counterpart: the target's units would include the original headers there. "
                          "Add it before lmfuse_rewrite().")
    endif()
  endforeach()
  get_target_property(exported "${target}" EXPORT_COMPILE_COMMANDS)
  if(NOT exported)
    message(FATAL_ERROR "${who}: EXPORT_COMPILE_COMMANDS was turned off after the call; the rewrite step reads "
                        "each unit's compile command (its own definitions and options) from the compile "
                        "database. Leave it ON for this target.")
  endif()
endfunction()

# Run at the end of the folder that called lmfuse_rewrite(TARGET <target>) (where the step's command was made,
# which is where it can be given more dependencies): headers the build generates (a GENERATED source of the
# target, or the work of a custom target it depends on) exist only once their commands ran; the tool must read
# them as the compiles will, so the step depends on those sources and targets too. (Not on the libraries it
# links: the check of a library linked with a rewritten target waits for the step, so that would be a cycle; a
# header generated by a linked library's commands should come from a custom target added with
# add_dependencies.) lmfuse's own targets (LMFUSE_OWN: the steps, and the checks of targets linked with a
# rewritten one, which wait for this step) are no generators.
function(_lmfuse_wait_for_generated target)
  _lmfuse_others_pending("${CMAKE_CURRENT_SOURCE_DIR}" later)
  if(later)
    cmake_language(EVAL CODE "cmake_language(DEFER CALL _lmfuse_wait_for_generated [==[${target}]==])")
    return()
  endif()
  get_target_property(copies "${target}" LMFUSE_COPIES)
  set(waits "")
  get_target_property(sources "${target}" SOURCES)
  get_target_property(source_dir "${target}" SOURCE_DIR)
  foreach(source IN LISTS sources)
    if(NOT source MATCHES "\\$<")
      get_filename_component(absolute "${source}" ABSOLUTE BASE_DIR "${source_dir}")
      get_source_file_property(generated "${absolute}" TARGET_DIRECTORY "${target}" GENERATED)
      if(generated AND NOT absolute IN_LIST copies)
        list(APPEND waits "${absolute}")
      endif()
    endif()
  endforeach()
  get_target_property(added "${target}" MANUALLY_ADDED_DEPENDENCIES)
  foreach(dependency IN LISTS added)
    if(TARGET "${dependency}")
      get_target_property(type "${dependency}" TYPE)
      get_target_property(own "${dependency}" LMFUSE_OWN)
      if(type STREQUAL "UTILITY" AND NOT own)
        list(APPEND waits "${dependency}")
      endif()
    endif()
  endforeach()
  if(waits)
    # The step's command is known by its first output, its stamp (see lmfuse_rewrite).
    get_target_property(out_dir "${target}" LMFUSE_OUT_DIR)
    add_custom_command(OUTPUT "${out_dir}/step.stamp" APPEND DEPENDS ${waits})
  endif()
endfunction()

function(lmfuse_rewrite)
  cmake_parse_arguments(PARSE_ARGV 0 ARG "" "TARGET;AUDIT;EXPECT_PATCHED;PATTERNS;EDIT_ROOT" "SOURCES;EXTRA_ARGS")
  if(ARG_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "lmfuse_rewrite: unexpected arguments: ${ARG_UNPARSED_ARGUMENTS}")
  endif()
  if(NOT ARG_TARGET OR NOT TARGET "${ARG_TARGET}")
    message(FATAL_ERROR "lmfuse_rewrite: TARGET '${ARG_TARGET}' is not a target defined before this call")
  endif()
  # The call rewrites the sources a target of this project compiles: an alias names another target, an imported
  # one compiles nothing here.
  get_target_property(aliased "${ARG_TARGET}" ALIASED_TARGET)
  if(aliased)
    message(FATAL_ERROR "lmfuse_rewrite: TARGET ${ARG_TARGET} is an alias of ${aliased}: name ${aliased} itself")
  endif()
  get_target_property(imported "${ARG_TARGET}" IMPORTED)
  if(imported)
    message(FATAL_ERROR "lmfuse_rewrite: TARGET ${ARG_TARGET} is an imported target, which this project does not "
                        "compile: call lmfuse_rewrite() in the project that builds it")
  endif()
  if(DEFINED ARG_EXPECT_PATCHED AND NOT ARG_EXPECT_PATCHED MATCHES "^[0-9]+$")
    message(FATAL_ERROR "lmfuse_rewrite(TARGET ${ARG_TARGET}): EXPECT_PATCHED must be a count, got '${ARG_EXPECT_PATCHED}'")
  endif()
  set(target "${ARG_TARGET}")
  # One mirror, one audit and one analysis per target: under a multi-config generator (Ninja Multi-Config,
  # Visual Studio, Xcode) every configuration would compile the same copies, analysed under one
  # configuration's flags (its NDEBUG, its definitions), whatever configuration is built.
  get_property(multi_config GLOBAL PROPERTY GENERATOR_IS_MULTI_CONFIG)
  if(multi_config)
    message(FATAL_ERROR "lmfuse_rewrite(TARGET ${target}): the generator \"${CMAKE_GENERATOR}\" builds several "
                        "configurations from one build folder, but the rewrite is analysed under one "
                        "configuration's flags (NDEBUG, its definitions) and its mirror and audit would serve "
                        "them all: configure with a single-configuration generator (-G Ninja or -G \"Unix "
                        "Makefiles\") and CMAKE_BUILD_TYPE, one build folder per configuration")
  endif()
  set(out_dir "${CMAKE_CURRENT_BINARY_DIR}/lmfuse_rewritten/${target}")
  set(edit_root "${ARG_EDIT_ROOT}")
  if(NOT edit_root)
    set(edit_root "${PROJECT_SOURCE_DIR}")
  endif()
  get_filename_component(edit_root "${edit_root}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
  if(NOT IS_DIRECTORY "${edit_root}")
    message(FATAL_ERROR "lmfuse_rewrite(TARGET ${target}): EDIT_ROOT '${edit_root}' is not a folder")
  endif()
  get_target_property(rewritten_before "${target}" LMFUSE_OUT_DIR)
  if(rewritten_before)
    message(FATAL_ERROR "lmfuse_rewrite(TARGET ${target}) is called a second time for this target: one call "
                        "rewrites all of a target's sources (name sources it does not list with SOURCES)")
  endif()
  set(audit "${ARG_AUDIT}")
  if(NOT audit)
    set(audit "${out_dir}/audit.json")
  endif()
  get_filename_component(audit "${audit}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_BINARY_DIR}")
  # One audit a target: the check of the targets linked with this one reads which files it patched there.
  get_property(audits_taken GLOBAL PROPERTY _LMFUSE_AUDITS)
  foreach(taken IN LISTS audits_taken)
    string(REPLACE "|" ";" taken "${taken}")
    list(GET taken 0 taken_audit)
    list(GET taken 1 taken_target)
    if(taken_audit STREQUAL audit)
      message(FATAL_ERROR "lmfuse_rewrite(TARGET ${target}): AUDIT ${audit} is also the audit of "
                          "lmfuse_rewrite(TARGET ${taken_target}): each target's step writes its own; name another path")
    endif()
  endforeach()
  set_property(GLOBAL APPEND PROPERTY _LMFUSE_AUDITS "${audit}|${target}")
  # The audit is an output of the build: `clean` deletes it, so it may not be a file of the project's.
  if(IS_DIRECTORY "${audit}")
    message(FATAL_ERROR "lmfuse_rewrite(TARGET ${target}): AUDIT ${audit} is a folder: name a file")
  elseif(EXISTS "${audit}")
    file(READ "${audit}" existing)
    string(JSON schema ERROR_VARIABLE not_json GET "${existing}" schema)
    if(not_json OR NOT schema MATCHES "^lmfuse-audit/")
      message(FATAL_ERROR "lmfuse_rewrite(TARGET ${target}): AUDIT ${audit} is a file that is not an lmfuse "
                          "audit; the build would replace it and `clean` delete it: name another path")
    endif()
  endif()

  # SOURCES are added to the target's own C++ sources: every unit goes through the tool.
  _lmfuse_cxx_sources("${target}" originals)
  foreach(source IN LISTS ARG_SOURCES)
    get_filename_component(original "${source}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
    if(NOT EXISTS "${original}")
      message(FATAL_ERROR "lmfuse_rewrite(TARGET ${target}): source '${source}' does not exist (${original})")
    endif()
    list(APPEND originals "${original}")
  endforeach()
  list(REMOVE_DUPLICATES originals)
  if(NOT originals)
    message(FATAL_ERROR "lmfuse_rewrite(TARGET ${target}): the target has no C++ sources and no SOURCES were given")
  endif()

  # Sources under EDIT_ROOT are compiled from their mirror; the others as they are. The tool mirrors files
  # at their real paths (symbolic links resolved), so paths are placed in the mirror by their real paths.
  get_filename_component(real_root "${edit_root}" REALPATH)
  set(mirrored "")
  set(copies "")
  set(quote_dirs "")
  foreach(original IN LISTS originals)
    _lmfuse_under_root("${original}" "${real_root}" relative)
    get_filename_component(folder "${original}" DIRECTORY)
    list(APPEND quote_dirs "${folder}")
    if(relative)
      list(APPEND mirrored "${original}")
      list(APPEND copies "${out_dir}/${relative}")
    endif()
  endforeach()
  list(REMOVE_DUPLICATES quote_dirs)
  if(NOT copies)
    message(FATAL_ERROR "lmfuse_rewrite(TARGET ${target}): no source of the target lies under EDIT_ROOT ${edit_root}")
  endif()

  _lmfuse_rewrite_tool(tool patterns)
  if(ARG_PATTERNS)
    get_filename_component(patterns "${ARG_PATTERNS}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
  endif()

  # The step checks each unit with its command from the compile database (and parses each source with its
  # copy's, without the mirror's folders); without one (a generator that writes none), with this file's
  # flags, one per line.
  string(REPLACE "." "\\." not_mirror "${out_dir}")
  string(REPLACE "+" "\\+" not_mirror "${not_mirror}")
  get_target_property(standard "${target}" CXX_STANDARD)
  set(includes "$<FILTER:$<TARGET_PROPERTY:${target},INCLUDE_DIRECTORIES>,EXCLUDE,^${not_mirror}(/|$)>")
  set(definitions "$<TARGET_PROPERTY:${target},COMPILE_DEFINITIONS>")
  set(options "$<TARGET_PROPERTY:${target},COMPILE_OPTIONS>")
  set(flags_file "${out_dir}/flags-$<CONFIG>.txt")
  # CMAKE_CXX_FLAGS and the configuration's own (CMAKE_CXX_FLAGS_RELEASE: -O3 -DNDEBUG, which code may test).
  set(global_flags "${CMAKE_CXX_FLAGS}")
  set(configurations ${CMAKE_CONFIGURATION_TYPES} ${CMAKE_BUILD_TYPE} Debug Release RelWithDebInfo MinSizeRel)
  list(REMOVE_DUPLICATES configurations)
  foreach(configuration IN LISTS configurations)
    string(TOUPPER "${configuration}" upper)
    if(CMAKE_CXX_FLAGS_${upper})
      string(APPEND global_flags " $<$<CONFIG:${configuration}>:${CMAKE_CXX_FLAGS_${upper}}>")
    endif()
  endforeach()
  separate_arguments(global_flags UNIX_COMMAND "${global_flags}")
  list(FILTER global_flags EXCLUDE REGEX "^$")
  # file(GENERATE) evaluates the content once for each language enabled in the project, and the options may
  # depend on it ($<COMPILE_LANGUAGE:CXX>: the -idirafter fallback below, or the project's own): the C++
  # evaluation writes flags_file, another language's a file of its own beside it (which the step ignores).
  file(GENERATE OUTPUT "${out_dir}/flags-$<CONFIG>$<$<NOT:$<COMPILE_LANGUAGE:CXX>>:-$<COMPILE_LANGUAGE>>.txt" CONTENT
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
  # Lists travel to the step in files: a list of paths can outgrow a command line.
  string(REPLACE ";" "\n" originals_lines "${originals}")
  _lmfuse_write_list("${out_dir}/sources.txt" "${originals_lines}\n")
  # What both modes of the step check every unit with: the build's compiler, its compile commands (or the
  # flags file), the target's sources and the units it knows (units.txt, written below).
  set(unit_check_arguments
      "-DCOMPILE_COMMANDS=${CMAKE_BINARY_DIR}/compile_commands.json" "-DFLAGS_FILE=${flags_file}"
      "-DSOURCES_FILE=${out_dir}/sources.txt" "-DSOURCE_ROOT=${CMAKE_CURRENT_SOURCE_DIR}"
      "-DCXX=${CMAKE_CXX_COMPILER}" "-DUNITS_FILE=${out_dir}/units.txt" "-DBINARY_DIR=${CMAKE_BINARY_DIR}"
      "-DPATTERNS=${patterns}" "-DLAUNCHER_FILE=${out_dir}/launcher.txt")
  _lmfuse_launcher_file("${target}" "${out_dir}/launcher.txt")
  set(unit_check_inputs "${flags_file}" "${out_dir}/sources.txt" "${out_dir}/units.txt" "${out_dir}/launcher.txt")

  if(LMFUSE_REWRITTEN_DIR)
    # A mirror made elsewhere. Its audit lists every copy with the SHA-256 of the original it was made
    # from; the step (MODE=carried) checks each original against it before any copy reaches the build
    # tree. Here: the audit is there, lists a copy of every source under EDIT_ROOT, and each listed copy and
    # original exists. The step reruns when the audit, a listed copy or its original (a header too) changes.
    set(from_dir "${LMFUSE_REWRITTEN_DIR}/${target}")
    set(carried_audit "${from_dir}/audit.json")
    _lmfuse_carried_listing("${target}" "${carried_audit}" listed)
    foreach(copy IN LISTS copies)
      file(RELATIVE_PATH relative "${out_dir}" "${copy}")
      if(NOT relative IN_LIST listed)
        _lmfuse_carried_error("${target}" "LMFUSE_REWRITTEN_DIR has no rewritten copy of ${relative} (its audit "
                                          "${carried_audit} lists none)")
      endif()
    endforeach()
    set(carried_copies "")
    set(carried_originals "")
    foreach(relative IN LISTS listed)
      foreach(path IN ITEMS "${from_dir}/${relative}" "${real_root}/${relative}")
        if(NOT EXISTS "${path}")
          _lmfuse_carried_error("${target}" "${path} does not exist, but the audit ${carried_audit} lists it")
        endif()
      endforeach()
      list(APPEND carried_copies "${from_dir}/${relative}")
      list(APPEND carried_originals "${real_root}/${relative}")
    endforeach()
    # A new mirror may list other files: configuring again picks them up.
    set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${carried_audit}")
    # The listed copies and their originals reach the build tool through the step's depfile where there is
    # one, so an original deleted since is the step's error (naming it, saying what to do) rather than the
    # build tool's "missing and no known rule"; elsewhere they are plain dependencies.
    set(depfile_arguments "")
    set(listed_dependencies ${carried_copies} ${carried_originals})
    if(CMAKE_GENERATOR MATCHES "Ninja|Makefiles")
      set(depfile_arguments DEPFILE "${out_dir}/rewrite.d")
      set(listed_dependencies "")
    endif()
    add_custom_command(
      OUTPUT "${out_dir}/step.stamp" ${copies} "${audit}"
      COMMAND "${CMAKE_COMMAND}" "-DMODE=carried" "-DTARGET=${target}" "-DFROM_DIR=${from_dir}"
              "-DSTAMP=${out_dir}/step.stamp"
              "-DCARRIED_AUDIT=${carried_audit}" "-DEDIT_ROOT=${real_root}" "-DOUT_DIR=${out_dir}"
              "-DCOPIES=${copies}" "-DAUDIT=${audit}" "-DEXPECT_PATCHED=${ARG_EXPECT_PATCHED}"
              "-DDEPFILE=${out_dir}/rewrite.d" ${unit_check_arguments}
              -P "${_LMFUSE_REWRITE_STEP}"
      DEPENDS "${carried_audit}" ${listed_dependencies} ${unit_check_inputs} "${_LMFUSE_REWRITE_STEP}"
      ${depfile_arguments}
      COMMENT "lmfuse: checking and using the rewritten sources of ${target} from ${LMFUSE_REWRITTEN_DIR}"
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
    # The originals, with the target's flags, in an object library that is never built: the compile
    # database lists them, for `lmfuse -p <build dir>`.
    set(originals_target "${target}_lmfuse_originals")
    add_library(${originals_target} OBJECT EXCLUDE_FROM_ALL ${originals})
    set_target_properties(${originals_target} PROPERTIES
      INCLUDE_DIRECTORIES "${includes}" COMPILE_DEFINITIONS "${definitions}" COMPILE_OPTIONS "${options}"
      EXPORT_COMPILE_COMMANDS ON)
    if(standard)
      set_target_properties(${originals_target} PROPERTIES CXX_STANDARD "${standard}")
    else()
      target_compile_features(${originals_target} PRIVATE cxx_std_17)
    endif()
    set(depfile_arguments "")
    set(depfile "${out_dir}/rewrite.d")
    if(CMAKE_GENERATOR MATCHES "Ninja|Makefiles")
      set(depfile_arguments DEPFILE "${depfile}")
    endif()
    string(REPLACE ";" "\n" extra_lines "${ARG_EXTRA_ARGS}")
    _lmfuse_write_list("${out_dir}/extra-args.txt" "${extra_lines}\n")
    # Where the library the target links keeps its headers (lmfuse::torch's include folders, with those of what
    # it links): the tool takes only those for the library's, never a header of the program's of the same name.
    file(GENERATE OUTPUT "${out_dir}/library-includes.txt"
         CONTENT "$<JOIN:$<TARGET_PROPERTY:lmfuse::torch,INTERFACE_INCLUDE_DIRECTORIES>,\n>\n")
    # The stamp first: a Makefile's rule is that of the first output, and the step removes the stamp when it
    # starts and writes it when it is done, so a step stopped before its end (the build killed) leaves no
    # first output, and the next build runs it again, whatever copies it had placed. (The copies first, a
    # killed step's newer copies would pass for a finished step's; the audit first, make would delete the
    # audit of a step that failed, which says why.)
    add_custom_command(
      OUTPUT "${out_dir}/step.stamp" ${copies} "${audit}"
      COMMAND "${CMAKE_COMMAND}" "-DMODE=tool" "-DSTAMP=${out_dir}/step.stamp" "-DTARGET=${target}" "-DTOOL=${tool}"
              "-DEXTRA_ARGS_FILE=${out_dir}/extra-args.txt" "-DLIBRARY_INCLUDES_FILE=${out_dir}/library-includes.txt"
              "-DCOPIES=${copies}"
              "-DEDIT_ROOT=${edit_root}" "-DOUT_DIR=${out_dir}"
              "-DAUDIT=${audit}" "-DEXPECT_PATCHED=${ARG_EXPECT_PATCHED}"
              "-DDEPFILE=${depfile}" ${unit_check_arguments}
              -P "${_LMFUSE_REWRITE_STEP}"
      DEPENDS ${originals} "${patterns}" "${out_dir}/extra-args.txt" "${out_dir}/library-includes.txt"
              ${unit_check_inputs}
              "${_LMFUSE_REWRITE_STEP}" "${tool}" $<$<TARGET_EXISTS:lmfuse>:lmfuse>
      ${depfile_arguments}
      COMMENT "lmfuse: rewriting the sources of ${target}"
      VERBATIM)
  endif()

  # The copies replace the originals in the target; the mirrors of its include folders come first.
  get_target_property(sources "${target}" SOURCES)
  get_target_property(target_source_dir "${target}" SOURCE_DIR)
  set(kept "")
  foreach(source IN LISTS sources)
    get_filename_component(absolute "${source}" ABSOLUTE BASE_DIR "${target_source_dir}")
    if(NOT absolute IN_LIST mirrored)
      list(APPEND kept "${source}")
    endif()
  endforeach()
  set_property(TARGET "${target}" PROPERTY SOURCES ${kept} ${copies})
  # Each copy compiles as its original would: the original's own source properties (set so far, in any
  # folder's scope) carry over. A copy stays out of unity builds, so it has a compile command of its own
  # that the step parses it with.
  foreach(original copy IN ZIP_LISTS mirrored copies)
    foreach(property IN LISTS _LMFUSE_SOURCE_PROPERTIES)
      get_source_file_property(value "${original}" TARGET_DIRECTORY "${target}" ${property})
      if(NOT value STREQUAL "NOTFOUND")
        set_source_files_properties("${copy}" TARGET_DIRECTORY "${target}" PROPERTIES ${property} "${value}")
      endif()
    endforeach()
    set_source_files_properties("${copy}" TARGET_DIRECTORY "${target}" PROPERTIES SKIP_UNITY_BUILD_INCLUSION ON)
  endforeach()
  # Units compiled as they are may include mirrored headers, which the step rewrites without declaring them
  # (their list is known only once it ran): they recompile whenever it runs, as the copies do. They and the
  # copies are the units lmfuse_rewrite knows, for the step's check that the build compiles no other unit
  # that reads a file under EDIT_ROOT (a source given as a generator expression, or added after this call).
  set(known_units ${copies})
  foreach(source IN LISTS kept)
    if(NOT source MATCHES "\\$<")
      # By absolute path: a relative one means the target's folder, which need not be this call's.
      get_filename_component(absolute "${source}" ABSOLUTE BASE_DIR "${target_source_dir}")
      set_property(SOURCE "${absolute}" TARGET_DIRECTORY "${target}" APPEND PROPERTY OBJECT_DEPENDS "${audit}")
      list(APPEND known_units "${absolute}")
    endif()
  endforeach()
  string(REPLACE ";" "\n" known_lines "${known_units}")
  _lmfuse_write_list("${out_dir}/units.txt" "${known_lines}\n")
  _lmfuse_mirror_dirs("${target}" "${real_root}" "${out_dir}" mirror_dirs)
  if(mirror_dirs)
    target_include_directories("${target}" BEFORE PRIVATE ${mirror_dirs})
  endif()
  set_property(TARGET "${target}" PROPERTY LMFUSE_MIRROR_DIRS "${mirror_dirs}")
  # The mirror serves this target's own units only: a target linked into one binary with this one that
  # includes a rewritten header compiles its original (two definitions of its inline functions, the fused one
  # and the original). The check deferred to the end of configuring (_lmfuse_check_linked_targets) stops
  # that target's build, naming the unit.
  # A copy's includes resolve as its original's: beside the copy (the mirror holds every file under EDIT_ROOT
  # the originals read), then the include folders. Only a relative include that leaves the mirror
  # (`"../third_party/x.h"` from a copy) falls through to its original's folder, searched last (-idirafter,
  # not -iquote, which would come before the target's own include folders: a `"config.h"` would then find
  # another source's folder first). A folder the target's include path already holds gets no -idirafter:
  # GCC and Clang search a folder named both ways only in its -idirafter place, which would move it behind
  # every other include folder (a `<head_type.h>` would then find another folder's first). The step checks
  # that no unit's command names a fallback folder otherwise too, and that each unit reads the same files as
  # its original. The fallback is a flag of the C++ compiler (GCC's, Clang's): nvcc, the compiler of a CUDA unit
  # (which the step checks too: one the call never saw must read nothing under EDIT_ROOT), has no -idirafter
  # and stops on it, so C++ units get it only.
  set(include_path "$<TARGET_PROPERTY:${target},INCLUDE_DIRECTORIES>")
  foreach(folder IN LISTS quote_dirs)
    set(listed "$<OR:$<IN_LIST:${folder},${include_path}>,$<IN_LIST:${folder}/,${include_path}>>")
    target_compile_options("${target}" PRIVATE
                           "$<$<AND:$<COMPILE_LANGUAGE:CXX>,$<NOT:${listed}>>:SHELL:-idirafter \"${folder}\">")
  endforeach()
  target_link_libraries("${target}" PRIVATE lmfuse::torch)
  set_property(TARGET "${target}" PROPERTY EXPORT_COMPILE_COMMANDS ON)
  set_property(TARGET "${target}" APPEND PROPERTY LMFUSE_AUDIT "${audit}")
  set_property(TARGET "${target}" PROPERTY LMFUSE_EDIT_ROOT "${real_root}")
  set_property(TARGET "${target}" PROPERTY LMFUSE_OUT_DIR "${out_dir}")
  # The step on its own, for the check of the targets linked with this one (which must wait for its audit
  # but not for the target): the target depends on it, so the two never run the step side by side.
  add_custom_target("${target}_lmfuse_step" DEPENDS ${copies} "${audit}")
  set_property(TARGET "${target}_lmfuse_step" PROPERTY LMFUSE_OWN ON)
  add_dependencies("${target}" "${target}_lmfuse_step")
  set_property(GLOBAL APPEND PROPERTY LMFUSE_REWRITTEN_TARGETS "${target}")
  set_property(TARGET "${target}" PROPERTY LMFUSE_ORIGINALS ${mirrored})
  set_property(TARGET "${target}" PROPERTY LMFUSE_COPIES ${copies})
  # DEFER CALL would read ${target} when it runs: EVAL puts the name in now.
  cmake_language(EVAL CODE "cmake_language(DEFER CALL _lmfuse_wait_for_generated [==[${target}]==])")
  get_property(scheduled GLOBAL PROPERTY _LMFUSE_LINKED_CHECK_SCHEDULED)
  if(NOT scheduled)
    set_property(GLOBAL PROPERTY _LMFUSE_LINKED_CHECK_SCHEDULED ON)
    cmake_language(DEFER DIRECTORY "${CMAKE_SOURCE_DIR}" CALL _lmfuse_check_linked_targets)
  endif()
endfunction()
