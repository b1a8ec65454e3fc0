# Shared helpers for Estuary's modules.

# Warnings for Estuary's own targets (never for third-party code).
function(estuary_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wshadow
    -Wnon-virtual-dtor -Wcast-align -Wunused -Woverloaded-virtual
    -Wimplicit-fallthrough)
  if(ESTUARY_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
  if(ESTUARY_SANITIZE)
    target_compile_options(${target} PRIVATE -fsanitize=address,undefined -fno-omit-frame-pointer)
    target_link_options(${target} PRIVATE -fsanitize=address,undefined)
  endif()
  if(ESTUARY_TSAN)
    target_compile_options(${target} PRIVATE -fsanitize=thread -fno-omit-frame-pointer)
    target_link_options(${target} PRIVATE -fsanitize=thread)
  endif()
  # A fuzz build instruments every Estuary target for libFuzzer's coverage
  # and the sanitizers; only the fuzzers themselves link libFuzzer's main.
  # UBSan findings abort so that the fuzzer sees them as crashes.
  if(ESTUARY_FUZZ)
    target_compile_options(${target} PRIVATE ${ESTUARY_FUZZ_FLAGS}
      -fsanitize=fuzzer-no-link)
    target_link_options(${target} PRIVATE -fsanitize=address,undefined)
  endif()
endfunction()

set(ESTUARY_FUZZ_FLAGS -fsanitize=address,undefined -fno-sanitize-recover=undefined
  -fno-omit-frame-pointer -g)

# estuary_library(NAME SOURCES ... DEPS ...)
function(estuary_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  add_library(${name} STATIC ${ARG_SOURCES})
  target_include_directories(${name} PUBLIC ${PROJECT_SOURCE_DIR})
  target_link_libraries(${name} PUBLIC ${ARG_DEPS})
  estuary_warnings(${name})
endfunction()

# estuary_test(NAME SOURCES ... DEPS ... LABELS ... [TIMEOUT s])
# One GoogleTest binary, registered with CTest under the given labels.
function(estuary_test name)
  cmake_parse_arguments(ARG "" "TIMEOUT" "SOURCES;DEPS;LABELS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  set_target_properties(${name} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)
  target_link_libraries(${name} PRIVATE ${ARG_DEPS} GTest::gtest GTest::gmock GTest::gtest_main)
  estuary_warnings(${name})
  if(NOT ARG_LABELS)
    set(ARG_LABELS unit)
  endif()
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 120)
  endif()
  add_test(NAME ${name} COMMAND ${name})
  set_tests_properties(${name} PROPERTIES LABELS "${ARG_LABELS}" TIMEOUT ${ARG_TIMEOUT})
endfunction()

# estuary_fuzzer(NAME SOURCES ... DEPS ... CORPUS dir)
# Built only with -DESTUARY_FUZZ=ON and clang; CI runs each for a bounded time.
function(estuary_fuzzer name)
  cmake_parse_arguments(ARG "" "CORPUS" "SOURCES;DEPS" ${ARGN})
  if(NOT ESTUARY_FUZZ)
    return()
  endif()
  if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "ESTUARY_FUZZ needs clang (CC=clang-14 CXX=clang++-14)")
  endif()
  add_executable(${name} ${ARG_SOURCES})
  set_target_properties(${name} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/fuzz)
  estuary_warnings(${name})
  target_compile_options(${name} PRIVATE -fsanitize=fuzzer)
  target_link_options(${name} PRIVATE -fsanitize=fuzzer)
  target_link_libraries(${name} PRIVATE ${ARG_DEPS})
  # scripts/run-fuzzers.sh reads this list: one "name binary corpus" a line.
  set_property(GLOBAL APPEND PROPERTY ESTUARY_FUZZERS
    "${name} ${CMAKE_BINARY_DIR}/fuzz/${name} ${ARG_CORPUS}")
  get_property(fuzzers GLOBAL PROPERTY ESTUARY_FUZZERS)
  string(REPLACE ";" "\n" fuzzer_lines "${fuzzers}")
  file(WRITE ${CMAKE_BINARY_DIR}/fuzzers.txt "${fuzzer_lines}\n")
endfunction()
