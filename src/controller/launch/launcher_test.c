/*
 * launcher_test.c - runs real rank processes (/bin/sh scripts) under the
 * launcher on a real libuv loop and checks environment (one node, and one
 * node of several: global RANK, GROUP_RANK, MASTER_ADDR), output forwarding,
 * logs, exit status, first-failure naming, the SIGTERM -> SIGKILL grace
 * period and that no rank outlives a launcher killed with SIGKILL.
 *
 * The exec shim: the launcher runs each rank as `SHIM __rank-exec -- CMD`.
 * Here SHIM is this test binary itself (/proc/self/exe).  TEST_LIST owns
 * main(), so a constructor routes the shim invocation before main runs:
 * glibc passes (argc, argv, envp) to ELF constructors, which makes the test
 * exercise exactly the code path the stepscope executable uses.
 */
#include "containment.h"
#include "launcher.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "testing.h"

__attribute__((constructor)) static void route_rank_exec(int argc, char **argv,
                                                         char **envp)
{
    (void)envp;
    if (argc > 1 && strcmp(argv[1], SS_RANK_EXEC_ARG) == 0)
        exit(ss_launcher_rank_exec_main(argc, argv));
    if (argc > 1 && strcmp(argv[1], SS_WATCHDOG_ARG) == 0)
        exit(ss_containment_watchdog_main(argc - 1, argv + 1));
}

#define NP 3
#define GUARD_MS 15000

typedef struct {
    uv_loop_t loop;
    uv_timer_t guard;   /* fails the test instead of hanging */
    uv_timer_t poll;    /* optional per-test periodic check */
    ss_launcher *l;
    char dir[PATH_MAX];
    char shim[PATH_MAX];
    int out_fd, err_fd;
    int all_exited, timed_out;
    int exits;
    int exited[NP];
    int64_t code[NP];
    int sig[NP];
    int order[NP];              /* rank of the i-th exit */
    uint64_t t_terminate, t_done;
    int terminated;
} fixture;

static uint64_t now_ms(void)
{
    return uv_hrtime() / 1000000u;
}

static void on_rank_exit(void *ctx, uint32_t rank, int64_t code, int sig)
{
    fixture *f = ctx;
    if (rank >= NP)
        return;
    f->exited[rank]++;
    f->code[rank] = code;
    f->sig[rank] = sig;
    f->order[f->exits++] = (int)rank;
}

static void on_all_exited(void *ctx)
{
    fixture *f = ctx;
    f->all_exited++;
    f->t_done = now_ms();
    uv_timer_stop(&f->guard);
    uv_timer_stop(&f->poll);
}

static int last_step(void *ctx, uint32_t rank, uint64_t *step)
{
    (void)ctx;
    if (rank != 1)
        return 0;
    *step = 41;
    return 1;
}

static void on_guard(uv_timer_t *t)
{
    fixture *f = t->data;
    f->timed_out = 1;
    ss_launcher_kill_now(f->l, "test timed out");
}

static int fixture_init(fixture *f)
{
    memset(f, 0, sizeof *f);
    const char *tmp = getenv("TMPDIR");
    snprintf(f->dir, sizeof f->dir, "%s/launcher_test.XXXXXX",
             tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(f->dir))
        return -1;
    ssize_t n = readlink("/proc/self/exe", f->shim, sizeof f->shim - 1);
    if (n <= 0)
        return -1;
    f->shim[n] = '\0';
    char path[PATH_MAX + 16];
    snprintf(path, sizeof path, "%s/echo.out", f->dir);
    f->out_fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    snprintf(path, sizeof path, "%s/echo.err", f->dir);
    f->err_fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (f->out_fd < 0 || f->err_fd < 0 || uv_loop_init(&f->loop) != 0)
        return -1;
    uv_timer_init(&f->loop, &f->guard);
    uv_timer_init(&f->loop, &f->poll);
    f->guard.data = f->poll.data = f;
    return 0;
}

static void fixture_config(fixture *f, ss_launch_config *cfg, char **argv)
{
    ss_launch_config_defaults(cfg);
    cfg->nprocs = NP;
    cfg->argv = argv;
    cfg->exec_shim = f->shim;
    cfg->log_dir = f->dir;
    cfg->echo_out_fd = f->out_fd;
    cfg->echo_err_fd = f->err_fd;
}

static int fixture_start(fixture *f, const ss_launch_config *cfg)
{
    ss_launch_callbacks cb = {f, on_rank_exit, on_all_exited, last_step};
    char err[256] = "";
    f->l = ss_launcher_start(&f->loop, cfg, &cb, err, sizeof err);
    if (!f->l) {
        fprintf(stderr, "  start failed: %s\n", err);
        return -1;
    }
    uv_timer_start(&f->guard, on_guard, GUARD_MS, 0);
    uv_run(&f->loop, UV_RUN_DEFAULT);
    return 0;
}

/* Destroys the launcher, drains the loop and checks nothing is left. */
static void fixture_done(fixture *f)
{
    ss_launcher_destroy(f->l);
    uv_close((uv_handle_t *)&f->guard, NULL);
    uv_close((uv_handle_t *)&f->poll, NULL);
    uv_run(&f->loop, UV_RUN_DEFAULT);
    CHECK_EQ_INT(uv_loop_close(&f->loop), 0);
    close(f->out_fd);
    close(f->err_fd);
    char cmd[PATH_MAX + 16];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", f->dir);
    CHECK_EQ_INT(system(cmd), 0);
}

/* Reads a whole file into a malloc'd string ("" when missing). */
static char *slurp(const char *path)
{
    FILE *fp = fopen(path, "r");
    char *s = NULL;
    size_t n = 0;
    if (fp) {
        FILE *mem = open_memstream(&s, &n);
        char buf[4096];
        size_t k;
        while ((k = fread(buf, 1, sizeof buf, fp)) > 0)
            fwrite(buf, 1, k, mem);
        fclose(mem);
        fclose(fp);
    }
    return s ? s : strdup("");
}

static char *slurp_in(const fixture *f, const char *name)
{
    char path[PATH_MAX + 64];
    snprintf(path, sizeof path, "%s/%s", f->dir, name);
    return slurp(path);
}

static int count_substr(const char *s, const char *needle)
{
    int n = 0;
    for (const char *p = s; (p = strstr(p, needle)) != NULL; p += strlen(needle))
        n++;
    return n;
}

/* ---- tests ---- */

