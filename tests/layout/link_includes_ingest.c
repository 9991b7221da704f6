/*
 * link_includes_ingest.c - a probe that must NOT compile.
 *
 * The link stage sits right above the base stage: compiled with the link
 * library's include path (what a file in src/controller/link/ sees), this
 * include of the ingest stage's header must fail, so the agent link's
 * codec and authentication stay free of the stages that use them.
 */
#include "ingest.h"
