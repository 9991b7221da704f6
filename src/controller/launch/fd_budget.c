/*
 * fd_budget.c - the open-file limit a run needs (fd_budget.h).
 */
#include "fd_budget.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>

#include "http.h"

void ss_fd_plan_for(uint32_t ranks, uint64_t soft, uint64_t hard,
                    unsigned http_conns, ss_fd_plan *out)
{
    memset(out, 0, sizeof *out);
    out->ranks = ranks;
    out->soft_before = soft;
    out->hard = hard;
    out->need = SS_FD_FIXED + (uint64_t)SS_FD_PER_RANK * ranks;
    out->room = SS_FD_FIXED + (uint64_t)SS_FD_PER_RANK_ROOM * ranks;
    out->enough = hard >= out->need;
    uint64_t want = out->room + http_conns;
    out->soft = soft >= want ? soft : want <= hard ? want : hard;
}

static uint64_t limit_value(rlim_t v)
{
    return v == RLIM_INFINITY ? UINT64_MAX : (uint64_t)v;
}

int ss_fd_budget_apply(uint32_t ranks, ss_fd_plan *out, char *err,
                       size_t errlen)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0) {
        snprintf(err, errlen, "cannot read the open-file limit: %s",
                 strerror(errno));
        return -1;
    }
    ss_fd_plan_for(ranks, limit_value(rl.rlim_cur), limit_value(rl.rlim_max),
                   SS_HTTP_MAX_CONNECTIONS, out);
    if (!out->enough) {
        snprintf(err, errlen, "%" PRIu32 " rank%s on this node need%s about "
                 "%" PRIu64 " open files in the controller (%d each and %d "
                 "of its own), but the hard open-file limit is %" PRIu64
                 ": raise it (`ulimit -Hn`, /etc/security/limits.conf, a "
                 "container's --ulimit nofile=, a systemd unit's "
                 "LimitNOFILE=) or start fewer ranks per node; nothing was "
                 "launched", ranks, ranks == 1 ? "" : "s",
                 ranks == 1 ? "s" : "", out->need,
                 SS_FD_PER_RANK, SS_FD_FIXED, out->hard);
        return -1;
    }
    if (out->soft > out->soft_before) {
        rl.rlim_cur = out->soft == UINT64_MAX ? RLIM_INFINITY
                                              : (rlim_t)out->soft;
        if (setrlimit(RLIMIT_NOFILE, &rl) != 0) {
            snprintf(err, errlen, "cannot raise the open-file limit from "
                     "%" PRIu64 " to %" PRIu64 ": %s", out->soft_before,
                     out->soft, strerror(errno));
            return -1;
        }
    }
    return 0;
}