static void env_is_set_per_rank(void)
{
    fixture f;
    REQUIRE(fixture_init(&f) == 0);
    unsetenv("OMP_NUM_THREADS");
    setenv("RANK", "77", 1); /* inherited values must be overridden */
    char *argv[] = {"/bin/sh", "-c",
        "echo \"R=$RANK L=$LOCAL_RANK W=$WORLD_SIZE LW=$LOCAL_WORLD_SIZE"
        " G=$GROUP_RANK RR=$ROLE_RANK RW=$ROLE_WORLD_SIZE RN=$ROLE_NAME"
        " MA=$MASTER_ADDR MP=$MASTER_PORT RC=$TORCHELASTIC_RESTART_COUNT"
        " MR=$TORCHELASTIC_MAX_RESTARTS RID=$TORCHELASTIC_RUN_ID"
        " OMP=$OMP_NUM_THREADS SA=$STEPSCOPE_ADDR ST=$STEPSCOPE_TOKEN"
        " PP=${STEPSCOPE_PARENT_PID-unset} FH=${PYTHONFAULTHANDLER-unset}\";"
        " echo \"PID=$$ PGRP=$(cut -d' ' -f5 /proc/$$/stat)\"", NULL};
    char *env[] = {"STEPSCOPE_ADDR=unix:/nowhere", "STEPSCOPE_TOKEN=t0k",
                   "WORLD_SIZE=99", NULL};
    ss_launch_config cfg;
    fixture_config(&f, &cfg, argv);
    cfg.env = env;
    cfg.attempt = 2;
    cfg.run_id = "run-abc";
    REQUIRE(fixture_start(&f, &cfg) == 0);
    unsetenv("RANK");
    CHECK(!f.timed_out);
    CHECK_EQ_INT(f.all_exited, 1);
    CHECK_EQ_INT(ss_launcher_exit_status(f.l), 0);
    ss_rank_failure fail;
    CHECK_EQ_INT(ss_launcher_first_failure(f.l, &fail), 0);
    char summary[256];
    CHECK_EQ_INT(ss_launcher_failure_summary(f.l, summary, sizeof summary), 0);
    CHECK_STR(summary, "");
    unsigned port = ss_launcher_master_port(f.l);
    CHECK(port > 0);
    /* picked below the kernel's ephemeral ports, which any outgoing
     * connection may take before rank 0 binds it */
    unsigned lo = 32768, hi = 60999;
    FILE *range = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
    if (range) {
        if (fscanf(range, "%u %u", &lo, &hi) != 2)
            lo = 32768;
        fclose(range);
    }
    if (lo > 11024)
        CHECK(port >= lo - 10000 && port < lo);
    char *out = slurp_in(&f, "echo.out");
    for (int r = 0; r < NP; r++) {
        char want[512], name[32];
        snprintf(want, sizeof want,
                 "R=%d L=%d W=3 LW=3 G=0 RR=%d RW=3 RN=default MA=127.0.0.1"
                 " MP=%u RC=2 MR=0 RID=run-abc OMP=1 SA=unix:/nowhere ST=t0k"
                 " PP=unset FH=1\n", r, r, r, port);
        snprintf(name, sizeof name, "rank-%d.log", r);
        char *log = slurp_in(&f, name);
        CHECK(strncmp(log, "---- stepscope: attempt 2 ----\n", 31) == 0);
        CHECK(strstr(log, want) != NULL);
        /* the rank leads its own process group */
        int pid = 0, pgrp = -1;
        const char *p = strstr(log, "PID=");
        CHECK(p && sscanf(p, "PID=%d PGRP=%d", &pid, &pgrp) == 2);
        CHECK(pid > 0 && pid == pgrp);
        char prefixed[600];
        snprintf(prefixed, sizeof prefixed, "[rank %d] %s", r, want);
        CHECK(strstr(out, prefixed) != NULL);
        free(log);
    }
    free(out);
    fixture_done(&f);
}

static void output_is_prefixed_split_and_logged(void)
{
    fixture f;
    REQUIRE(fixture_init(&f) == 0);
    char *argv[] = {"/bin/sh", "-c",
        "echo out-$RANK; echo err-$RANK >&2;"
        " if [ $RANK = 0 ]; then head -c 10000 /dev/zero | tr '\\0' x; echo;"
        " head -c 4095 /dev/zero | tr '\\0' y; printf '\\303\\251end\\n';"
        " printf partial; fi", NULL};
    ss_launch_config cfg;
    fixture_config(&f, &cfg, argv);
    REQUIRE(fixture_start(&f, &cfg) == 0);
    CHECK(!f.timed_out);
    CHECK_EQ_INT(ss_launcher_exit_status(f.l), 0);
    char *out = slurp_in(&f, "echo.out"), *err = slurp_in(&f, "echo.err");
    char *log0 = slurp_in(&f, "rank-0.log");
    for (int r = 0; r < NP; r++) {
        char s[64];
        snprintf(s, sizeof s, "[rank %d] out-%d\n", r, r);
        CHECK(strstr(out, s) != NULL);
        snprintf(s, sizeof s, "[rank %d] err-%d\n", r, r);
        CHECK(strstr(err, s) != NULL);
        snprintf(s, sizeof s, "out-%d", r);
        CHECK(strstr(err, s) == NULL);
    }
    /* 10000 bytes split into 4096 + 4096 + 1808, each line prefixed */
    CHECK_EQ_INT(count_substr(out, "[rank 0] x"), 3);
    CHECK_EQ_INT(count_substr(out, "x"), 10000);
    /* a split never cuts a UTF-8 character: 4095 bytes, then "\u00e9end" */
    CHECK(strstr(out, "y\n[rank 0] \xc3\xa9" "end\n") != NULL);
    CHECK(strstr(out, "[rank 0] partial\n") != NULL);
    CHECK_EQ_INT(count_substr(log0, "x"), 10000);
    CHECK(strstr(log0, "out-0\n") && strstr(log0, "err-0\n"));
    CHECK(strstr(log0, "\npartial\n") != NULL);
    CHECK(strstr(log0, "[rank") == NULL); /* logs are not prefixed */
    free(out);
    free(err);
    free(log0);
    fixture_done(&f);
}

/* An echo mask forwards only the streams it names, per rank, progress
 * updates too; the logs keep both; --role's name reaches ROLE_NAME. */
static void the_echo_mask_picks_streams_and_the_role_is_named(void)
{
    fixture f;
    REQUIRE(fixture_init(&f) == 0);
    char *argv[] = {"/bin/sh", "-c",
        "echo out-$RANK-$ROLE_NAME; echo err-$RANK >&2;"
        " printf 'bar-%s\\r' $RANK >&2; echo", NULL};
    ss_launch_config cfg;
    fixture_config(&f, &cfg, argv);
    uint8_t mask[NP];
    memset(mask, 0, sizeof mask);
    mask[0] = SS_ECHO_STDOUT;
    mask[1] = SS_ECHO_STDERR;
    cfg.echo_mask = mask;
    cfg.role = "trainer";
    REQUIRE(fixture_start(&f, &cfg) == 0);
    CHECK(!f.timed_out);
    CHECK_EQ_INT(ss_launcher_exit_status(f.l), 0);
    char *out = slurp_in(&f, "echo.out"), *err = slurp_in(&f, "echo.err");
    CHECK(strstr(out, "[rank 0] out-0-trainer\n") != NULL);
    CHECK(strstr(out, "out-1") == NULL);
    CHECK(strstr(err, "err-0") == NULL && strstr(err, "bar-0") == NULL);
    CHECK(strstr(err, "[rank 1] err-1\n") != NULL);
    CHECK(strstr(err, "bar-1") != NULL);
    for (int r = 2; r < NP; r++) {
        char s[32];
        snprintf(s, sizeof s, "out-%d", r);
        CHECK(strstr(out, s) == NULL);
        snprintf(s, sizeof s, "err-%d", r);
        CHECK(strstr(err, s) == NULL);
    }
    for (int r = 0; r < NP; r++) {
        char name[32], s[32];
        snprintf(name, sizeof name, "rank-%d.log", r);
        char *log = slurp_in(&f, name);
        snprintf(s, sizeof s, "out-%d-trainer\n", r);
        CHECK(strstr(log, s) != NULL);
        snprintf(s, sizeof s, "err-%d\n", r);
        CHECK(strstr(log, s) != NULL);
        free(log);
    }
    free(out);
    free(err);
    fixture_done(&f);
}

static void progress_updates_show_as_they_come(void)
{
    /* tqdm's bars: "\r" then the update, on stderr.  Each update is shown
     * at once over the one before, without a newline; the line that ends
     * them keeps the last one, in the log (once) and in the tail; another
     * rank's line starts on a line of its own. */
    fixture f;
    REQUIRE(fixture_init(&f) == 0);
    char *argv[] = {"/bin/sh", "-c",
        "if [ $RANK = 0 ]; then printf '\\rbar 1' >&2; sleep 0.3;"
        " printf '\\rbar 2' >&2; sleep 0.3; printf '\\rbar 3\\n' >&2;"
        " printf 'crlf\\r\\n'; printf '\\rlast' >&2;"
        " elif [ $RANK = 1 ]; then sleep 0.15; echo between >&2; fi", NULL};
    ss_launch_config cfg;
    fixture_config(&f, &cfg, argv);
    REQUIRE(fixture_start(&f, &cfg) == 0);
    CHECK(!f.timed_out);
    char *out = slurp_in(&f, "echo.out"), *err = slurp_in(&f, "echo.err");
    char *log0 = slurp_in(&f, "rank-0.log");
    /* rank 1's line came while "bar 1" was shown: it ends that line */
    CHECK(strstr(err, "[rank 0] bar 1\n[rank 1] between\n") != NULL);
    CHECK(strstr(err, "[rank 0] bar 2\r[rank 0] bar 3") != NULL);
    CHECK(strstr(err, "\r[rank 0] bar 3\n") != NULL);
    /* a bare update at the end is completed by the end of the stream */
    CHECK(strstr(err, "[rank 0] last\n") != NULL);
    CHECK(strstr(out, "[rank 0] crlf\n") != NULL);
    /* the log: one line per line, the last update's text */
    CHECK(strstr(log0, "bar 3\n") != NULL);
    CHECK(strstr(log0, "bar 1") == NULL && strstr(log0, "bar 2") == NULL);
    CHECK(strstr(log0, "crlf\n") != NULL && strstr(log0, "last\n") != NULL);
    CHECK(strchr(log0, '\r') == NULL);
    free(out);
    free(err);
    free(log0);
    fixture_done(&f);
}

