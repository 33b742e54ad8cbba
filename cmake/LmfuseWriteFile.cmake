# Writing a file whole or not at all, for lmfuse_rewrite() at configure time and for its build step: the
# contents go to a temporary beside the file (<path>.lmfuse-tmp), are checked against what was meant to be
# written, and only then are renamed over the old file. A write cut short (a full disk) leaves the old file
# whole, never half a file that a later build would take for up to date. Each function sets <out> to "" when
# <path> holds what was meant, else to why not, naming the file; the caller fails through its own error path.
include_guard(GLOBAL)

# The temporary <temporary>, meant to hash to <wanted>, becomes <path>; it is removed on any failure.
function(_lmfuse_settle_temporary temporary wanted path out)
  set(why "")
  file(SHA256 "${temporary}" written)
  if(NOT written STREQUAL wanted)
    set(why "cannot write ${path} (through ${temporary}): the file written is not the one meant (cut short?)")
  else()
    file(RENAME "${temporary}" "${path}" RESULT renamed)
    if(NOT renamed EQUAL 0)
      set(why "cannot write ${path} (renaming ${temporary} into place): ${renamed}")
    endif()
  endif()
  if(why)
    file(REMOVE "${temporary}")
  endif()
  set(${out} "${why}" PARENT_SCOPE)
endfunction()

# <path> gets the contents of the file <from>.
function(lmfuse_try_place_copy from path out)
  set(temporary "${path}.lmfuse-tmp")
  file(COPY_FILE "${from}" "${temporary}" RESULT copied)
  if(NOT copied EQUAL 0)
    file(REMOVE "${temporary}")
    set(${out} "cannot write ${path} (through ${temporary}): ${copied}" PARENT_SCOPE)
    return()
  endif()
  file(SHA256 "${from}" wanted)
  _lmfuse_settle_temporary("${temporary}" "${wanted}" "${path}" why)
  set(${out} "${why}" PARENT_SCOPE)
endfunction()

# <path> gets <content>. A write CMake itself cannot make ends the script with CMake's error, which names the
# temporary; <path> is then left as it was.
function(lmfuse_try_place_text path content out)
  set(temporary "${path}.lmfuse-tmp")
  file(WRITE "${temporary}" "${content}")
  string(SHA256 wanted "${content}")
  _lmfuse_settle_temporary("${temporary}" "${wanted}" "${path}" why)
  set(${out} "${why}" PARENT_SCOPE)
endfunction()
