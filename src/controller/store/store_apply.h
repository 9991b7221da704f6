/*
 * store_apply.h - writing one queued item with the writer's prepared
 * statements.  Internal to the store folder.
 */
#ifndef STEPSCOPE_STORE_APPLY_H
#define STEPSCOPE_STORE_APPLY_H

#include "store_state.h"

/* Writes IT into S's open transaction (writer, dbmu held).  Returns 0, or
 * -1 when a statement failed (reported on stderr, its reason kept as the
 * batch's error) or memory ran out; the caller then rolls the batch
 * back. */
int ss__store_apply(ss_store *s, const item *it);

#endif