static void first_failure_stops_the_others(void)
{
    fixture f;
    REQUIRE(fixture_init(&f) == 0);
    char *argv[] = {"/bin/sh", "-c",
        "if [ $RANK = 1 ]; then sleep 0.2; echo step 41 done;"
        " echo boom >&2; exit 3; fi; exec sleep 30", NULL};
    ss_launch_config cfg;
    fixture_config(&f, &cfg, argv);
    uint64_t t0 = now_ms();
    REQUIRE(fixture_start(&f, &cfg) == 0);
    CHECK(!f.timed_out);
    CHECK(f.t_done - t0 < 4000); /* the others ended on SIGTERM, no grace */
    CHECK_EQ_INT(f.order[0], 1);
    CHECK_EQ_INT(f.code[1], 3);
    CHECK_EQ_INT(f.sig[1], 0);
    CHECK_EQ_INT(f.sig[0], SIGTERM);
    CHECK_EQ_INT(f.sig[2], SIGTERM);
    CHECK_EQ_INT(ss_launcher_exit_status(f.l), 3);
    ss_rank_failure fail;
    CHECK_EQ_INT(ss_launcher_first_failure(f.l, &fail), 1);
    CHECK_EQ_INT(fail.rank, 1);
    CHECK_EQ_INT(fail.exit_code, 3);
    char summary[2048];
    size_t n = ss_launcher_failure_summary(f.l, summary, sizeof summary);
    CHECK(n > 0 && n == strlen(summary));
    CHECK(strstr(summary, "rank 1 failed first: exited with code 3") != NULL);
    CHECK(strstr(summary, "last step: 41") != NULL);
    CHECK(strstr(summary, "[rank 1] step 41 done\n[rank 1] boom\n") != NULL);
    CHECK(strstr(summary, "rank-1.log") != NULL);
    CHECK(strstr(summary, "2 ended on SIGTERM") != NULL);
    /* a short buffer is truncated but the full length is reported */
    char tiny[16];
    CHECK_EQ_INT(ss_launcher_failure_summary(f.l, tiny, sizeof tiny), n);
    CHECK_EQ_INT(strlen(tiny), sizeof tiny - 1);
    fixture_done(&f);
}

/* Ranks that hit the script's error too are not said to have failed
 * "while stopping": rank 1 fails as rank 0 did, rank 2 otherwise (they
 * ignore SIGTERM, so that each ends on its own). */
static void ranks_that_failed_the_same_way(void)
{
    fixture f;
    REQUIRE(fixture_init(&f) == 0);
    char *argv[] = {"/bin/sh", "-c",
        "trap '' TERM; sleep 0.2; [ $RANK = 0 ] || sleep 0.3;"
        " if [ $RANK = 2 ]; then echo other >&2; exit 1; fi;"
        " echo 'ValueError: bad shape' >&2; exit 1", NULL};
    ss_launch_config cfg;
    fixture_config(&f, &cfg, argv);
    cfg.grace_ms = 10000;
    REQUIRE(fixture_start(&f, &cfg) == 0);
    CHECK(!f.timed_out);
    CHECK_EQ_INT(f.order[0], 0);
    char summary[2048];
    ss_launcher_failure_summary(f.l, summary, sizeof summary);
    CHECK(strstr(summary, "rank 0 failed first: exited with code 1") != NULL);
    CHECK(strstr(summary, "the other ranks were stopped: 1 failed the same "
                 "way (the same exit code and last line), 1 failed while "
                 "stopping\n") != NULL);
    fixture_done(&f);
}

static void rank_killed_by_signal(void)
{
    fixture f;
    REQUIRE(fixture_init(&f) == 0);
    char *argv[] = {"/bin/sh", "-c",
        "if [ $RANK = 2 ]; then echo about to crash; kill -SEGV $$; fi;"
        " exec sleep 30", NULL};
    ss_launch_config cfg;
    fixture_config(&f, &cfg, argv);
    REQUIRE(fixture_start(&f, &cfg) == 0);
    CHECK(!f.timed_out);
    CHECK_EQ_INT(f.order[0], 2);
    CHECK_EQ_INT(f.sig[2], SIGSEGV);
    CHECK_EQ_INT(ss_launcher_exit_status(f.l), 128 + SIGSEGV);
    char summary[2048];
    ss_launcher_failure_summary(f.l, summary, sizeof summary);
    CHECK(strstr(summary, "rank 2 failed first: killed by signal SIGSEGV") != NULL);
    CHECK(strstr(summary, "last step: unknown") != NULL);
    CHECK(strstr(summary, "[rank 2] about to crash") != NULL);
    fixture_done(&f);
}

static void command_not_found(void)
{
    fixture f;
    REQUIRE(fixture_init(&f) == 0);
    char *argv[] = {"stepscope-no-such-command", "x", NULL};
    ss_launch_config cfg;
    fixture_config(&f, &cfg, argv);
    cfg.nprocs = 1;
    REQUIRE(fixture_start(&f, &cfg) == 0);
    CHECK_EQ_INT(ss_launcher_exit_status(f.l), 127);
    char *err = slurp_in(&f, "echo.err");
    CHECK(strstr(err, "[rank 0] stepscope: cannot run 'stepscope-no-such-command':"
                      " No such file or directory\n") != NULL);
    free(err);
    fixture_done(&f);
}

/* Polls the rank logs; once every rank printed "ready", terminates. */
static void terminate_when_ready(uv_timer_t *t)
{
    fixture *f = t->data;
    for (int r = 0; r < NP; r++) {
        char name[32];
        snprintf(name, sizeof name, "rank-%d.log", r);
        char *log = slurp_in(f, name);
        int ready = strstr(log, "ready") != NULL;
        free(log);
        if (!ready)
            return;
    }
    uv_timer_stop(t);
    f->terminated = 1;
    f->t_terminate = now_ms();
    ss_launcher_terminate(f->l, "test asked to stop");
    ss_launcher_terminate(f->l, "ignored second reason"); /* idempotent */
}

/* The pid written in DIR/NAME by a stray, 0 when there is none. */
static int stray_pid(const fixture *f, int rank)
{
    char name[32];
    snprintf(name, sizeof name, "stray-%d", rank);
    char *text = slurp_in(f, name);
    int pid = atoi(text);
    free(text);
    return pid;
}

/* Has PID been ended and reaped (it no longer exists at all)? */
static int is_gone(int pid)
{
    return pid > 0 && kill(pid, 0) != 0 && errno == ESRCH;
}

/* Each rank starts a process in a session of its own (`setsid`), out of
 * reach of a signal to the rank's group; rank 1's ignores SIGTERM.  Then
 * the rank exits 0: the job ends normally. */
