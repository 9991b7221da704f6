# web_files.cmake - which files make up the dashboard: web/index.html and
# every file it names in a `<script src="F"></script>` or a
# `<link rel="stylesheet" href="F">` element, in the page's order.  The
# page is the one list: cmake/web_assets.cmake (what the embedding step
# depends on) and cmake/embed.cmake (what it compiles in) both read it, so
# a new script is added by adding its element to index.html.
#
# uPlot's two files (uPlot.iife.min.js, uPlot.min.css) come from
# web/node_modules/uplot/dist, every other file from web/ itself.

# Sets OUT to the file names index.html in WEB_DIR refers to (as written
# in the page: names relative to web/).
function(stepscope_web_refs WEB_DIR OUT)
  file(READ "${WEB_DIR}/index.html" html)
  string(REGEX MATCHALL
         "<script src=\"[^\"]+\"></script>|<link rel=\"stylesheet\" href=\"[^\"]+\">"
         elements "${html}")
  set(names "")
  foreach(e IN LISTS elements)
    string(REGEX REPLACE ".*(src|href)=\"([^\"]+)\".*" "\\2" name "${e}")
    if(NOT name MATCHES "^[A-Za-z0-9_.-]+\\.(js|css)$")
      message(FATAL_ERROR "web/index.html refers to '${name}': only .js and "
                          ".css files of web/ itself can be compiled in")
    endif()
    list(APPEND names "${name}")
  endforeach()
  set(${OUT} "${names}" PARENT_SCOPE)
endfunction()

# Sets OUT to the path of NAME (one of stepscope_web_refs's names).
function(stepscope_web_path WEB_DIR NAME OUT)
  if(NAME MATCHES "^uPlot\\.")
    set(${OUT} "${WEB_DIR}/node_modules/uplot/dist/${NAME}" PARENT_SCOPE)
  else()
    set(${OUT} "${WEB_DIR}/${NAME}" PARENT_SCOPE)
  endif()
endfunction()
