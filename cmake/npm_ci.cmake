# npm_ci.cmake - installs the dashboard's npm packages (uPlot) into
# web/node_modules with `npm ci`, exactly as web/package-lock.json pins
# them.  Run by the build when web/node_modules is missing or older than
# the lock file (cmake/web_assets.cmake):
#
#   cmake -DWEB_DIR=<source>/web -DNPM=<npm or NPM-NOTFOUND> -P npm_ci.cmake
#
# Fails with a message saying what to do when npm is missing or the
# registry cannot be reached.
cmake_minimum_required(VERSION 3.18)

set(what "the dashboard needs uPlot in web/node_modules")
if(NOT NPM)
  message(FATAL_ERROR
    "${what}, and npm was not found.\n"
    "Install Node.js and npm (scripts/install-deps.sh does), or run\n"
    "  (cd web && npm ci)\n"
    "on a machine that has them and copy web/node_modules here.")
endif()
message(STATUS "npm ci in ${WEB_DIR}")
execute_process(
  COMMAND "${NPM}" ci --ignore-scripts --no-audit --no-fund --loglevel=error
  WORKING_DIRECTORY "${WEB_DIR}"
  RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR
    "${what}: `npm ci` in ${WEB_DIR} failed (${rc}).\n"
    "It needs the npm registry once; run it by hand to see why:\n"
    "  (cd web && npm ci)")
endif()
# Newer than the lock file from now on, so the build does not run this again.
file(TOUCH
  "${WEB_DIR}/node_modules/uplot/dist/uPlot.iife.min.js"
  "${WEB_DIR}/node_modules/uplot/dist/uPlot.min.css")
