/*
 * names.h - the process-wide table of interned names (phases, sync points,
 * metrics).
 *
 * Names get ids 1..SS_MAX_NAMES in the order they are first interned and
 * keep them for the life of the process, whether or not the recorder is
 * enabled.  The table is guarded by one mutex: interning is not a hot-path
 * operation (call sites cache their id, see SS_NAME).
 */
#ifndef STEPSCOPE_LIB_NAMES_H
#define STEPSCOPE_LIB_NAMES_H

#include "stepscope.h"

/* Returns the id of NAME, interning a copy of it on first use; 0 when NAME
 * is NULL, empty, longer than SS_MAX_NAME_LEN, holds a control character,
 * or the table is full. */
ss_name_id ss__name_intern(const char *name);

/* Copies the name of ID into OUT (NUL-terminated).  Returns 0, or -1 when
 * no name has that id. */
int ss__name_copy(ss_name_id id, char out[SS_MAX_NAME_LEN + 1]);

/* Hold and release the table's mutex around fork() (pthread_atfork), so
 * that a child never inherits it locked by a thread it does not have. */
void ss__names_lock(void);
void ss__names_unlock(void);

#endif
