/*
 * threads_test.c - registration of recording threads, their exit, and
 * retirement with their drop counts kept.
 */
#include <pthread.h>

#include "testing.h"
#include "threads.h"

static ss__thread *seen_by_worker;

/* Attaches, overfills its ring by 5 events, and exits. */
static void *worker(void *arg)
{
    (void)arg;
    seen_by_worker = ss__thread_attach();
    if (seen_by_worker) {
        for (unsigned i = 0; i < SS__RING_CAP - SS__RING_STEP_RESERVE + 5; i++)
            ss__ring_push(&seen_by_worker->ring, SS__EV_SYNC, 1, 0, 0, 0);
    }
    return NULL;
}

static int listed(const ss__thread *t)
{
    for (ss__thread *p = ss__threads_first(); p; p = p->next)
        if (p == t)
            return 1;
    return 0;
}

static void attach_lists_the_thread_once(void)
{
    CHECK(ss__tls_thread == NULL);
    ss__thread *t = ss__thread_attach();
    REQUIRE(t);
    CHECK(ss__tls_thread == t);
    CHECK(ss__threads_first() == t);
    CHECK(listed(t));
    CHECK_EQ_INT(t->dead, 0);
    for (int i = 0; i < SS__NAME_SLOTS; i++)
        REQUIRE(t->track.depth[i] == 0);
}

static void exited_thread_is_marked_then_retired(void)
{
    uint64_t before = ss__threads_dropped();
    pthread_t th;
    REQUIRE(pthread_create(&th, NULL, worker, NULL) == 0);
    pthread_join(th, NULL);
    ss__thread *t = seen_by_worker;
    REQUIRE(t);
    CHECK(listed(t));
    CHECK_EQ_INT(__atomic_load_n(&t->dead, __ATOMIC_ACQUIRE), 1);
    CHECK_EQ_INT(ss__threads_dropped(), before + 5);
    ss__threads_retire(t);
    CHECK(!listed(t));
    CHECK_EQ_INT(ss__threads_dropped(), before + 5); /* kept */
}

TEST_LIST(TEST(attach_lists_the_thread_once),
          TEST(exited_thread_is_marked_then_retired))
