# Proves that an installed weft works for an outside project: installs the build in
# WEFT_BUILD_DIR into a scratch prefix, then configures, builds and runs the consumer project in
# CONSUMER_DIR against that prefix alone, and builds every example of the source tree with it.
# Registered as a CTest test by tests/CMakeLists.txt; run with `cmake -D... -P check.cmake`.
#
# Inputs: WEFT_BUILD_DIR, WEFT_SOURCE_DIR, CONSUMER_DIR, WORK_DIR, GENERATOR, C_COMPILER,
# CXX_COMPILER, BUILD_TYPE, SANITIZE (ON/OFF), LAUNCHER (may be empty).
cmake_minimum_required(VERSION 3.25)

function(run what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} failed (${rc}):\n${out}")
  endif()
  set(run_output "${out}" PARENT_SCOPE)
endfunction()

set(prefix ${WORK_DIR}/prefix)
set(consumer_build ${WORK_DIR}/build)
# Start clean: a file left by an earlier install must not make a broken install look complete.
file(REMOVE_RECURSE ${WORK_DIR})

run("cmake --install" ${CMAKE_COMMAND} --install ${WEFT_BUILD_DIR} --prefix ${prefix})

# The installed package must be relocatable: nothing in it may point back into the source tree.
file(GLOB_RECURSE package_files ${prefix}/*.cmake)
if(NOT package_files)
  message(FATAL_ERROR "cmake --install wrote no CMake package files under ${prefix}")
endif()
foreach(f IN LISTS package_files)
  file(READ ${f} text)
  string(FIND "${text}" "${WEFT_SOURCE_DIR}/" at)
  if(NOT at EQUAL -1)
    message(FATAL_ERROR "${f} refers to the source tree (${WEFT_SOURCE_DIR})")
  endif()
endforeach()
if(NOT EXISTS ${prefix}/include/weft/weft.h)
  message(FATAL_ERROR "the umbrella header is not installed at include/weft/weft.h")
endif()

# A sanitized weft is made of sanitized static libraries, which only link into a sanitized
# program; so the consumer gets the same flags as the build it links against.
set(flags "")
if(SANITIZE)
  set(flags "-fsanitize=address,undefined -fno-omit-frame-pointer")
endif()
run("configuring the consumer" ${CMAKE_COMMAND} -S ${CONSUMER_DIR} -B ${consumer_build} -G ${GENERATOR}
    -DCMAKE_BUILD_TYPE=${BUILD_TYPE}
    -DCMAKE_C_COMPILER=${C_COMPILER} -DCMAKE_CXX_COMPILER=${CXX_COMPILER}
    -DCMAKE_CXX_COMPILER_LAUNCHER=${LAUNCHER}
    "-DCMAKE_CXX_FLAGS=${flags}" "-DCMAKE_EXE_LINKER_FLAGS=${flags}"
    -DCMAKE_PREFIX_PATH=${prefix}
    -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF
    -DWEFT_EXAMPLES_DIR=${WEFT_SOURCE_DIR}/examples)

# find_package must have found the installed copy, not some other weft on the machine.
file(STRINGS ${consumer_build}/CMakeCache.txt weft_dir REGEX "^weft_DIR:")
string(FIND "${weft_dir}" "${prefix}/" at)
if(at EQUAL -1)
  message(FATAL_ERROR "find_package(weft) did not use the scratch prefix: ${weft_dir}")
endif()

run("building the consumer" ${CMAKE_COMMAND} --build ${consumer_build})

run("running the consumer" ${consumer_build}/weft_consumer)
message(STATUS "weft_consumer printed:\n${run_output}")
foreach(expected "Tensor\\(\\[2 3 4\\], shape=\\(3,\\), dtype=float32\\)" "caught InvalidArgument: ")
  if(NOT run_output MATCHES "${expected}")
    message(FATAL_ERROR "weft_consumer's output lacks /${expected}/")
  endif()
endforeach()