static void setsid_children_are_ended_at_job_end(void)
{
    fixture f;
    REQUIRE(fixture_init(&f) == 0);
    char script[PATH_MAX * 2 + 512];
    snprintf(script, sizeof script,
        "if [ $RANK = 1 ]; then trap=\"trap '' TERM;\"; fi;"
        " setsid /bin/sh -c \"$trap echo \\$\\$ > '%s/stray-$RANK';"
        " while :; do sleep 0.05; done\" &"
        " while [ ! -s '%s/stray-'$RANK ]; do sleep 0.01; done; exit 0",
        f.dir, f.dir);
    char *argv[] = {"/bin/sh", "-c", script, NULL};
    ss_launch_config cfg;
    fixture_config(&f, &cfg, argv);
    cfg.grace_ms = 300;
    uint64_t t0 = now_ms();
    REQUIRE(fixture_start(&f, &cfg) == 0);
    CHECK(!f.timed_out);
    CHECK_EQ_INT(f.all_exited, 1);
    CHECK_EQ_INT(ss_launcher_exit_status(f.l), 0);
    CHECK(ss_launcher_left_behind(f.l) >= NP);
    /* rank 1's stray needed SIGKILL after the grace period */
    CHECK(f.t_done - t0 >= 300 && f.t_done - t0 < 5000);
    for (int r = 0; r < NP; r++) {
        int pid = stray_pid(&f, r);
        CHECK(pid > 0);
        CHECK(is_gone(pid));
        if (!is_gone(pid))
            kill(pid, SIGKILL);
    }
    /* Nothing the job started is left: no descendant, no zombie. */
    char summary[256];
    CHECK_EQ_INT(ss_launcher_failure_summary(f.l, summary, sizeof summary), 0);
    fixture_done(&f);
    CHECK_EQ_INT(waitpid(-1, NULL, WNOHANG), -1);
}

static void setsid_children_are_ended_on_terminate(void)
{
    fixture f;
    REQUIRE(fixture_init(&f) == 0);
    char script[PATH_MAX * 2 + 512];
    snprintf(script, sizeof script,
        "setsid /bin/sh -c \"echo \\$\\$ > '%s/stray-$RANK';"
        " exec sleep 1000\" &"
        " while [ ! -s '%s/stray-'$RANK ]; do sleep 0.01; done;"
        " echo ready; exec sleep 30", f.dir, f.dir);
    char *argv[] = {"/bin/sh", "-c", script, NULL};
    ss_launch_config cfg;
    fixture_config(&f, &cfg, argv);
    cfg.grace_ms = 10000;
    uv_timer_start(&f.poll, terminate_when_ready, 20, 20);
    REQUIRE(fixture_start(&f, &cfg) == 0);
    CHECK(!f.timed_out);
    REQUIRE(f.terminated);
    /* every stray ended on the SIGTERM of the stop: no grace needed */
    CHECK(f.t_done - f.t_terminate < 3000);
    for (int r = 0; r < NP; r++) {
        CHECK_EQ_INT(f.sig[r], SIGTERM);
        int pid = stray_pid(&f, r);
        CHECK(pid > 0);
        CHECK(is_gone(pid));
        if (!is_gone(pid))
            kill(pid, SIGKILL);
    }
    fixture_done(&f);
}

static int mode_of(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 ? (int)(sb.st_mode & 07777) : -1;
}

static void logs_are_private_and_never_truncated(void)
{
    fixture f;
    REQUIRE(fixture_init(&f) == 0);
    char logs[PATH_MAX], path[PATH_MAX + 32];
    snprintf(logs, sizeof logs, "%s/logs/run-1", f.dir);
    snprintf(path, sizeof path, "%s/logs", f.dir);
    REQUIRE(mkdir(path, 0755) == 0);
    REQUIRE(mkdir(logs, 0755) == 0);
    snprintf(path, sizeof path, "%s/rank-0.log", logs);
    int fd = open(path, O_WRONLY | O_CREAT, 0644);
    REQUIRE(fd >= 0);
    CHECK_EQ_INT(write(fd, "earlier run\n", 12), 12);
    close(fd);
    char *argv[] = {"/bin/sh", "-c", "echo new-$RANK", NULL};
    ss_launch_config cfg;
    fixture_config(&f, &cfg, argv);
    cfg.log_dir = logs;
    cfg.run_id = "run-xyz";
    mode_t old = umask(0);
    REQUIRE(fixture_start(&f, &cfg) == 0);
    umask(old);
    CHECK(!f.timed_out);
    char *log0 = slurp(path);
    CHECK_STR(log0, "earlier run\n---- stepscope: run run-xyz ----\nnew-0\n");
    free(log0);
    CHECK_EQ_INT(mode_of(path), 0644); /* an existing file keeps its mode */
    snprintf(path, sizeof path, "%s/rank-1.log", logs);
    char *log1 = slurp(path);
    CHECK_STR(log1, "new-1\n");
    free(log1);
    CHECK_EQ_INT(mode_of(path), 0600);
    fixture_done(&f);

    /* A log directory the launcher creates is private. */
    REQUIRE(fixture_init(&f) == 0);
    snprintf(logs, sizeof logs, "%s/new/logs", f.dir);
    fixture_config(&f, &cfg, argv);
    cfg.log_dir = logs;
    old = umask(0);
    REQUIRE(fixture_start(&f, &cfg) == 0);
    umask(old);
    CHECK_EQ_INT(mode_of(logs), 0700);
    snprintf(path, sizeof path, "%s/new", f.dir);
    CHECK_EQ_INT(mode_of(path), 0700);
    snprintf(path, sizeof path, "%s/rank-2.log", logs);
    CHECK_EQ_INT(mode_of(path), 0600);
    fixture_done(&f);
}

static void grace_then_sigkill(void)
{
    fixture f;
    REQUIRE(fixture_init(&f) == 0);
    char *argv[] = {"/bin/sh", "-c",
        "trap '' TERM; echo ready; while :; do sleep 0.05; done", NULL};
    ss_launch_config cfg;
    fixture_config(&f, &cfg, argv);
    cfg.grace_ms = 300;
    uv_timer_start(&f.poll, terminate_when_ready, 20, 20);
    REQUIRE(fixture_start(&f, &cfg) == 0);
    CHECK(!f.timed_out);
    REQUIRE(f.terminated);
    uint64_t took = f.t_done - f.t_terminate;
    CHECK(took >= 300 && took < 3000);
    for (int r = 0; r < NP; r++)
        CHECK_EQ_INT(f.sig[r], SIGKILL);
    CHECK_EQ_INT(ss_launcher_exit_status(f.l), 128 + SIGKILL);
    ss_rank_failure fail;
    CHECK_EQ_INT(ss_launcher_first_failure(f.l, &fail), 0);
    char summary[512];
    ss_launcher_failure_summary(f.l, summary, sizeof summary);
    CHECK(strstr(summary, "the job was stopped: test asked to stop\n") != NULL);
    CHECK(strstr(summary, "3 needed SIGKILL after the 300 ms grace period") != NULL);
    fixture_done(&f);
}

static void kill_now_when_polled(uv_timer_t *t)
{
    fixture *f = t->data;
    terminate_when_ready(t);
    if (f->terminated)
        ss_launcher_kill_now(f->l, "on a second interrupt");
}

static void kill_now_skips_grace(void)
{
    fixture f;
    REQUIRE(fixture_init(&f) == 0);
    char *argv[] = {"/bin/sh", "-c",
        "trap '' TERM; echo ready; while :; do sleep 0.05; done", NULL};
    ss_launch_config cfg;
    fixture_config(&f, &cfg, argv);
    cfg.grace_ms = 10000;
    uv_timer_start(&f.poll, kill_now_when_polled, 20, 20);
    REQUIRE(fixture_start(&f, &cfg) == 0);
    CHECK(!f.timed_out);
    REQUIRE(f.terminated);
    CHECK(f.t_done - f.t_terminate < 2000);
    for (int r = 0; r < NP; r++)
        CHECK_EQ_INT(f.sig[r], SIGKILL);
    /* The summary says what happened: no grace period ran out. */
    char summary[512];
    ss_launcher_failure_summary(f.l, summary, sizeof summary);
    CHECK(strstr(summary, "the job was stopped: test asked to stop\n") != NULL);
    CHECK(strstr(summary, "the ranks were stopped: 3 were killed at once "
                          "with SIGKILL on a second interrupt\n") != NULL);
    CHECK(strstr(summary, "grace period") == NULL);
    fixture_done(&f);
}

