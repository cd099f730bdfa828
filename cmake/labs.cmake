# The lab plan: which engine translation units each lab owns, and where the learner's copies live
# (from the registry labs/labs.json).
# A lab's learner build links the learner's files in place of the engine's; every other lab's code
# comes from the engine (docs/architecture.md idea 1). tools/strip_solutions.py makes the skeletons.
#
# In a learner copy (`make release`: a RELEASE file at the top, no lab-owned engine files) there is
# no solution to fall back on: every lab's code comes from the learner's files under labs/, so
# TPSP_LAB_<lab>_SOURCES (what is compiled for a lab file) points there — unless the copy holds the
# instructor's prebuilt solutions (below).
# The registry is labs/labs.json (read here, by tools/strip_solutions.py and by the checker's build).
file(READ ${CMAKE_SOURCE_DIR}/labs/labs.json TPSP_LABS_JSON)
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/labs/labs.json)
string(JSON n_labs LENGTH "${TPSP_LABS_JSON}" labs)
math(EXPR last_lab "${n_labs} - 1")
set(TPSP_LABS "")
foreach(i RANGE ${last_lab})
  string(JSON lab GET "${TPSP_LABS_JSON}" labs ${i} id)
  string(JSON TPSP_LAB_${lab}_DIR GET "${TPSP_LABS_JSON}" labs ${i} dir)
  string(JSON lesson GET "${TPSP_LABS_JSON}" labs ${i} lesson)
  foreach(need ${TPSP_LAB_${lab}_DIR}/README.md ${lesson})
    if(NOT EXISTS ${CMAKE_SOURCE_DIR}/${need})
      message(FATAL_ERROR "lab ${lab} (labs/labs.json) names ${need}, which does not exist: a lab has a "
                          "folder with a README.md and a lesson under docs/lessons/")
    endif()
  endforeach()
  string(JSON n_files LENGTH "${TPSP_LABS_JSON}" labs ${i} files)
  math(EXPR last_file "${n_files} - 1")
  set(TPSP_LAB_${lab}_FILES "")
  foreach(j RANGE ${last_file})
    string(JSON f GET "${TPSP_LABS_JSON}" labs ${i} files ${j})
    list(APPEND TPSP_LAB_${lab}_FILES ${f})
  endforeach()
  list(APPEND TPSP_LABS ${lab})
endforeach()

if(EXISTS ${CMAKE_SOURCE_DIR}/RELEASE)
  set(TPSP_LEARNER_COPY TRUE)
else()
  set(TPSP_LEARNER_COPY FALSE)
endif()
# A learner copy may come with the instructor's prebuilt solutions (make solutions-lib in the full
# repository): then, as in the full repository, a lab's build takes every OTHER lab from them, and
# `./check --solution` and `make demo` run them.
set(TPSP_PREBUILT_SOLUTIONS_LIB ${CMAKE_SOURCE_DIR}/solutions/libtpsp_lab_solutions.a)
if(TPSP_LEARNER_COPY AND EXISTS ${TPSP_PREBUILT_SOLUTIONS_LIB})
  set(TPSP_PREBUILT_SOLUTIONS TRUE)
else()
  set(TPSP_PREBUILT_SOLUTIONS FALSE)
