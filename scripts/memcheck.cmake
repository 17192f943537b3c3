# Runs some of a build tree's tests under valgrind memcheck, each with the
# command, arguments, environment and working directory CTest would give it,
# but with a time limit of its own: ctest -T memcheck keeps each test's
# TIMEOUT, which valgrind's 20-100x slowdown overruns.
#
#   cmake -DBUILD_DIR=build/test -DTESTS='regex' [-DTIMEOUT=3600]
#         [-DVALGRIND=/usr/bin/valgrind] [-DLOG_DIR=dir] -P scripts/memcheck.cmake
#
# A test fails when it fails on its own, when valgrind finds an error
# (invalid read or write, use of uninitialised memory, bad free), or when a
# definite or indirect leak remains at exit (valgrind exits 99). Prints one
# line per test with its time, and the valgrind log of any failure.
cmake_minimum_required(VERSION 3.25)
if(NOT DEFINED BUILD_DIR OR NOT DEFINED TESTS)
  message(FATAL_ERROR "memcheck.cmake: set BUILD_DIR and TESTS")
endif()
if(NOT DEFINED TIMEOUT)
  set(TIMEOUT 3600)
endif()
if(NOT DEFINED VALGRIND)
  find_program(VALGRIND valgrind REQUIRED)
endif()
# Absolute: the tests run in their own working directories, where a
# relative --log-file would name another place.
get_filename_component(BUILD_DIR "${BUILD_DIR}" ABSOLUTE)
if(NOT DEFINED LOG_DIR)
  set(LOG_DIR ${BUILD_DIR}/memcheck)
endif()
get_filename_component(LOG_DIR "${LOG_DIR}" ABSOLUTE)
file(MAKE_DIRECTORY ${LOG_DIR})

# -FA source_tree leaves out the fixture that lists the source tree before
# and after a CTest run (suites/source_tree.sh): a shell script, nothing
# for memcheck to check.
execute_process(COMMAND ${CMAKE_CTEST_COMMAND} --test-dir ${BUILD_DIR} --show-only=json-v1
                        -R "${TESTS}" -FA source_tree
                OUTPUT_VARIABLE json RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "memcheck.cmake: ctest --show-only failed in ${BUILD_DIR}")
endif()
string(JSON n_tests LENGTH "${json}" tests)
if(n_tests EQUAL 0)
  message(FATAL_ERROR "memcheck.cmake: no test matches '${TESTS}'")
endif()

set(failed "")
math(EXPR last "${n_tests} - 1")
foreach(i RANGE ${last})
  string(JSON name GET "${json}" tests ${i} name)
  string(JSON n_cmd LENGTH "${json}" tests ${i} command)
  set(cmd "")
  math(EXPR last_arg "${n_cmd} - 1")
  foreach(a RANGE ${last_arg})
    string(JSON arg GET "${json}" tests ${i} command ${a})
    list(APPEND cmd "${arg}")
  endforeach()
  # Properties: ENVIRONMENT (a list of NAME=VALUE) and WORKING_DIRECTORY.
  set(env "")
  set(wd ${BUILD_DIR})
  string(JSON n_props ERROR_VARIABLE err LENGTH "${json}" tests ${i} properties)
  if(NOT err AND n_props GREATER 0)
    math(EXPR last_prop "${n_props} - 1")
    foreach(p RANGE ${last_prop})
      string(JSON pname GET "${json}" tests ${i} properties ${p} name)
      if(pname STREQUAL "ENVIRONMENT")
        string(JSON n_env LENGTH "${json}" tests ${i} properties ${p} value)
        math(EXPR last_env "${n_env} - 1")
        foreach(e RANGE ${last_env})
          string(JSON kv GET "${json}" tests ${i} properties ${p} value ${e})
          list(APPEND env "${kv}")
        endforeach()
      elseif(pname STREQUAL "WORKING_DIRECTORY")
        string(JSON wd GET "${json}" tests ${i} properties ${p} value)
      endif()
    endforeach()
  endif()
  set(log ${LOG_DIR}/${name}.valgrind.log)
  string(TIMESTAMP t0 "%s")
  execute_process(
    COMMAND ${CMAKE_COMMAND} -E env ${env}
            ${VALGRIND} --leak-check=full --errors-for-leak-kinds=definite,indirect
            --show-leak-kinds=definite,indirect --error-exitcode=99 --num-callers=30
            --log-file=${log} ${cmd}
    WORKING_DIRECTORY ${wd}
    OUTPUT_FILE ${LOG_DIR}/${name}.out ERROR_FILE ${LOG_DIR}/${name}.out
    RESULT_VARIABLE rc TIMEOUT ${TIMEOUT})
  string(TIMESTAMP t1 "%s")
  math(EXPR secs "${t1} - ${t0}")
  file(READ ${log} vglog)
  string(REGEX MATCH "ERROR SUMMARY: [0-9]+ errors" summary "${vglog}")
  string(REGEX MATCH "definitely lost: [0-9,]+ bytes" definite "${vglog}")
  if(NOT definite)
    set(definite "no leaks")
  endif()
  if(rc EQUAL 0)
    message(STATUS "memcheck ${name}: passed in ${secs} s (${summary}, ${definite})")
  else()
    message(STATUS "memcheck ${name}: FAILED in ${secs} s (exit: ${rc}; ${summary})")
    file(READ ${LOG_DIR}/${name}.out out)
    message(STATUS "---- ${name} output (tail) ----")
    string(LENGTH "${out}" out_len)
    if(out_len GREATER 4000)
      math(EXPR from "${out_len} - 4000")
      string(SUBSTRING "${out}" ${from} 4000 out)
    endif()
    message(STATUS "${out}")
    message(STATUS "---- ${name} valgrind log: ${log} ----")
    message(STATUS "${vglog}")
    list(APPEND failed ${name})
  endif()
endforeach()
if(failed)
  message(FATAL_ERROR "memcheck: failed: ${failed}")
endif()
message(STATUS "memcheck: ${n_tests} tests passed under valgrind, no error, no leak")