static void bad_config_and_spawn_failure(void)
{
    fixture f;
    REQUIRE(fixture_init(&f) == 0);
    char *argv[] = {"/bin/true", NULL};
    ss_launch_config cfg;
    char err[256];
    fixture_config(&f, &cfg, argv);
    cfg.nprocs = 0;
    CHECK(ss_launcher_start(&f.loop, &cfg, NULL, err, sizeof err) == NULL);
    CHECK(strstr(err, "number of ranks") != NULL);

    char *bad_env[] = {"NOEQUALS", NULL};
    fixture_config(&f, &cfg, argv);
    cfg.env = bad_env;
    CHECK(ss_launcher_start(&f.loop, &cfg, NULL, err, sizeof err) == NULL);
    CHECK(strstr(err, "NOEQUALS") != NULL);

    char missing[PATH_MAX + 16];
    snprintf(missing, sizeof missing, "%s/no-shim", f.dir);
    fixture_config(&f, &cfg, argv);
    cfg.exec_shim = missing;
    CHECK(ss_launcher_start(&f.loop, &cfg, NULL, err, sizeof err) == NULL);
    CHECK(strstr(err, "cannot start rank 0") != NULL);
    f.l = NULL;
    fixture_done(&f); /* the failed launcher's handles close cleanly */
}

/* Node 1 of 2 with 3 ranks each: global ranks 3..5 in a world of 6. */
static void multi_node_config(ss_launch_config *cfg)
{
    cfg->nnodes = 2;
    cfg->node_rank = 1;
    cfg->rank_base = 3;
    cfg->world_size = 6;
    cfg->master_addr = "node0.example";
    cfg->master_port = 4242;
}

static void multi_node_env_logs_and_prefixes_use_global_ranks(void)
{
    fixture f;
    REQUIRE(fixture_init(&f) == 0);
    setenv("NODE_RANK", "9", 1); /* inherited values must be overridden */
    char *argv[] = {"/bin/sh", "-c",
        "echo \"R=$RANK L=$LOCAL_RANK W=$WORLD_SIZE LW=$LOCAL_WORLD_SIZE"
        " G=$GROUP_RANK GW=$GROUP_WORLD_SIZE N=$NODE_RANK RR=$ROLE_RANK"
        " RW=$ROLE_WORLD_SIZE RN=$ROLE_NAME MA=$MASTER_ADDR MP=$MASTER_PORT"
        " RC=$TORCHELASTIC_RESTART_COUNT MR=$TORCHELASTIC_MAX_RESTARTS"
        " RID=$TORCHELASTIC_RUN_ID\"", NULL};
    ss_launch_config cfg;
    fixture_config(&f, &cfg, argv);
    multi_node_config(&cfg);
    cfg.run_id = "run-mn";
    cfg.attempt = 2;
    cfg.max_restarts = 5;
    REQUIRE(fixture_start(&f, &cfg) == 0);
    unsetenv("NODE_RANK");
    CHECK(!f.timed_out);
    CHECK_EQ_INT(ss_launcher_exit_status(f.l), 0);
    CHECK_EQ_INT(ss_launcher_master_port(f.l), 4242);
    char *out = slurp_in(&f, "echo.out");
    for (int local = 0; local < NP; local++) {
        int global = 3 + local;
        /* callbacks report the local rank */
        CHECK_EQ_INT(f.exited[local], 1);
        CHECK_EQ_INT(ss_launcher_global_rank(f.l, (uint32_t)local), global);
        char want[512], name[32];
        snprintf(want, sizeof want,
                 "R=%d L=%d W=6 LW=3 G=1 GW=2 N=1 RR=%d RW=6 RN=default"
                 " MA=node0.example MP=4242 RC=2 MR=5 RID=run-mn\n",
                 global, local, global);
        snprintf(name, sizeof name, "rank-%d.log", global);
        char *log = slurp_in(&f, name);
        CHECK(strstr(log, want) != NULL);
        free(log);
        char prefixed[600];
        snprintf(prefixed, sizeof prefixed, "[rank %d] %s", global, want);
        CHECK(strstr(out, prefixed) != NULL);
        char path[PATH_MAX + 64]; /* no log under a local rank's name */
        snprintf(path, sizeof path, "%s/rank-%d.log", f.dir, local);
        CHECK(access(path, F_OK) != 0);
    }
    CHECK(strstr(out, "[rank 0]") == NULL);
    free(out);
    CHECK_EQ_INT(ss_launcher_global_rank(NULL, 7), 7);
    fixture_done(&f);
}

static void single_node_sets_node_rank_zero(void)
{
    fixture f;
    REQUIRE(fixture_init(&f) == 0);
    char *argv[] = {"/bin/sh", "-c",
        "echo \"N=$NODE_RANK GW=$GROUP_WORLD_SIZE W=$WORLD_SIZE\"", NULL};
    ss_launch_config cfg;
    fixture_config(&f, &cfg, argv);
    REQUIRE(fixture_start(&f, &cfg) == 0);
    char *log = slurp_in(&f, "rank-2.log");
    CHECK(strstr(log, "N=0 GW=1 W=3\n") != NULL);
    free(log);
    fixture_done(&f);
}

static void multi_node_failure_names_the_global_rank(void)
{
    fixture f;
    REQUIRE(fixture_init(&f) == 0);
    char *argv[] = {"/bin/sh", "-c",
        "if [ $LOCAL_RANK = 1 ]; then echo boom >&2; exit 3; fi;"
        " exec sleep 30", NULL};
    ss_launch_config cfg;
    fixture_config(&f, &cfg, argv);
    multi_node_config(&cfg);
    REQUIRE(fixture_start(&f, &cfg) == 0);
    CHECK(!f.timed_out);
    CHECK_EQ_INT(f.order[0], 1); /* local rank in the callback */
    ss_rank_failure fail;
    CHECK_EQ_INT(ss_launcher_first_failure(f.l, &fail), 1);
    CHECK_EQ_INT(fail.rank, 1);
    CHECK_EQ_INT(fail.global_rank, 4);
    char summary[2048];
    ss_launcher_failure_summary(f.l, summary, sizeof summary);
    CHECK(strstr(summary, "rank 4 failed first: exited with code 3") != NULL);
    CHECK(strstr(summary, "last line of rank 4 (all of them in ") != NULL);
    CHECK(strstr(summary, "/rank-4.log):\n[rank 4] boom\n") != NULL);
    /* the last_step callback is asked about local rank 1 (its 41) */
    CHECK(strstr(summary, "(pid ") && strstr(summary, "last step: 41)"));
    fixture_done(&f);
}

static void multi_node_config_errors(void)
{
    fixture f;
    REQUIRE(fixture_init(&f) == 0);
    char *argv[] = {"/bin/true", NULL};
    ss_launch_config cfg;
    char err[256];
#define REFUSED(want)                                                         \
    do {                                                                      \
        err[0] = '\0';                                                        \
        CHECK(ss_launcher_start(&f.loop, &cfg, NULL, err, sizeof err) ==      \
              NULL);                                                          \
        if (!strstr(err, want)) {                                             \
            fprintf(stderr, "  error '%s' lacks '%s'\n", err, want);          \
            CHECK(0);                                                         \
        }                                                                     \
    } while (0)
    fixture_config(&f, &cfg, argv);
    multi_node_config(&cfg);
    cfg.master_port = 0;
    REFUSED("no master port for a multi-node job with master node0.example");
    fixture_config(&f, &cfg, argv);
    cfg.nnodes = 2;
    cfg.master_addr = "127.0.0.1";
    cfg.world_size = 6;
    REFUSED("no master port for a multi-node job");
    fixture_config(&f, &cfg, argv);
    cfg.master_addr = "10.1.2.3";
    REFUSED("no master port for master 10.1.2.3");
    fixture_config(&f, &cfg, argv);
    cfg.master_addr = "";
    REFUSED("empty master address");
    fixture_config(&f, &cfg, argv);
    cfg.master_addr = "a b";
    cfg.master_port = 1;
    REFUSED("bad master address 'a b'");
    fixture_config(&f, &cfg, argv);
    multi_node_config(&cfg);
    cfg.node_rank = 2;
    REFUSED("node rank 2 is not below the number of nodes (2)");
    fixture_config(&f, &cfg, argv);
    multi_node_config(&cfg);
    cfg.world_size = 5;
    REFUSED("ranks 3..5 do not fit in a world of 5 ranks");
    fixture_config(&f, &cfg, argv);
    cfg.rank_base = 1; /* world_size 0 means nprocs: 1..3 do not fit */
    REFUSED("ranks 1..3 do not fit in a world of 3 ranks");
#undef REFUSED
    /* a loopback master on one node may still pick its port */
    fixture_config(&f, &cfg, argv);
    cfg.master_addr = "localhost";
    f.l = ss_launcher_start(&f.loop, &cfg, NULL, err, sizeof err);
    CHECK(f.l != NULL);
    CHECK(ss_launcher_master_port(f.l) > 0);
    fixture_done(&f);
}

