# rocky_add_gtest(NAME SOURCES a.cpp b.cpp LIBS lib... [LABELS l...] [TIMEOUT s])
# Builds one GoogleTest executable and registers it with CTest as a single test
# (one process per executable keeps CTest output short and the 2-core CI fast).
# A test named in ROCKY_CPU_TESTS (tests/CMakeLists.txt) also gets the label `cpu`: it needs no
# Vulkan device, and the arm64 cross build runs exactly these under qemu-user (`ctest -L cpu`).
function(rocky_add_gtest name)
  cmake_parse_arguments(T "" "TIMEOUT" "SOURCES;LIBS;LABELS" ${ARGN})
  find_package(GTest REQUIRED)
  add_executable(${name} ${T_SOURCES})
  target_link_libraries(${name} PRIVATE ${T_LIBS} GTest::gtest GTest::gtest_main GTest::gmock)
  target_include_directories(${name} PRIVATE ${CMAKE_SOURCE_DIR}/tests)
  target_compile_definitions(${name} PRIVATE ROCKY_SHARED_DIR="${ROCKY_SHARED_DIR}"
                                             ROCKY_BINARY_DIR="${CMAKE_BINARY_DIR}")
  add_test(NAME ${name} COMMAND ${name} --gtest_brief=1)
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 600)
  endif()
  set_tests_properties(${name} PROPERTIES TIMEOUT ${T_TIMEOUT}
                       ENVIRONMENT "XDG_RUNTIME_DIR=${CMAKE_BINARY_DIR}/xdg-runtime")
  if(name IN_LIST ROCKY_CPU_TESTS)
    list(APPEND T_LABELS cpu)
  endif()
  if(T_LABELS)
    set_tests_properties(${name} PROPERTIES LABELS "${T_LABELS}")
  endif()
endfunction()

# XDG_RUNTIME_DIR for tests: an existing 0700 directory, as on the board (panvk needs it).
file(MAKE_DIRECTORY ${CMAKE_BINARY_DIR}/xdg-runtime)
file(CHMOD ${CMAKE_BINARY_DIR}/xdg-runtime DIRECTORY_PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE)
