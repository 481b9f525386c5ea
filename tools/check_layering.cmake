# Fails when a source file includes a header of a module it may not depend on.
#
#   cmake -P tools/check_layering.cmake                          # checks src/ against docs/
#   cmake -DSRC=<src dir> -DDOC=<architecture.md> -P tools/check_layering.cmake
#
# The allowed dependencies are the table between the `layering:begin` and `layering:end` markers
# in docs/architecture.md ("Dependency direction"): one row per module, "| `X` | `A`, `B` |"
# meaning files under src/X/ may include headers of src/X/, src/A/ and src/B/ only. Every module
# under src/ must have a row. An include counts when its path starts with a module's folder
# ("engine/engine.h", quoted or in angle brackets); other includes (the standard library,
# third-party headers) are not checked. Each violation is printed as
#   src/X/y.cpp includes src/Z/w.h: X may not depend on Z
# and the script exits non-zero. ctest runs it (tests/CMakeLists.txt: layering.check), plus a
# self-test on a planted upward include (tests/layering_selftest.cmake).
# Plain CMake so it needs nothing beyond the build's own tools.
cmake_minimum_required(VERSION 3.25)

get_filename_component(root "${CMAKE_CURRENT_LIST_DIR}/.." ABSOLUTE)
if(NOT DEFINED SRC)
  set(SRC "${root}/src")
endif()
if(NOT DEFINED DOC)
  set(DOC "${root}/docs/architecture.md")
endif()

# ---- the table -----------------------------------------------------------------------------
file(READ "${DOC}" doc)
string(FIND "${doc}" "<!-- layering:begin" begin)
string(FIND "${doc}" "<!-- layering:end" end)
if(begin EQUAL -1 OR end EQUAL -1 OR end LESS begin)
  message(FATAL_ERROR "${DOC}: no layer table (the lines between <!-- layering:begin --> and "
                      "<!-- layering:end --> markers)")
endif()
math(EXPR length "${end} - ${begin}")
string(SUBSTRING "${doc}" ${begin} ${length} table)
string(REGEX MATCHALL "\n\\| `[a-z_]+` \\|[^\n]*" rows "${table}")
set(modules "")
foreach(row IN LISTS rows)
  if(NOT row MATCHES "^\n\\| `([a-z_]+)` \\|([^|\n]*)\\|")
    message(FATAL_ERROR "${DOC}: layer table row \"${row}\" is not | `module` | `a`, `b` |")
  endif()
  set(module "${CMAKE_MATCH_1}")
  string(REGEX MATCHALL "`[a-z_]+`" allowed "${CMAKE_MATCH_2}")
  string(REPLACE "`" "" allowed "${allowed}")
  list(APPEND modules ${module})
  set(allowed_${module} ${module} ${allowed})
endforeach()
if(NOT modules)
  message(FATAL_ERROR "${DOC}: the layer table has no rows")
endif()
foreach(module IN LISTS modules)
  foreach(dep IN LISTS allowed_${module})
    if(NOT dep IN_LIST modules)
      message(FATAL_ERROR "${DOC}: layer table: ${module} may include \"${dep}\", which has no row")
    endif()
  endforeach()
endforeach()

# ---- the sources ---------------------------------------------------------------------------
file(GLOB_RECURSE files RELATIVE "${SRC}" "${SRC}/*.h" "${SRC}/*.hpp" "${SRC}/*.cpp" "${SRC}/*.cc"
     "${SRC}/*.cu" "${SRC}/*.cuh" "${SRC}/*.inc")
list(SORT files)
set(violations "")
set(num_violations 0)
foreach(file IN LISTS files)
  if(NOT file MATCHES "^([^/]+)/")
    continue()  # a file directly under src/ belongs to no module
  endif()
  set(module "${CMAKE_MATCH_1}")
  if(NOT module IN_LIST modules)
    string(APPEND violations "\nsrc/${file}: module ${module} has no row in the layer table")
    math(EXPR num_violations "${num_violations} + 1")
    continue()
  endif()
  file(STRINGS "${SRC}/${file}" includes REGEX "^[ \t]*#[ \t]*include[ \t]*[<\"][^>\"]+[>\"]")
  foreach(line IN LISTS includes)
    if(NOT line MATCHES "#[ \t]*include[ \t]*[<\"](([^/>\"]+)/[^>\"]+)[>\"]")
      continue()
    endif()
    set(header "${CMAKE_MATCH_1}")
    set(target "${CMAKE_MATCH_2}")
    if(NOT target IN_LIST modules)
      continue()  # not a project header (<nlohmann/json.hpp>, <sys/wait.h> ...)
    endif()
    if(NOT target IN_LIST allowed_${module})
      string(APPEND violations
             "\nsrc/${file} includes src/${header}: ${module} may not depend on ${target}")
      math(EXPR num_violations "${num_violations} + 1")
    endif()
  endforeach()
endforeach()

list(LENGTH files num_files)
if(num_violations GREATER 0)
  # NOTICE prints the lines as they are (FATAL_ERROR would re-wrap them).
  message(NOTICE "layering: ${num_violations} include(s) break the layer order in ${DOC} "
                 "(\"Dependency direction\"):${violations}\n"
                 "Move the code down to a module both may use, or change the table (and say why) "
                 "if the design changed.")
  message(FATAL_ERROR "layering: ${num_violations} violation(s)")
endif()
message(STATUS "layering: ${num_files} files under ${SRC} follow the layer table")
