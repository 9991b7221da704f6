/*
 * sender.h - the background thread that drains the rings, folds events into
 * step records and ships them to the controller.
 *
 * There is one sender per process.  Every ~10 ms it drains every thread's
 * ring, folds the events (fold.h) and queues the complete steps, with NAME
 * frames for names this connection has not seen yet, into a bounded
 * outgoing buffer (2 MiB) that it writes to a non-blocking socket.  It
 * connects (and reconnects every ~500 ms) by itself, performs the
 * HELLO/WELCOME handshake and sends cumulative drop COUNTERS every second.
 * Records that cannot be queued (no connection, buffer full, REJECT) are
 * dropped and counted; nothing ever waits for the controller except
 * ss__sender_stop(), for at most about a second.
 */
#ifndef STEPSCOPE_LIB_SENDER_H
#define STEPSCOPE_LIB_SENDER_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "stepscope.h"

/* Starts the sender for CFG (copied).  Returns 0, or SS_ENOMEM with a
 * reason in ERR when the buffer or the thread cannot be created. */
int ss__sender_start(const ss__config *cfg, char *err, size_t errlen);

/* Drains what has been recorded, queues the last steps, COUNTERS and BYE,
 * waits up to about one second for the controller to read them, closes the
 * connection and joins the thread.  No-op when not started. */
void ss__sender_stop(void);

/* 1 once the controller has rejected this rank (nothing is sent after). */
int ss__sender_rejected(void);

/* Drops counted by the sender (late or excess events, lost records), as of
 * its last round; ring drops are counted by threads.h. */
uint64_t ss__sender_dropped_events(void);
uint64_t ss__sender_dropped_records(void);
/* Vectors the fold and the sender dropped (ring drops: threads.h). */
uint64_t ss__sender_dropped_vectors(void);

/* Keeps LABELS[0..N) (N <= SS_MAX_VALUES) as the labels of vector name
 * ID, to be sent once per connection and change (ss_values_labels).
 * Returns 0, SS_EINVAL (a NULL, too long or control-character label) or
 * SS_ENOMEM (out of memory, or over the process's 1 MiB of labels). */
int ss__sender_labels(unsigned id, const char *const *labels, size_t n);

/* Profiling requests (stepscope.h).  Enable: FEATURES goes out on this
 * and every later connection.  Take: 1 and the pending request (cleared),
 * else 0; one atomic load when none.  Answer: queues a PROFILE_DONE for
 * the sender thread; 0, SS_EINVAL or SS_ESTATE (SENDER_MAX_ANSWERS
 * waiting). */
void ss__sender_profile_enable(void);
int ss__sender_profile_take(ss_profile_request *out);
int ss__sender_profile_answer(uint32_t request_id, int ok, int64_t marker_ns,
                              const char *text);

/* pthread_atfork hooks: the child closes the inherited socket and forgets
 * the sender thread, which does not exist in it. */
void ss__sender_atfork_prepare(void);
void ss__sender_atfork_parent(void);
void ss__sender_atfork_child(void);

#endif
