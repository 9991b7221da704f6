/*
 * store_includes_api.c - a probe that must NOT compile.
 *
 * The store stage sits below the API stage: compiled with the store
 * library's include path (what a file in src/controller/store/ sees), this
 * include of an API header must fail.  ctest's layout.wrong_way_include
 * compiles it and expects the failure, so the stage boundaries stay
 * enforced by the build, not by review.
 */
#include "query.h"