static void destroy_kills_running_ranks(void)
{
    fixture f;
    REQUIRE(fixture_init(&f) == 0);
    char *argv[] = {"/bin/sh", "-c", "exec sleep 30", NULL};
    ss_launch_config cfg;
    fixture_config(&f, &cfg, argv);
    ss_launch_callbacks cb = {&f, on_rank_exit, on_all_exited, NULL};
    char err[256];
    f.l = ss_launcher_start(&f.loop, &cfg, &cb, err, sizeof err);
    REQUIRE(f.l != NULL);
    int pids[NP];
    for (int r = 0; r < NP; r++)
        pids[r] = ss_launcher_rank_pid(f.l, (uint32_t)r);
    CHECK_EQ_INT(ss_launcher_rank_pid(f.l, NP), 0);
    fixture_done(&f);
    CHECK_EQ_INT(f.exits, 0); /* no callbacks after destroy */
    for (int r = 0; r < NP; r++) {
        int st = 0;
        CHECK(pids[r] > 0 && waitpid(pids[r], &st, 0) == pids[r]);
        CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
    }
}

/* Child side of no_orphans_after_launcher_sigkill: runs a launcher and
 * reports the rank pids on FD, then serves the loop until killed. */
static void run_doomed_launcher(int fd, const char *shim)
{
    uv_loop_t loop;
    uv_loop_init(&loop);
    char *argv[] = {"/bin/sh", "-c", "exec sleep 30", NULL};
    ss_launch_config cfg;
    ss_launch_config_defaults(&cfg);
    cfg.nprocs = NP;
    cfg.argv = argv;
    cfg.exec_shim = shim;
    cfg.echo = 0;
    char err[256];
    ss_launcher *l = ss_launcher_start(&loop, &cfg, NULL, err, sizeof err);
    if (!l)
        _exit(1);
    int pids[NP];
    for (int r = 0; r < NP; r++)
        pids[r] = ss_launcher_rank_pid(l, (uint32_t)r);
    if (write(fd, pids, sizeof pids) != (ssize_t)sizeof pids)
        _exit(1);
    uv_run(&loop, UV_RUN_DEFAULT);
    _exit(1);
}

/* Waits up to MS for process PID's name to start with WANT. */
static int wait_for_comm(int pid, const char *want, int ms)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/comm", pid);
    for (int waited = 0; waited < ms; waited += 10) {
        char *comm = slurp(path);
        int ok = strncmp(comm, want, strlen(want)) == 0;
        free(comm);
        if (ok)
            return 1;
        usleep(10000);
    }
    return 0;
}

static void no_orphans_after_launcher_sigkill(void)
{
    fixture f;
    REQUIRE(fixture_init(&f) == 0);
    /* Orphans are re-parented to us, so we can reap them and see how they
     * died instead of depending on what init does with zombies. */
    REQUIRE(prctl(PR_SET_CHILD_SUBREAPER, 1) == 0);
    int fds[2];
    REQUIRE(pipe(fds) == 0);
    pid_t child = fork();
    REQUIRE(child >= 0);
    if (child == 0) {
        close(fds[0]);
        run_doomed_launcher(fds[1], f.shim);
    }
    close(fds[1]);
    int pids[NP];
    ssize_t got = read(fds[0], pids, sizeof pids);
    close(fds[0]);
    CHECK_EQ_INT(got, sizeof pids);
    if (got == (ssize_t)sizeof pids)
        for (int r = 0; r < NP; r++) /* the shim has exec'd the rank */
            CHECK(wait_for_comm(pids[r], "sleep", 5000));
    kill(child, SIGKILL);
    int st;
    CHECK(waitpid(child, &st, 0) == child);
    for (int r = 0; got == (ssize_t)sizeof pids && r < NP; r++) {
        pid_t w = 0;
        for (int waited = 0; waited < 5000 && w == 0; waited += 10) {
            w = waitpid(pids[r], &st, WNOHANG);
            if (w == 0)
                usleep(10000);
        }
        CHECK_EQ_INT(w, pids[r]);
        CHECK(w == pids[r] && WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
        if (w == 0)
            kill(pids[r], SIGKILL);
    }
    f.l = NULL;
    fixture_done(&f);
}

static void shim_usage_and_exec_failure(void)
{
    for (int with_command = 0; with_command < 2; with_command++) {
        pid_t pid = fork();
        REQUIRE(pid >= 0);
        if (pid == 0) {
            int null = open("/dev/null", O_WRONLY);
            dup2(null, 2);
            if (!with_command) {
                char *argv[] = {"stepscope", SS_RANK_EXEC_ARG, NULL};
                _exit(ss_launcher_rank_exec_main(2, argv));
            }
            /* a parent pid that is not our parent's: the shim must refuse */
            char self[24];
            snprintf(self, sizeof self, "%d", (int)getpid());
            setenv(SS_PARENT_PID_ENV, self, 1);
            char *argv[] = {"stepscope", SS_RANK_EXEC_ARG, "--", "/bin/true",
                            NULL};
            _exit(ss_launcher_rank_exec_main(4, argv));
        }
        int st;
        CHECK(waitpid(pid, &st, 0) == pid);
        CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 127);
    }
}

static void a_users_faulthandler_choice_is_kept(void)
{
    /* PYTHONFAULTHANDLER=1 by default (env_is_set_per_rank); an empty
     * value, the user's way to turn it off, reaches the ranks as it is. */
    fixture f;
    REQUIRE(fixture_init(&f) == 0);
    char *argv[] = {"/bin/sh", "-c",
        "echo \"FH=[${PYTHONFAULTHANDLER-unset}]\"", NULL};
    char *env[] = {"PYTHONFAULTHANDLER=", NULL};
    ss_launch_config cfg;
    fixture_config(&f, &cfg, argv);
    cfg.env = env;
    REQUIRE(fixture_start(&f, &cfg) == 0);
    char *out = slurp_in(&f, "echo.out");
    CHECK(strstr(out, "[rank 0] FH=[]\n") != NULL);
    CHECK(strstr(out, "FH=[1]") == NULL);
    free(out);
    fixture_done(&f);
}

static void say_rank1_script_ended(uv_timer_t *t)
{
    fixture *f = t->data;
    ss_launcher_rank_script_ended(f->l, 1);
}

/* fixture_start, rank 1's script said to have ended 0.1 s in. */
static int start_rank1_script_ending(fixture *f, const ss_launch_config *cfg)
{
    ss_launch_callbacks cb = {f, on_rank_exit, on_all_exited, last_step};
    char err[256] = "";
    f->l = ss_launcher_start(&f->loop, cfg, &cb, err, sizeof err);
    if (!f->l)
        return -1;
    uv_timer_start(&f->poll, say_rank1_script_ended, 100, 0);
    uv_timer_start(&f->guard, on_guard, GUARD_MS, 0);
    uv_run(&f->loop, UV_RUN_DEFAULT);
    return 0;
}

