# The grading kit (`make grade-kit`, used by ./grade): everything a submission is built against and
# graded by, in one folder outside the repository's sources, so that a submission's build and runs can
# be shown that folder and nothing else (tools/grade/sandbox.py):
#   grade-kit/include/engine/**.h       the engine's headers (no .cpp: no lab's solution)
#   grade-kit/skeletons/<lab dir>/*.cpp the committed skeletons, for the files a submission lacks
#   grade-kit/lib/libtpsp_grade_kit.a   the engine without any lab-owned file + the rank side of the
#                                       checkers (checkers/rank, checkers/*/run.cpp, inputs): no
#                                       expected values, patterns or placements (those are grader-side)
#   grade-kit/bin/tpsp-check            the grader (links reference/ and no lab code)
#   grade-kit/kit.json                  the compile and link lines, and the lab registry
add_library(tpsp_grade_kit STATIC $<TARGET_OBJECTS:tpsp_engine_base> $<TARGET_OBJECTS:tpsp_rank_objects>
                                  $<TARGET_OBJECTS:tpsp_check_inputs> $<TARGET_OBJECTS:tpsp_runtime_cpu>)
set(TPSP_KIT_DIR ${CMAKE_BINARY_DIR}/grade-kit)
set_target_properties(tpsp_grade_kit PROPERTIES ARCHIVE_OUTPUT_DIRECTORY ${TPSP_KIT_DIR}/lib)
# Submissions compile like a learner copy's lab files, without -Werror (a warning is not a wrong answer).
set(kit_flags -std=c++20 -O2 -g1 -DNDEBUG -DFMT_SHARED -Wall -Wextra -Wno-unused-parameter)
set(kit_libs ${BLAS_LIBRARIES} $<TARGET_FILE:fmt::fmt>)
if(TPSP_WITH_GLOO)
  list(INSERT kit_libs 1 $<TARGET_FILE:gloo>)
endif()
list(JOIN kit_flags "\", \"" kit_flags_json)
list(JOIN kit_libs "\", \"" kit_libs_json)
file(GENERATE OUTPUT ${TPSP_KIT_DIR}/kit.json
     CONTENT "{\"cxx\": \"${CMAKE_CXX_COMPILER}\", \"cxxflags\": [\"${kit_flags_json}\"], \"libs\": [\"${kit_libs_json}\"], \"ldflags\": [\"-pthread\", \"-Wl,-z,now\"], \"registry\": ${TPSP_LABS_JSON}}\n")
if(TPSP_SANITIZE)
  set(kit_all "")
else()
  set(kit_all ALL)  # the tests grade a class with it (tests/grade)
endif()
add_custom_target(grade-kit ${kit_all}
  COMMAND ${CMAKE_COMMAND} -DSRC=${CMAKE_SOURCE_DIR} -DKIT=${TPSP_KIT_DIR} -DGRADER=$<TARGET_FILE:tpsp-check>
          -P ${CMAKE_SOURCE_DIR}/cmake/grade_kit_stage.cmake
  DEPENDS tpsp_grade_kit tpsp-check
  COMMENT "grade-kit: ${TPSP_KIT_DIR}")
