# ctest runs each Catch test by name (catch_discover_tests). A name with ';'
# is split into two filters by CMake's list syntax, and one starting with
# "--" reads as an option: either way the test silently runs nothing and
# "passes". This check lists every test binary's names and fails on such a
# name. Usage: cmake -DBINARIES="a|b" -P check_test_names.cmake
string(REPLACE "|" ";" BINARIES "${BINARIES}")
foreach(binary ${BINARIES})
  execute_process(COMMAND ${binary} --list-test-names-only
                  OUTPUT_VARIABLE names RESULT_VARIABLE rc)
  # Catch returns the number of tests listed; only a crash is an error here.
  if(rc MATCHES "[A-Za-z]")
    message(FATAL_ERROR "${binary}: ${rc}")
  endif()
  string(REPLACE ";" "<SEMICOLON>" names "${names}")
  string(REPLACE "\n" ";" lines "${names}")
  foreach(name ${lines})
    if(name MATCHES "<SEMICOLON>" OR name MATCHES "^--")
      string(REPLACE "<SEMICOLON>" ";" name "${name}")
      message(SEND_ERROR "${binary}: test name would not run under ctest: '${name}'")
    endif()
  endforeach()
endforeach()
