/*
 * restart.c - the restart policy of `stepscope run` (restart.h): whether an
 * ended attempt is followed by another, after which delay, and the
 * signature that recognises a deterministic start-up failure.
 */
#include "restart.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#define HOUR_NS ((ss_mono_ns)3600 * 1000000000)

void ss_restart_init(ss_restart_policy *p, const ss_restart_config *cfg)
{
    memset(p, 0, sizeof *p);
    p->cfg = *cfg;
    if (p->cfg.per_hour > SS_RESTART_PER_HOUR_MAX)
        p->cfg.per_hour = SS_RESTART_PER_HOUR_MAX;
}

/* Restarts granted within the hour before NOW. */
static uint32_t in_last_hour(const ss_restart_policy *p, ss_mono_ns now)
{
    uint32_t kept = p->restarts < p->cfg.per_hour ? p->restarts
                                                   : p->cfg.per_hour;
    uint32_t n = 0;
    for (uint32_t i = 0; i < kept; i++)
        if (now - p->granted_at[i] < HOUR_NS)
            n++;
    return n;
}

static uint32_t backoff(const ss_restart_policy *p)
{
    uint64_t d = p->cfg.backoff_ms;
    for (uint32_t i = 0; i < p->restarts && d < SS_RESTART_BACKOFF_MAX_MS; i++)
        d *= 2;
    return d > SS_RESTART_BACKOFF_MAX_MS ? SS_RESTART_BACKOFF_MAX_MS
                                         : (uint32_t)d;
}

void ss_restart_decide(ss_restart_policy *p, const ss_attempt_end *end,
                       ss_restart_verdict *out)
{
    memset(out, 0, sizeof *out);
    const char *sig = end->signature ? end->signature : "";
    /* Rule 2 looks at two attempts in a row: remember this one first. */
    int same_early = !end->made_progress && end->restartable && sig[0] &&
                     p->early_failed && strcmp(p->early_sig, sig) == 0;
    p->early_failed = !end->made_progress && end->restartable && sig[0];
    snprintf(p->early_sig, sizeof p->early_sig, "%s",
             p->early_failed ? sig : "");
    if (!end->restartable) {
        snprintf(out->why, sizeof out->why, "not restarted: %s",
                 end->why_not ? end->why_not : "the job did not fail");
        return;
    }
    if (same_early) {
        snprintf(out->why, sizeof out->why, "not restarted: attempts %" PRIu32
                 " and %" PRIu32 " failed the same way before their first "
                 "step (%s); restarting a deterministic failure would not "
                 "help", end->attempt - 1, end->attempt, sig);
        return;
    }
    if (p->restarts >= p->cfg.max_restarts) {
        if (p->cfg.max_restarts == 0)
            snprintf(out->why, sizeof out->why, "not restarted (--max-"
                     "restarts 0)");
        else
            snprintf(out->why, sizeof out->why, "not restarted: all %" PRIu32
                     " restart%s used (--max-restarts)", p->cfg.max_restarts,
                     p->cfg.max_restarts == 1 ? "" : "s");
        return;
    }
    if (p->cfg.per_hour && in_last_hour(p, end->now) >= p->cfg.per_hour) {
        snprintf(out->why, sizeof out->why, "not restarted: %" PRIu32
                 " restart%s within the last hour already "
                 "(--max-restarts-per-hour %" PRIu32 ")", p->cfg.per_hour,
                 p->cfg.per_hour == 1 ? "" : "s", p->cfg.per_hour);
        return;
    }
    out->restart = 1;
    out->delay_ms = backoff(p);
    if (p->cfg.per_hour)
        p->granted_at[p->restarts % p->cfg.per_hour] = end->now;
    p->restarts++;
    snprintf(out->why, sizeof out->why, "restart %" PRIu32 " of %" PRIu32
             " (attempt %" PRIu32 ") in %.1f s", p->restarts,
             p->cfg.max_restarts, end->attempt + 1, out->delay_ms / 1000.0);
}

/* Copies the line starting at P (up to '\n') into OUT. */
static void copy_line(const char *p, char *out, size_t outlen)
{
    size_t n = strcspn(p, "\n");
    if (n >= outlen)
        n = outlen - 1;
    memcpy(out, p, n);
    out[n] = '\0';
}

void ss_restart_signature(int status, const char *failure_text, char *out,
                          size_t outlen)
{
    if (outlen == 0)
        return;
    char how[96] = "", last[240] = "";
    const char *text = failure_text ? failure_text : "";
    const char *first = strstr(text, " failed first: ");
    if (first) {
        copy_line(first + strlen(" failed first: "), how, sizeof how);
        char *pid = strstr(how, " (pid");
        if (pid)
            *pid = '\0';
        /* The rank's number is just before " failed first". */
        const char *p = first;
        while (p > text && p[-1] >= '0' && p[-1] <= '9')
            p--;
        char prefix[32];
        snprintf(prefix, sizeof prefix, "[rank %.*s] ", (int)(first - p), p);
        size_t plen = strlen(prefix);
        for (const char *line = text; *line;) {
            if (strncmp(line, prefix, plen) == 0)
                copy_line(line + plen, last, sizeof last);
            const char *nl = strchr(line, '\n');
            if (!nl)
                break;
            line = nl + 1;
        }
    }
    snprintf(out, outlen, "status %d: %s | %s", status, how, last);
}
