# Self-test of tools/check_layering.cmake against the real table in docs/architecture.md: a tree
# that follows the table passes; an upward include (kv -> engine), a sibling include (kv -> model:
# model may read kv's cache store, not the other way round) and a module without a row each fail with the message that names the file, the header and the
# rule.
#   cmake -DROOT=<repo> -DWORK=<scratch dir> -P tests/layering/selftest.cmake
cmake_minimum_required(VERSION 3.25)

function(write_tree dir)
  file(REMOVE_RECURSE "${dir}")
  file(WRITE "${dir}/src/core/status.h" "#pragma once\n#include <string>\n")
  file(WRITE "${dir}/src/backend/batch.h" "#pragma once\n#include \"core/status.h\"\n")
  file(WRITE "${dir}/src/kv/page_pool.h" "#pragma once\n#include \"backend/batch.h\"\n")
  file(WRITE "${dir}/src/model/model.h"
       "#pragma once\n#include <nlohmann/json.hpp>\n#include \"backend/batch.h\"\n")
  file(WRITE "${dir}/src/engine/engine.h"
       "#pragma once\n#include \"kv/page_pool.h\"\n#include \"model/model.h\"\n")
  file(WRITE "${dir}/src/cli/main.cpp" "#include \"engine/engine.h\"\nint main() {}\n")
endfunction()

# Runs the check on `dir`; sets `rc` and `out` in the caller.
function(check dir)
  execute_process(
    COMMAND "${CMAKE_COMMAND}" -DSRC=${dir}/src -DDOC=${ROOT}/docs/architecture.md -P
            ${ROOT}/tools/check_layering.cmake
    RESULT_VARIABLE result OUTPUT_VARIABLE stdout ERROR_VARIABLE stderr)
  set(rc "${result}" PARENT_SCOPE)
  set(out "${stdout}${stderr}" PARENT_SCOPE)
endfunction()

function(expect_failure dir message)
  check("${dir}")
  if(rc EQUAL 0)
    message(FATAL_ERROR "check_layering passed on a tree that breaks the order:\n${out}")
  endif()
  string(FIND "${out}" "${message}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "check_layering failed without \"${message}\":\n${out}")
  endif()
endfunction()

set(tree "${WORK}/layering-selftest")

write_tree("${tree}")
check("${tree}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "check_layering failed on a tree that follows the order:\n${out}")
endif()

file(APPEND "${tree}/src/kv/page_pool.h" "#include \"engine/engine.h\"\n")
expect_failure("${tree}" "src/kv/page_pool.h includes src/engine/engine.h: kv may not depend on engine")

write_tree("${tree}")
file(APPEND "${tree}/src/kv/page_pool.h" "#include <model/model.h>\n")
expect_failure("${tree}" "src/kv/page_pool.h includes src/model/model.h: kv may not depend on model")

write_tree("${tree}")
file(WRITE "${tree}/src/plugins/extra.cpp" "#include \"core/status.h\"\n")
expect_failure("${tree}" "src/plugins/extra.cpp: module plugins has no row in the layer table")

file(REMOVE_RECURSE "${tree}")
message(STATUS "layering self-test: passes a good tree, catches upward, sibling and unlisted")
