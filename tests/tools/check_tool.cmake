# Runs one command-line tool and checks what it did; `cmake -P` with:
#
#   TOOL      the executable
#   ARGS      its arguments, separated by "@@" (a CMake list would be split by add_test)
#   FAIL      ON: the tool must fail, its last line on stderr "<tool>: error: ...", the lines before
#             (if any) the tool's own notes "<tool>: ...";
#             OFF: it must succeed and print nothing to stderr
#   STDOUT    substrings its standard output must contain, "@@"-separated
#   STDERR    substrings its standard error must contain, "@@"-separated
#   COMPARE   "actual=expected" file pairs that must be identical byte for byte, "@@"-separated
#   CLEAN     a directory to remove before the run (the tool's --out), so old results cannot pass
#
# No shell is involved: arguments reach the tool exactly as written.

# The "@@"-separated parts of `value` as a list. Only for ARGS: a CMake list cannot hold a part
# with an unbalanced '[' (list splitting honours brackets), so the checks below walk their
# strings with next_part instead.
function(split out value)
  if(value STREQUAL "")
    set(${out} "" PARENT_SCOPE)
  else()
    string(REPLACE "@@" ";" list "${value}")
    set(${out} "${list}" PARENT_SCOPE)
  endif()
endfunction()

# Takes the first "@@"-separated part off the string in variable `rest` into `part`.
macro(next_part rest part)
  string(FIND "${${rest}}" "@@" _at)
  if(_at EQUAL -1)
    set(${part} "${${rest}}")
    set(${rest} "")
  else()
    string(SUBSTRING "${${rest}}" 0 ${_at} ${part})
    math(EXPR _at "${_at} + 2")
    string(SUBSTRING "${${rest}}" ${_at} -1 ${rest})
  endif()
endmacro()

split(args "${ARGS}")
get_filename_component(tool_name "${TOOL}" NAME)

if(CLEAN)
  file(REMOVE_RECURSE "${CLEAN}")
endif()

execute_process(COMMAND "${TOOL}" ${args} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
string(REPLACE ";" "@@" shown "${args}")
message(STATUS "${tool_name} ${shown}\n-- exit: ${rc}\n-- stdout:\n${out}\n-- stderr:\n${err}")

set(failures "")
if(FAIL)
  if(rc EQUAL 0)
    string(APPEND failures "expected a non-zero exit status, got 0\n")
  elseif(NOT rc MATCHES "^[0-9]+$")
    string(APPEND failures "the tool did not exit normally: ${rc}\n")
  endif()
  # The error as its last line, and nothing else (no sanitizer report, no stack, no second error):
  # only the tool's own notes before it ("weft-run: nodes of this graph that read or write files: ...").
  if(NOT err MATCHES "^(${tool_name}: [^\n]+\n)*${tool_name}: error: [^\n]+\n$")
    string(APPEND failures "stderr is not the tool's notes and one last line starting '${tool_name}: error: '\n")
  endif()
else()
  if(NOT rc EQUAL 0)
    string(APPEND failures "expected exit status 0, got ${rc}\n")
  endif()
  if(NOT err STREQUAL "")
    string(APPEND failures "expected nothing on stderr\n")
  endif()
endif()

# Appends to `failures` each of the parts in `wanted` that `text` lacks.
function(expect_parts stream text wanted)
  set(rest "${wanted}")
  while(NOT rest STREQUAL "")
    next_part(rest part)
    string(FIND "${text}" "${part}" at)
    if(at EQUAL -1)
      string(APPEND failures "${stream} lacks '${part}'\n")
    endif()
  endwhile()
  set(failures "${failures}" PARENT_SCOPE)
endfunction()
expect_parts(stdout "${out}" "${STDOUT}")
expect_parts(stderr "${err}" "${STDERR}")

set(rest "${COMPARE}")
while(NOT rest STREQUAL "")
  next_part(rest pair)
  string(FIND "${pair}" "=" eq)
  string(SUBSTRING "${pair}" 0 ${eq} actual)
  math(EXPR after "${eq} + 1")
  string(SUBSTRING "${pair}" ${after} -1 expected)
  if(NOT EXISTS "${actual}")
    string(APPEND failures "${actual} was not written\n")
  elseif(NOT EXISTS "${expected}")
    string(APPEND failures "the fixture ${expected} is missing\n")
  else()
    execute_process(COMMAND "${CMAKE_COMMAND}" -E compare_files "${actual}" "${expected}" RESULT_VARIABLE differ)
    if(NOT differ EQUAL 0)
      string(APPEND failures "${actual} differs from ${expected}\n")
    endif()
  endif()
endwhile()

if(NOT failures STREQUAL "")
  message(FATAL_ERROR "${failures}")
endif()