endif()
# Which labs the prebuilt solutions hold (solutions/released.json, written with the archive by `make
# solutions-lib LABS=...`; an archive without it holds every lab): an instructor releases the labs one by
# one, and the copy takes the others from the learner's files.
set(TPSP_RELEASED_LABS "")
if(TPSP_PREBUILT_SOLUTIONS)
  set(manifest ${CMAKE_SOURCE_DIR}/solutions/released.json)
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${TPSP_PREBUILT_SOLUTIONS_LIB})
  if(EXISTS ${manifest})
    set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${manifest})
    file(READ ${manifest} released_json)
    string(JSON n ERROR_VARIABLE err LENGTH "${released_json}" labs)
    if(err)
      message(FATAL_ERROR "solutions/released.json: ${err} (it must be {\"labs\": [\"lab00\", ...]}, as make solutions-lib writes it)")
    endif()
    if(n GREATER 0)
      math(EXPR last "${n} - 1")
      foreach(i RANGE ${last})
        string(JSON lab GET "${released_json}" labs ${i})
        if(NOT lab IN_LIST TPSP_LABS)
          message(FATAL_ERROR "solutions/released.json names ${lab}, which labs/labs.json does not declare")
        endif()
        list(APPEND TPSP_RELEASED_LABS ${lab})
      endforeach()
    endif()
  else()
    set(TPSP_RELEASED_LABS ${TPSP_LABS})
  endif()
endif()

# Keep only files that exist (a lab whose engine part is not written yet owns nothing); record the
# source compiled for each (the engine's file, or in a learner copy the learner's).
foreach(lab ${TPSP_LABS})
  set(existing "")
  set(sources "")
  foreach(f ${TPSP_LAB_${lab}_FILES})
    get_filename_component(base ${f} NAME)
    if(TPSP_LEARNER_COPY)
      set(src ${CMAKE_SOURCE_DIR}/${TPSP_LAB_${lab}_DIR}/${base})
    else()
      set(src ${CMAKE_SOURCE_DIR}/${f})
    endif()
    if(EXISTS ${src})
      list(APPEND existing ${f})
      list(APPEND sources ${src})
    endif()
  endforeach()
  set(TPSP_LAB_${lab}_FILES ${existing})
  set(TPSP_LAB_${lab}_SOURCES ${sources})
  list(APPEND TPSP_ALL_LAB_FILES ${existing})
  list(APPEND TPSP_ALL_LAB_SOURCES ${sources})
endforeach()

# tpsp_engine_variant(<target> <lab> <sources...>): a static engine in which <lab>'s files with the
# same names as <sources> are replaced by them (compiled with -Wno-unused-parameter: a skeleton
# leaves parameters unused); the lab's other files and every other lab come from the engine.
# Engine files outside every lab listed (relative, e.g. engine/packed_seq.cpp) in the variable
# TPSP_VARIANT_BASE_EXCLUDE leave the engine base: a source of the same name among <sources> (a
# mutant's edited copy) takes their place.
function(tpsp_engine_variant target lab)
  set(base $<TARGET_OBJECTS:tpsp_engine_base>)
  foreach(f ${TPSP_VARIANT_BASE_EXCLUDE})
    string(REPLACE "." "\\." rx "/${f}.o")
    set(base "$<FILTER:${base},EXCLUDE,${rx}$>")
  endforeach()
  set(objs ${base})
  foreach(l ${TPSP_LABS})
    foreach(f ${TPSP_LAB_${l}_FILES})
      get_filename_component(base ${f} NAME)
      get_filename_component(base_we ${f} NAME_WE)
      set(replaced FALSE)
      if(l STREQUAL lab)
        foreach(src ${ARGN})
          get_filename_component(src_name ${src} NAME)
          if(src_name STREQUAL base)
            set(replaced TRUE)
          endif()
        endforeach()
      endif()
      if(NOT replaced)
        list(APPEND objs $<TARGET_OBJECTS:tpsp_solution_${l}_${base_we}>)
      endif()
    endforeach()
  endforeach()
  add_library(${target} STATIC ${objs} ${ARGN})
  # A thin archive (it names the objects instead of copying them): over a hundred variants (the
  # mutants) would otherwise each hold a 14 MB copy of the engine.
  set_target_properties(${target} PROPERTIES STATIC_LIBRARY_OPTIONS --thin)
  set_source_files_properties(${ARGN} PROPERTIES COMPILE_OPTIONS "-Wno-unused-parameter")
  target_link_libraries(${target} PUBLIC tpsp_engine_deps)
endfunction()