static void a_rank_that_left_early_is_named(void)
{
    /* Rank 1 ends with success at once, rank 0 fails 0.3 s later (as a
     * collective with a departed peer does): rank 0 failed first, and the
     * summary says who left before it (after the failure: rank 0's last
     * line names no lost peer). */
    fixture f;
    REQUIRE(fixture_init(&f) == 0);
    char *argv[] = {"/bin/sh", "-c",
        "case $RANK in 1) exit 0;; 0) sleep 0.3; echo 'peer closed' >&2;"
        " exit 1;; esac; exec sleep 30", NULL};
    ss_launch_config cfg;
    fixture_config(&f, &cfg, argv);
    REQUIRE(fixture_start(&f, &cfg) == 0);
    CHECK(!f.timed_out);
    char summary[4096];
    ss_launcher_failure_summary(f.l, summary, sizeof summary);
    CHECK(strstr(summary, "rank 0 failed first: exited with code 1") != NULL);
    CHECK(strstr(summary, "rank 1 had exited with status 0 ") != NULL);
    CHECK(strstr(summary, "(last step: 41) while 2 other ranks still ran")
          != NULL);
    fixture_done(&f);

    /* Rank 0's last line says its peer went away: the summary begins
     * with the rank that left, the likely cause. */
    REQUIRE(fixture_init(&f) == 0);
    char *argv3[] = {"/bin/sh", "-c",
        "case $RANK in 1) exit 0;; 0) sleep 0.3;"
        " echo 'RuntimeError: Connection closed by peer' >&2; exit 1;; esac;"
        " exec sleep 30", NULL};
    fixture_config(&f, &cfg, argv3);
    REQUIRE(fixture_start(&f, &cfg) == 0);
    ss_launcher_failure_summary(f.l, summary, sizeof summary);
    CHECK(strncmp(summary, "rank 1 left the job early: it had exited with "
                  "status 0 ", 55) == 0);
    CHECK(strstr(summary, "before rank 0 failed (last step: 41) while 2 "
                 "other ranks still ran, and rank 0's last lines say a "
                 "peer went away") != NULL);
    CHECK(strstr(summary, "\nrank 0 failed first: exited with code 1")
          != NULL);
    fixture_done(&f);

    /* Rank 1's script ends at 0.1 s (its recorder says goodbye) while its
     * process goes on exiting; rank 0 fails at 0.3 s on the lost peer,
     * and the stop ends rank 1 with SIGTERM: the summary still begins
     * with rank 1, whose script had ended first. */
    REQUIRE(fixture_init(&f) == 0);
    char *argv4[] = {"/bin/sh", "-c",
        "case $RANK in 0) sleep 0.3;"
        " echo 'RuntimeError: Connection closed by peer' >&2; exit 1;; esac;"
        " exec sleep 30", NULL};
    fixture_config(&f, &cfg, argv4);
    REQUIRE(start_rank1_script_ending(&f, &cfg) == 0);
    CHECK(!f.timed_out);
    CHECK_EQ_INT(f.sig[1], SIGTERM);
    ss_launcher_failure_summary(f.l, summary, sizeof summary);
    fprintf(stderr, "    %s", summary);
    CHECK(strncmp(summary, "rank 1 left the job early: its script had ended "
                  "0.", 50) == 0);
    CHECK(strstr(summary, " s before rank 0 failed, its process still "
                 "exiting (last step: 41) while 2 other ranks still ran, "
                 "and rank 0's last lines say a peer went away") != NULL);
    CHECK(strstr(summary, "\nrank 0 failed first: exited with code 1")
          != NULL);
    fixture_done(&f);

    /* The same without a word of a lost peer in rank 0's last lines: a
     * script that ended is no exit, and nothing is said of rank 1. */
    REQUIRE(fixture_init(&f) == 0);
    char *argv5[] = {"/bin/sh", "-c",
        "case $RANK in 0) sleep 0.3; echo 'ValueError: bad batch' >&2;"
        " exit 1;; esac; exec sleep 30", NULL};
    fixture_config(&f, &cfg, argv5);
    REQUIRE(start_rank1_script_ending(&f, &cfg) == 0);
    ss_launcher_failure_summary(f.l, summary, sizeof summary);
    CHECK(strncmp(summary, "rank 0 failed first: exited with code 1", 39)
          == 0);
    CHECK(strstr(summary, "rank 1 ") == NULL);
    fixture_done(&f);

    /* Rank 1's script ended by raising (a traceback, then the goodbye
     * its recorder says all the same): it did not leave, and rank 0,
     * failing on the lost peer after it, is the first failure told. */
    REQUIRE(fixture_init(&f) == 0);
    char *argv6[] = {"/bin/sh", "-c",
        "case $RANK in 0) sleep 0.3;"
        " echo 'RuntimeError: Connection closed by peer' >&2; exit 1;;"
        " 1) echo 'Traceback (most recent call last):' >&2;; esac;"
        " exec sleep 30", NULL};
    fixture_config(&f, &cfg, argv6);
    REQUIRE(start_rank1_script_ending(&f, &cfg) == 0);
    ss_launcher_failure_summary(f.l, summary, sizeof summary);
    CHECK(strstr(summary, "left the job early") == NULL);
    CHECK(strstr(summary, "rank 0 failed first: exited with code 1") != NULL);
    fixture_done(&f);

    /* A rank that fails first, nobody having left: no such line. */
    REQUIRE(fixture_init(&f) == 0);
    char *argv2[] = {"/bin/sh", "-c",
        "if [ $RANK = 1 ]; then exit 2; fi; exec sleep 30", NULL};
    fixture_config(&f, &cfg, argv2);
    REQUIRE(fixture_start(&f, &cfg) == 0);
    ss_launcher_failure_summary(f.l, summary, sizeof summary);
    CHECK(strstr(summary, "rank 1 failed first: exited with code 2") != NULL);
    CHECK(strstr(summary, "had exited with status 0") == NULL);
    fixture_done(&f);
}

