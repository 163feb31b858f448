# tests/verify/independence.cmake — the CTest verify.independence: the certificate checker
# (target attncert_verify, lib/src/verify/ and lib/include/attncert/verify/) stays independent
# of the rest of attncert.  Fails if
#   (a) a file of the checker includes an attncert header outside attncert/verify/, or a quoted
#       header that is neither attncert/verify/... nor a file of lib/src/verify/ itself
#       (a relative path such as "../proofs/claim.hpp" would dodge the include-path isolation);
#   (b) the target links anything beyond GMP, MPFR, MPFI and nlohmann_json;
#   (c) lib/include is on the target's include path.
# Usage: cmake -DSOURCE_DIR=<repo> -DPROPERTIES=<build>/verify_independence.txt -P independence.cmake
# (PROPERTIES is written by CMakeLists.txt with file(GENERATE) from the target's properties.)
cmake_minimum_required(VERSION 3.25)
set(failures 0)
macro(fail message)
  message(SEND_ERROR "verify.independence: ${message}")
  math(EXPR failures "${failures} + 1")
endmacro()

# (a) includes
file(GLOB_RECURSE files ${SOURCE_DIR}/lib/src/verify/* ${SOURCE_DIR}/lib/include/attncert/verify/*)
file(GLOB local_files RELATIVE ${SOURCE_DIR}/lib/src/verify ${SOURCE_DIR}/lib/src/verify/*)
list(LENGTH files nfiles)
if(nfiles EQUAL 0)
  fail("no files under lib/src/verify or lib/include/attncert/verify")
endif()
foreach(f ${files})
  file(STRINGS ${f} lines REGEX "^[ \t]*#[ \t]*include")
  foreach(line ${lines})
    if(line MATCHES "#[ \t]*include[ \t]*<([^>]*)>")
      set(name ${CMAKE_MATCH_1})
      if(name MATCHES "^attncert/" AND NOT name MATCHES "^attncert/verify/[^/.][^/]*$")
        fail("${f}: includes <${name}>, outside attncert/verify/")
      endif()
    elseif(line MATCHES "#[ \t]*include[ \t]*\"([^\"]*)\"")
      set(name ${CMAKE_MATCH_1})
      if(NOT name MATCHES "^attncert/verify/[^/.][^/]*$")
        list(FIND local_files "${name}" found)
        if(found EQUAL -1)
          fail("${f}: includes \"${name}\": neither attncert/verify/... nor a file of lib/src/verify/")
        endif()
      endif()
    else()
      fail("${f}: an #include this test cannot read: ${line}")
    endif()
  endforeach()
endforeach()

# (b) link libraries, (c) include directories
if(NOT EXISTS ${PROPERTIES})
  fail("${PROPERTIES} missing (written by CMakeLists.txt at generate time)")
else()
  file(READ ${PROPERTIES} props)
  string(REGEX MATCH "LINK_LIBRARIES=([^\n]*)" _ "${props}")
  set(links "${CMAKE_MATCH_1}")
  string(REGEX MATCH "INCLUDE_DIRECTORIES=([^\n]*)" _ "${props}")
  set(includes "${CMAKE_MATCH_1}")
  foreach(lib ${links})
    get_filename_component(base "${lib}" NAME)
    if(lib STREQUAL "nlohmann_json::nlohmann_json" OR base MATCHES "^(lib)?(gmp|mpfr|mpfi)(\\.so(\\.[0-9.]+)?|\\.a)?$")
      continue()
    endif()
    fail("attncert_verify links '${lib}': only GMP, MPFR, MPFI and nlohmann_json are allowed")
  endforeach()
  if(includes MATCHES "${SOURCE_DIR}/lib/include(;|$)")
    fail("lib/include is on attncert_verify's include path: the checker could include any attncert header")
  endif()
endif()

if(failures GREATER 0)
  message(FATAL_ERROR "verify.independence: ${failures} violation(s)")
endif()
message(STATUS "verify.independence: ${nfiles} files, only attncert/verify/ headers; links: ${links}")
