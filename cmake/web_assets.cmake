# web_assets.cmake - compiles the dashboard (web/) into the controller.
#
# Included by the top-level CMakeLists.txt after the stage libraries.
# uPlot comes from the npm registry, pinned by web/package-lock.json; the
# build runs `npm ci` (cmake/npm_ci.cmake) when web/node_modules is missing
# or older than the lock file, then cmake/embed.cmake writes
# <build>/generated/web_assets.c (the table of src/controller/api/web_assets.h),
# which is linked into ss_api.  The files are index.html and those it names
# (cmake/web_files.cmake).  web/node_modules is never committed.

include(${CMAKE_SOURCE_DIR}/cmake/web_files.cmake)

set(WEB_DIR ${CMAKE_SOURCE_DIR}/web)
set(WEB_UPLOT ${WEB_DIR}/node_modules/uplot/dist/uPlot.iife.min.js
              ${WEB_DIR}/node_modules/uplot/dist/uPlot.min.css)
# index.html and the scripts and stylesheets it names (web_files.cmake);
# CMake runs again when the page changes, so a new file is picked up.
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${WEB_DIR}/index.html)
stepscope_web_refs(${WEB_DIR} web_refs)
set(WEB_SOURCES ${WEB_DIR}/index.html)
foreach(name IN LISTS web_refs)
  stepscope_web_path(${WEB_DIR} ${name} path)
  if(NOT path IN_LIST WEB_UPLOT)
    list(APPEND WEB_SOURCES ${path})
  endif()
endforeach()
set(WEB_ASSETS_C ${CMAKE_BINARY_DIR}/generated/web_assets.c)
find_program(NPM_EXECUTABLE npm)

add_custom_command(
  OUTPUT ${WEB_UPLOT}
  COMMAND ${CMAKE_COMMAND} -DWEB_DIR=${WEB_DIR} -DNPM=${NPM_EXECUTABLE}
          -P ${CMAKE_SOURCE_DIR}/cmake/npm_ci.cmake
  DEPENDS ${WEB_DIR}/package-lock.json ${CMAKE_SOURCE_DIR}/cmake/npm_ci.cmake
  COMMENT "Installing the dashboard's npm packages (npm ci in web/)"
  VERBATIM)

add_custom_command(
  OUTPUT ${WEB_ASSETS_C}
  COMMAND ${CMAKE_COMMAND} -E make_directory ${CMAKE_BINARY_DIR}/generated
  COMMAND ${CMAKE_COMMAND} -DWEB_DIR=${WEB_DIR} -DOUT=${WEB_ASSETS_C}
          -P ${CMAKE_SOURCE_DIR}/cmake/embed.cmake
  DEPENDS ${WEB_SOURCES} ${WEB_UPLOT} ${CMAKE_SOURCE_DIR}/cmake/embed.cmake
          ${CMAKE_SOURCE_DIR}/cmake/web_files.cmake
  COMMENT "Embedding the dashboard (web/) into stepscope"
  VERBATIM)

target_sources(ss_api PRIVATE ${WEB_ASSETS_C})