static void a_rank_failing_on_a_lost_peer_is_not_named_first(void)
{
    /* Rank 1 raises and takes 0.15 s to end (its interpreter's shutdown,
     * SIGTERM ignored there); rank 0's collective fails on its closed
     * sockets 0.05 s after the error and ends at once, so it is reaped
     * first: rank 1 failed first all the same. */
    fixture f;
    REQUIRE(fixture_init(&f) == 0);
    char *argv[] = {"/bin/sh", "-c",
        "case $RANK in 1) trap '' TERM; echo 'RuntimeError: injected crash'"
        " >&2; sleep 0.15; exit 1;; 0) sleep 0.05; echo 'RuntimeError: "
        "[pair.cc:598] Connection closed by peer [127.0.0.1]:2989' >&2;"
        " exit 1;; esac; exec sleep 30", NULL};
    ss_launch_config cfg;
    fixture_config(&f, &cfg, argv);
    REQUIRE(fixture_start(&f, &cfg) == 0);
    CHECK(!f.timed_out);
    char summary[4096];
    ss_launcher_failure_summary(f.l, summary, sizeof summary);
    CHECK(strstr(summary, "rank 1 failed first: exited with code 1") != NULL);
    CHECK(strstr(summary, "RuntimeError: injected crash") != NULL);
    CHECK(strstr(summary, "1 failed because a peer went away (its last "
                          "lines say so)") != NULL);
    ss_rank_failure fail;
    CHECK(ss_launcher_first_failure(f.l, &fail) == 1 && fail.rank == 1);
    fixture_done(&f);

    /* Rank 1's traceback began before rank 0 failed on its closed
     * sockets, and its shutdown takes 0.8 s, far past SAME_FAILURE_MS:
     * the stop passes it over (no SIGTERM: it would end so) and it ends
     * with its own code, named first; rank 2 is stopped. */
    REQUIRE(fixture_init(&f) == 0);
    char *argv3[] = {"/bin/sh", "-c",
        "case $RANK in 1) echo 'Traceback (most recent call last):' >&2;"
        " echo 'RuntimeError: injected crash' >&2; sleep 0.8; exit 1;;"
        " 0) sleep 0.2; echo 'RuntimeError: [pair.cc:598] Connection closed"
        " by peer [127.0.0.1]:2989' >&2; exit 1;; esac; exec sleep 30",
        NULL};
    fixture_config(&f, &cfg, argv3);
    REQUIRE(fixture_start(&f, &cfg) == 0);
    CHECK(!f.timed_out);
    ss_launcher_failure_summary(f.l, summary, sizeof summary);
    CHECK(strstr(summary, "rank 1 failed first: exited with code 1") != NULL);
    CHECK(ss_launcher_first_failure(f.l, &fail) == 1 && fail.rank == 1);
    CHECK_EQ_INT(ss_launcher_exit_status(f.l), 1);
    CHECK(ss_launcher_rank_spared(f.l, 1));
    CHECK(!ss_launcher_rank_spared(f.l, 2));
    if (!strstr(summary, "rank 1 failed first: exited with code 1"))
        fprintf(stderr, "summary:\n%s\n", summary);
    fixture_done(&f);

    /* Rank 1 printed a traceback of an exception it caught and trains
     * on when rank 0 fails on its own: spared at first, it gets its
     * SIGTERM 3 s after its traceback, not the grace period's SIGKILL,
     * so its handler runs (exit 7); rank 0 is named. */
    REQUIRE(fixture_init(&f) == 0);
    char *argv4[] = {"/bin/sh", "-c",
        "case $RANK in 1) trap 'exit 7' TERM;"
        " echo 'Traceback (most recent call last):' >&2;"
        " echo 'ValueError: logged and caught' >&2; sleep 30 & wait $!;"
        " exit 0;; 0) sleep 0.2; echo 'RuntimeError: boom' >&2; exit 1;;"
        " esac; exec sleep 30", NULL};
    fixture_config(&f, &cfg, argv4);
    cfg.grace_ms = 10000;
    uint64_t t0 = now_ms();
    REQUIRE(fixture_start(&f, &cfg) == 0);
    CHECK(!f.timed_out);
    CHECK(ss_launcher_rank_spared(f.l, 1));
    CHECK_EQ_INT(f.code[1], 7);
    CHECK(f.t_done - t0 >= 2500 && f.t_done - t0 < 9000);
    CHECK(ss_launcher_first_failure(f.l, &fail) == 1 && fail.rank == 0);
    fixture_done(&f);

    /* A peer's error alone, nobody else failing on their own in time: the
     * first reaped is still named. */
    REQUIRE(fixture_init(&f) == 0);
    char *argv2[] = {"/bin/sh", "-c",
        "if [ $RANK = 0 ]; then echo 'Connection reset by peer' >&2;"
        " exit 1; fi; exec sleep 30", NULL};
    fixture_config(&f, &cfg, argv2);
    REQUIRE(fixture_start(&f, &cfg) == 0);
    ss_launcher_failure_summary(f.l, summary, sizeof summary);
    CHECK(strstr(summary, "rank 0 failed first: exited with code 1") != NULL);
    fixture_done(&f);
}

/* The OOM killer's report of process "$1" as the kernel logs it, for a
 * shell rank to append to a log file standing for /dev/kmsg. */
#define OOM_REPORT(pid)                                                      \
    "printf '6,1,1,-;memory: usage 65536kB, limit 65536kB, failcnt 9\\n"     \
    "6,2,2,-;oom-kill:constraint=CONSTRAINT_MEMCG,oom_memcg=/job,"           \
    "task_memcg=/job,task=sh,pid=%s,uid=0\\n3,3,3,-;Memory cgroup out of "   \
    "memory: Killed process %s (sh) total-vm:1kB, anon-rss:70000kB, "         \
    "file-rss:100kB\\n' " pid " " pid " >> \"$KLOG\";"

static void oom_kills_in_the_kernel_log_are_named(void)
{
    fixture f;
    REQUIRE(fixture_init(&f) == 0);
    char klog[PATH_MAX + 16];
    snprintf(klog, sizeof klog, "%s/kmsg", f.dir);
    close(open(klog, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
    REQUIRE(setenv("KLOG", klog, 1) == 0);
    /* Rank 1's own process is killed: the log names its pid. */
    char *argv[] = {"/bin/sh", "-c",
        "if [ $RANK = 1 ]; then " OOM_REPORT("$$") " kill -9 $$; fi;"
        " exec sleep 30", NULL};
    ss_launch_config cfg;
    fixture_config(&f, &cfg, argv);
    cfg.kernel_log = klog;
    REQUIRE(fixture_start(&f, &cfg) == 0);
    CHECK(!f.timed_out);
    CHECK_EQ_INT(f.sig[1], SIGKILL);
    char summary[4096], why[320];
    ss_launcher_failure_summary(f.l, summary, sizeof summary);
    CHECK(strstr(summary, "rank 1 failed first: killed by the kernel's OOM "
                 "killer (SIGKILL) (pid ") != NULL);
    CHECK(strstr(summary, "\nthe kernel's OOM killer ended it: its memory "
                 "cgroup /job reached its limit of 64 MiB (the process held "
                 "68 MiB anonymous and 0 MiB file-backed memory)\n") != NULL);
    CHECK_EQ_INT(ss_launcher_oom_kill(f.l, 1, why, sizeof why), 1);
    CHECK(strncmp(why, "the kernel's OOM killer ended it: ", 34) == 0);
    /* The ranks stepscope stopped were not OOM-killed. */
    CHECK_EQ_INT(ss_launcher_oom_kill(f.l, 0, why, sizeof why), 0);
    CHECK_STR(why, "");
    fixture_done(&f);

    /* A child of rank 1 is killed, and the rank fails naming its pid. */
    REQUIRE(fixture_init(&f) == 0);
    snprintf(klog, sizeof klog, "%s/kmsg", f.dir);
    close(open(klog, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
    REQUIRE(setenv("KLOG", klog, 1) == 0);
    char *argv2[] = {"/bin/sh", "-c",
        "if [ $RANK = 1 ]; then sleep 30 & c=$!; " OOM_REPORT("$c")
        " kill -9 $c; echo \"worker (pid $c) is killed by signal: Killed.\""
        " >&2; exit 1; fi; exec sleep 30", NULL};
    fixture_config(&f, &cfg, argv2);
    cfg.kernel_log = klog;
    REQUIRE(fixture_start(&f, &cfg) == 0);
    ss_launcher_failure_summary(f.l, summary, sizeof summary);
    CHECK(strstr(summary, "rank 1 failed first: exited with code 1") != NULL);
    CHECK(strstr(summary, "\nthe kernel's OOM killer ended process ") != NULL);
    CHECK(strstr(summary, " (sh), which its last lines name: its memory "
                 "cgroup /job reached its limit of 64 MiB") != NULL);
    CHECK_EQ_INT(ss_launcher_oom_kill(f.l, 1, why, sizeof why), 0);
    fixture_done(&f);
    unsetenv("KLOG");
}

TEST_LIST(TEST(env_is_set_per_rank), TEST(output_is_prefixed_split_and_logged),
          TEST(progress_updates_show_as_they_come),
          TEST(first_failure_stops_the_others), TEST(ranks_that_failed_the_same_way), TEST(rank_killed_by_signal),
          TEST(a_users_faulthandler_choice_is_kept),
          TEST(a_rank_that_left_early_is_named),
          TEST(a_rank_failing_on_a_lost_peer_is_not_named_first),
          TEST(oom_kills_in_the_kernel_log_are_named),
          TEST(command_not_found), TEST(grace_then_sigkill),
          TEST(kill_now_skips_grace), TEST(bad_config_and_spawn_failure),
          TEST(destroy_kills_running_ranks),
          TEST(no_orphans_after_launcher_sigkill),
          TEST(shim_usage_and_exec_failure),
          TEST(setsid_children_are_ended_at_job_end),
          TEST(setsid_children_are_ended_on_terminate),
          TEST(logs_are_private_and_never_truncated),
          TEST(multi_node_env_logs_and_prefixes_use_global_ranks),
          TEST(single_node_sets_node_rank_zero),
          TEST(multi_node_failure_names_the_global_rank),
          TEST(multi_node_config_errors),
          TEST(the_echo_mask_picks_streams_and_the_role_is_named))
