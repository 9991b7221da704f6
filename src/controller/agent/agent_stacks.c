/*
 * agent_stacks.c - a node agent's stacks on request (agent_stacks.h).
 */
#include "agent_stacks.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "rank_env.h"
#include "stack_collect.h"

struct ss_agent_stacks {
    ss_agent_stacks_config cfg;
    ss_stack_collector *collector; /* created on the first request */
};

/* One request in flight. */
typedef struct {
    ss_agent_stacks *s;
    uint32_t request_id;
} stacks_call;

ss_agent_stacks *ss_agent_stacks_new(const ss_agent_stacks_config *cfg)
{
    ss_agent_stacks *s = calloc(1, sizeof *s);
    if (s)
        s->cfg = *cfg;
    return s;
}

static void send_rank_stacks(ss_agent_stacks *s, uint32_t request_id,
                             uint32_t rank, const char *text)
{
    link_send_parts(LINK_STACKS_PART, request_id, rank, text, strlen(text),
                    s->cfg.send, s->cfg.ctx);
}

static void on_stacks_collected(void *ctx, const char *const *ranks, size_t n,
                                double elapsed_ms)
{
    stacks_call *call = ctx;
    ss_agent_stacks *s = call->s;
    (void)elapsed_ms;
    for (size_t i = 0; i < n; i++)
        send_rank_stacks(s, call->request_id,
                         s->cfg.rank_base + (uint32_t)i, ranks[i]);
    free(call);
}

static void refuse(ss_agent_stacks *s, uint32_t request_id, const char *why)
{
    for (uint32_t i = 0; i < s->cfg.nproc; i++) {
        ss_buf b = {0};
        ss_buf_printf(&b, "{\"rank\":%u,\"host\":", s->cfg.rank_base + i);
        ss_buf_json_str(&b, s->cfg.host);
        ss_buf_puts(&b, ",\"pid\":0,\"state\":\"no_answer\",\"why\":");
        ss_buf_json_str(&b, why);
        ss_buf_puts(&b, ",\"threads\":[]}");
        if (!b.oom)
            send_rank_stacks(s, request_id, s->cfg.rank_base + i, b.data);
        ss_buf_free(&b);
    }
}

void ss_agent_stacks_refuse(ss_agent_stacks *s, const link_stacks_req *q,
                            const char *why)
{
    refuse(s, q->request_id, why);
}

void ss_agent_stacks_request(ss_agent_stacks *s, const link_stacks_req *q)
{
    char exe[PATH_MAX], err[200];
    if (!s->collector && ss_rank_env_self_exe(exe, sizeof exe, err,
                                              sizeof err) == 0)
        s->collector = ss_stack_collector_new(s->cfg.loop, exe,
                                              s->cfg.host);
    uint32_t n = s->cfg.nproc;
    ss_stack_target *t = calloc(n, sizeof *t);
    char (*files)[PATH_MAX] = calloc(n, sizeof *files);
    stacks_call *call = malloc(sizeof *call);
    int rc = -1;
    if (s->collector && t && files && call) {
        for (uint32_t i = 0; i < n; i++) {
            snprintf(files[i], sizeof files[i], "%s/stack.%u",
                     s->cfg.stack_dir, s->cfg.rank_base + i);
            t[i] = (ss_stack_target){s->cfg.rank_base + i,
                                     s->cfg.pid_of(s->cfg.ctx, i), files[i]};
        }
        *call = (stacks_call){s, q->request_id};
        ss_stack_options opt = {q->native, q->deadline_ms};
        rc = ss_stack_collect(s->collector, t, n, &opt, on_stacks_collected,
                              call);
    }
    free(t);
    free(files);
    if (rc != 0) {
        free(call);
        refuse(s, q->request_id, rc == -EBUSY
               ? "the node's agent is busy with other stacks requests"
               : "the node's agent could not collect (out of memory)");
    }
}

void ss_agent_stacks_close(ss_agent_stacks *s)
{
    /* its callbacks run now or on the loop, with what was collected */
    if (s)
        ss_stack_collector_close(s->collector);
}

void ss_agent_stacks_free(ss_agent_stacks *s)
{
    free(s);
}
