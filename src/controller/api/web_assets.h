/*
 * web_assets.h - the dashboard's files, compiled into the binary.
 *
 * The build (cmake/web_assets.cmake) turns web/index.html and every script
 * and stylesheet it names (the scripts and style.css of web/, and uPlot's
 * distribution files from web/node_modules, put there by `npm ci`) into a
 * generated C source defining the table below, so `stepscope` serves its
 * dashboard and writes `report --html` pages without any file beside it
 * and without network access.
 *
 * Paths are the URL paths the HTTP server answers ("/", "/index.html",
 * and "/NAME" for each file the page names, e.g. "/app.js").  Each
 * file's bytes are followed by a NUL that LEN does not count, so a text
 * file can be used as a C string.  Everything is static, constant data.
 */
#ifndef STEPSCOPE_WEB_ASSETS_H
#define STEPSCOPE_WEB_ASSETS_H

#include <stddef.h>

#include "http.h"

extern const ss_static_file ss_web_files[];
extern const size_t ss_web_files_count;

#endif
