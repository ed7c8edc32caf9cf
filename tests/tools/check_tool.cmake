# Runs one command-line tool and checks what it did; `cmake -P` with:
#
#   TOOL      the executable
#   ARGS      its arguments, separated by "@@" (a CMake list would be split by add_test)
#   FAIL      ON: the tool must fail, printing exactly one line to stderr, "<tool>: error: ...";
#             OFF: it must succeed and print nothing to stderr
#   STDOUT    substrings its standard output must contain, "@@"-separated
#   STDERR    substrings its standard error must contain, "@@"-separated
#   COMPARE   "actual=expected" file pairs that must be identical byte for byte, "@@"-separated
#   CLEAN     a directory to remove before the run (the tool's --out), so old results cannot pass
#
# No shell is involved: arguments reach the tool exactly as written.

function(split out value)
  if(value STREQUAL "")
    set(${out} "" PARENT_SCOPE)
  else()
    string(REPLACE "@@" ";" list "${value}")
    set(${out} "${list}" PARENT_SCOPE)
  endif()
endfunction()

split(args "${ARGS}")
split(stdout_has "${STDOUT}")
split(stderr_has "${STDERR}")
split(compare "${COMPARE}")
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
  # One line: the error, and nothing else (no sanitizer report, no stack, no second message).
  if(NOT err MATCHES "^${tool_name}: error: [^\n]+\n$")
    string(APPEND failures "stderr is not one line starting '${tool_name}: error: '\n")
  endif()
else()
  if(NOT rc EQUAL 0)
    string(APPEND failures "expected exit status 0, got ${rc}\n")
  endif()
  if(NOT err STREQUAL "")
    string(APPEND failures "expected nothing on stderr\n")
  endif()
endif()

foreach(part IN LISTS stdout_has)
  string(FIND "${out}" "${part}" at)
  if(at EQUAL -1)
    string(APPEND failures "stdout lacks '${part}'\n")
  endif()
endforeach()
foreach(part IN LISTS stderr_has)
  string(FIND "${err}" "${part}" at)
  if(at EQUAL -1)
    string(APPEND failures "stderr lacks '${part}'\n")
  endif()
endforeach()

foreach(pair IN LISTS compare)
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
endforeach()

if(NOT failures STREQUAL "")
  message(FATAL_ERROR "${failures}")
endif()
