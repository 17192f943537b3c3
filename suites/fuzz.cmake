# The libFuzzer targets, built only with -DASSAY_FUZZ=ON by clang in a tree
# of their own (scripts/fuzz.sh build): each links libFuzzer, the library is
# instrumented for coverage and checked by ASan and UBSan (CMakeLists.txt).
# Seed corpora live in fixtures/fuzz/<target>/; the fuzz label runs each
# target for a bounded time (suites/CMakeLists.txt) and scripts/fuzz.sh long
# runs them for millions of executions.
if(NOT CMAKE_C_COMPILER_ID MATCHES "Clang")
  message(FATAL_ERROR "ASSAY_FUZZ needs clang (libFuzzer): configure with -DCMAKE_C_COMPILER=clang")
endif()
set(ASSAY_FUZZ_TARGETS workload gguf sse)
foreach(t ${ASSAY_FUZZ_TARGETS})
  add_executable(fuzz_${t} ${CMAKE_SOURCE_DIR}/suites/fuzz_${t}.c)
  target_compile_options(fuzz_${t} PRIVATE ${ASSAY_WARNINGS})
  target_link_libraries(fuzz_${t} PRIVATE assay_core)
  target_link_options(fuzz_${t} PRIVATE -fsanitize=fuzzer)
endforeach()
