/*
 * store_writer.h - the store's queue and the writer thread that applies
 * it in batches.  Internal to the store folder.
 */
#ifndef STEPSCOPE_STORE_WRITER_H
#define STEPSCOPE_STORE_WRITER_H

#include "store_state.h"

/* Appends IT (a heap item the queue now owns) to S's queue, counts its
 * units and wakes the writer when it should act (the queue was empty or
 * just reached half of cfg.queue_limit).  Takes mu; call without it. */
void ss__store_enqueue(ss_store *s, item *it);

/* Takes S's whole queue (mu held), applies it as one batch with mu
 * released meanwhile (dbmu taken), counts it and wakes the flushers.
 * With a flush wanted, the store stopping or the totals wanted, the batch
 * (empty or not) writes the rank totals owed.  Returns with mu held
 * again.  Every item is freed. */
void ss__store_drain_locked(ss_store *s);

/* The writer thread (ARG: the ss_store): drains the queue when its oldest
 * item is a flush interval old, when it is half full or a flush is
 * wanted, writes the totals alone when a flush wants them, until stop is
 * set and the queue is empty (and what totals are owed tried once). */
void *ss__store_writer_main(void *arg);

#endif
