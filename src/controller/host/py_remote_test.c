/*
 * py_remote_test.c - unit tests for py_remote.c: the line table decoder
 * on a table written by hand (every entry form); the walk over a
 * synthetic memory image (a runtime, an interpreter, two threads, frames,
 * code objects, str and bytes objects laid out with 3.11's offsets), and
 * a walk that meets a torn object; and on real processes: a CPython 3.11
 * child asleep in libc's sleep() through ctypes is read, running and
 * stopped, with and without a cache of its python's symbols, and its
 * sleep is not cut short; a process that is not Python
 * and one that has exited give a reason, not stacks.
 */
#include "py_remote.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "testing.h"

#define PYTHON "/usr/bin/python3"

/* ---- the line table ---- */

static void line_table_forms(void)
{
    const uint8_t t[] = {
        0x80 | 13 << 3 | 0, 0x04,           /* [0,2): +2, no columns */
        0x80 | 11 << 3 | 1, 0x05, 0x09,     /* [2,6): +1, one line */
        0x80 | 0 << 3 | 0, 0x03,            /* [6,8): same, short */
        0x80 | 15 << 3 | 0,                 /* [8,10): no line */
        0x80 | 14 << 3 | 0, 0x07, 0, 1, 2,  /* [10,12): -3, long form */
        0x80 | 13 << 3 | 0, 0x48, 0x03,     /* [12,14): +100, 2 groups */
    };
    CHECK_EQ_INT(ss_py_addr2line(t, sizeof t, 10, -2), 10);
    CHECK_EQ_INT(ss_py_addr2line(t, sizeof t, 10, 0), 12);
    CHECK_EQ_INT(ss_py_addr2line(t, sizeof t, 10, 2), 13);
    CHECK_EQ_INT(ss_py_addr2line(t, sizeof t, 10, 4), 13);
    CHECK_EQ_INT(ss_py_addr2line(t, sizeof t, 10, 6), 13);
    CHECK_EQ_INT(ss_py_addr2line(t, sizeof t, 10, 8), -1);
    CHECK_EQ_INT(ss_py_addr2line(t, sizeof t, 10, 10), 10);
    CHECK_EQ_INT(ss_py_addr2line(t, sizeof t, 10, 12), 110);
    CHECK_EQ_INT(ss_py_addr2line(t, sizeof t, 10, 14), -1); /* past it */
    const uint8_t torn[] = {0x04, 0x80};
    CHECK_EQ_INT(ss_py_addr2line(torn, sizeof torn, 10, 0), -1);
    const uint8_t cut[] = {0x80 | 13 << 3, 0x48}; /* varint cut short */
    CHECK_EQ_INT(ss_py_addr2line(cut, sizeof cut, 10, 0), -1);
}

/* ---- a synthetic memory image ---- */

#define BASE 0x10000u
typedef struct {
    uint8_t mem[1 << 16];
} image;

static int image_read(void *ctx, uint64_t addr, void *buf, size_t len)
{
    image *im = ctx;
    if (addr < BASE || addr + len > BASE + sizeof im->mem)
        return -1;
    memcpy(buf, im->mem + (addr - BASE), len);
    return 0;
}

static void put64(image *im, uint64_t addr, uint64_t v)
{
    memcpy(im->mem + (addr - BASE), &v, 8);
}

static void put32(image *im, uint64_t addr, uint32_t v)
{
    memcpy(im->mem + (addr - BASE), &v, 4);
}

enum {
    RUNTIME = BASE + 0x0000, INTERP = BASE + 0x1000, TS1 = BASE + 0x2000,
    TS2 = BASE + 0x2400, CFRAME1 = BASE + 0x2800, CFRAME2 = BASE + 0x2900,
    FR_OUTER = BASE + 0x3000, FR_INNER = BASE + 0x3100,
    CODE_MOD = BASE + 0x4000, CODE_FN = BASE + 0x4400,
    STR = BASE + 0x6000, TABLE = BASE + 0x8000,
    CODE_TYPE = BASE + 0xe000, STR_TYPE = BASE + 0xe100,
    BYTES_TYPE = BASE + 0xe200,
};

static uint64_t next_str = STR;

/* An ASCII compact str (or a 2-byte one with WIDE) at the next place. */
static uint64_t make_str(image *im, const ss_py_layout *l, const char *s,
                         int wide)
{
    uint64_t at = next_str;
    size_t n = strlen(s);
    put64(im, at + l->ob_type, STR_TYPE);
    put64(im, at + l->str_length, n);
    uint32_t kind = wide ? 2 : 1;
    put32(im, at + l->str_state, kind << 2 | 1u << 5 | (wide ? 0 : 1u << 6) |
                                     1u << 7);
    uint64_t data = at + (wide ? l->str_compact_size : l->str_ascii_size);
    for (size_t i = 0; i < n; i++) {
        if (wide) {
            uint16_t c = (uint8_t)s[i];
            if (s[i] == '@')
                c = 0x3bb; /* λ */
            memcpy(im->mem + (data + 2 * i - BASE), &c, 2);
        } else {
            im->mem[data + i - BASE] = (uint8_t)s[i];
        }
    }
    next_str += 256;
    return at;
}

/* A code object named NAME in FILE from FIRST, with a one-entry-per-
 * instruction line table: instruction k is on line FIRST + k. */
static void make_code(image *im, const ss_py_layout *l, uint64_t at,
                      uint64_t table, const char *name, int wide,
                      const char *file, int first)
{
    put64(im, at + l->ob_type, CODE_TYPE);
    put32(im, at + l->co_firstlineno, (uint32_t)first);
    put64(im, at + l->co_filename, make_str(im, l, file, 0));
    put64(im, at + l->co_name, make_str(im, l, name, wide));
    put64(im, at + l->co_linetable, table);
    put64(im, table + l->ob_type, BYTES_TYPE);
    put64(im, table + l->ob_size, 8);
    for (int k = 0; k < 8; k++) /* 1 unit each, +0 then +1 per entry */
        im->mem[table + l->bytes_sval + k - BASE] =
            (uint8_t)(0x80 | (k ? 11 : 10) << 3);
}

static void make_frame(image *im, const ss_py_layout *l, uint64_t at,
                       uint64_t code, uint64_t previous, int instr)
{
    put64(im, at + l->fr_code, code);
    put64(im, at + l->fr_previous, previous);
    put64(im, at + l->fr_prev_instr, code + l->co_code_adaptive + 2 * instr);
}

static ss_py_process build_image(image *im)
{
    const ss_py_layout *l = ss_py_layout_for(3, 11);
    memset(im, 0, sizeof *im);
    next_str = STR;
    put64(im, RUNTIME + l->rt_interp_main, INTERP);
    put64(im, RUNTIME + l->rt_tstate_current, TS2);
    put64(im, INTERP + l->is_threads_head, TS1);
    /* TS1: the newest thread, no Python frame; TS2: the main thread */
    put64(im, TS1 + l->ts_next, TS2);
    put64(im, TS1 + l->ts_interp, INTERP);
    put64(im, TS1 + l->ts_thread_id, 0x7f0000001111ull);
    put64(im, TS1 + l->ts_cframe, CFRAME1);
    put64(im, TS2 + l->ts_interp, INTERP);
    put64(im, TS2 + l->ts_thread_id, 0x7f0000002222ull);
    put64(im, TS2 + l->ts_cframe, CFRAME2);
    put64(im, CFRAME2 + l->cf_current_frame, FR_INNER);
    make_code(im, l, CODE_MOD, TABLE, "<module>", 0, "/job/train.py", 1);
    make_code(im, l, CODE_FN, TABLE + 0x100, "step@", 1, "/job/train.py",
              20);
    make_frame(im, l, FR_OUTER, CODE_MOD, 0, 3);  /* line 1 + 3 */
    make_frame(im, l, FR_INNER, CODE_FN, FR_OUTER, 5); /* line 25 */
    return (ss_py_process){.runtime = RUNTIME, .code_type = CODE_TYPE,
                           .unicode_type = STR_TYPE,
                           .bytes_type = BYTES_TYPE, .version = 0x030b02f0,
                           .layout = l};
}

typedef struct {
    int n;
    char file[64];
    long line;
    size_t at;
} leaves;

static void count_leaf(void *ctx, const char *file, long line, size_t at)
{
    leaves *lv = ctx;
    lv->n++;
    snprintf(lv->file, sizeof lv->file, "%s", file);
    lv->line = line;
    lv->at = at;
}

static void walk_synthetic_image(void)
{
    static image im;
    ss_py_process p = build_image(&im);
    ss_buf out = {0};
    leaves lv = {0};
    char why[256] = "";
    REQUIRE(ss_py_walk(&p, image_read, &im, &out, count_leaf, &lv, why,
                       sizeof why) == 0);
    CHECK_STR(out.data,
              "{\"id\":\"0x00007f0000001111\",\"current\":false,"
              "\"frames\":[]},"
              "{\"id\":\"0x00007f0000002222\",\"current\":true,\"frames\":["
              "{\"func\":\"<module>\",\"file\":\"/job/train.py\","
              "\"line\":4},"
              "{\"func\":\"step\xce\xbb\",\"file\":\"/job/train.py\","
              "\"line\":25}]}");
    CHECK_EQ_INT(lv.n, 1);
    CHECK_STR(lv.file, "/job/train.py");
    CHECK_EQ_INT(lv.line, 25);
    CHECK(strncmp(out.data + lv.at - 9, "\"line\":25", 9) == 0);
    ss_buf_free(&out);
}

static void torn_image_gives_why_and_nothing(void)
{
    static image im;
    ss_py_process p = build_image(&im);
    const ss_py_layout *l = p.layout;
    ss_buf out = {0};
    ss_buf_puts(&out, "kept");
    char why[256] = "";
    leaves lv = {0};
    /* the inner frame's code object replaced by something else */
    put64(&im, CODE_FN + l->ob_type, STR_TYPE);
    CHECK_EQ_INT(ss_py_walk(&p, image_read, &im, &out, count_leaf, &lv, why,
                            sizeof why), -1);
    CHECK(strstr(why, "not a code object") != NULL);
    CHECK_STR(out.data, "kept");
    CHECK_EQ_INT(lv.n, 0);
    /* a thread state that is not the interpreter's */
    p = build_image(&im);
    put64(&im, TS2 + l->ts_interp, INTERP + 8);
    CHECK_EQ_INT(ss_py_walk(&p, image_read, &im, &out, NULL, NULL, why,
                            sizeof why), -1);
    CHECK(strstr(why, "not the interpreter's") != NULL);
    /* a frame chain that points outside the image */
    p = build_image(&im);
    put64(&im, FR_OUTER + l->fr_previous, 0x42);
    CHECK_EQ_INT(ss_py_walk(&p, image_read, &im, &out, NULL, NULL, why,
                            sizeof why), -1);
    CHECK(strstr(why, "cannot read a frame") != NULL);
    /* an interpreter not running */
    p = build_image(&im);
    put64(&im, RUNTIME + l->rt_interp_main, 0);
    CHECK_EQ_INT(ss_py_walk(&p, image_read, &im, &out, NULL, NULL, why,
                            sizeof why), -1);
    CHECK(strstr(why, "not running") != NULL);
    CHECK_STR(out.data, "kept");
    ss_buf_free(&out);
}

/* A cycle of frames ends at SS_PY_MAX_FRAMES. */
static void frame_cycle_is_bounded(void)
{
    static image im;
    ss_py_process p = build_image(&im);
    put64(&im, FR_OUTER + p.layout->fr_previous, FR_INNER);
    ss_buf out = {0};
    char why[256];
    REQUIRE(ss_py_walk(&p, image_read, &im, &out, NULL, NULL, why,
                       sizeof why) == 0);
    size_t frames = 0;
    for (const char *s = out.data; (s = strstr(s, "\"func\"")); s++)
        frames++;
    CHECK_EQ_INT(frames, SS_PY_MAX_FRAMES);
    ss_buf_free(&out);
}

/* ---- real processes ---- */

static const char script[] =
    "import ctypes, sys, threading, time\n"          /* 1 */
    "def inner():\n"                                  /* 2 */
    "    sys.stdout.write('R'); sys.stdout.flush()\n" /* 3 */
    "    t0 = time.monotonic()\n"                     /* 4 */
    "    ctypes.CDLL(None).sleep(2)\n"                /* 5 */
    "    print(round(time.monotonic() - t0, 1), flush=True)\n"
    "def outer():\n"                                  /* 7 */
    "    inner()\n"                                   /* 8 */
    "threading.Thread(target=time.sleep, args=(30,), daemon=True).start()\n"
    "outer()\n";                                      /* 10 */

/* 1 once every thread of PID is asleep (state S), waiting 20 s at most.
 * After the 'R' the python blocks nowhere but in sleep() (the main thread)
 * and time.sleep() (the other): a fixed wait was too short for a child
 * that a loaded machine schedules late. */
static int wait_all_asleep(pid_t pid)
{
    char dir[64];
    snprintf(dir, sizeof dir, "/proc/%d/task", (int)pid);
    for (int waited = 0; waited < 20000; waited += 5) {
        DIR *d = opendir(dir);
        if (!d)
            return 0;
        int threads = 0, asleep = 0;
        struct dirent *e;
        while ((e = readdir(d))) {
            if (e->d_name[0] == '.')
                continue;
            char path[128], buf[512] = "";
            snprintf(path, sizeof path, "%s/%s/stat", dir, e->d_name);
            FILE *f = fopen(path, "r");
            if (!f)
                continue;
            size_t n = fread(buf, 1, sizeof buf - 1, f);
            fclose(f);
            buf[n] = '\0';
            char *p = strrchr(buf, ')');
            threads++;
            asleep += p && p[1] && p[2] == 'S';
        }
        closedir(d);
        if (threads >= 2 && asleep == threads)
            return 1;
        usleep(5000);
    }
    return 0;
}

/* A python child in libc's sleep(2); *OUT_FD reads its stdout. */
static pid_t spawn_python(int *out_fd)
{
    int p[2];
    if (pipe(p) != 0)
        abort();
    pid_t pid = fork();
    if (pid < 0)
        abort();
    if (pid == 0) {
        dup2(p[1], 1);
        close(p[0]);
        close(p[1]);
        execl(PYTHON, PYTHON, "-c", script, (char *)NULL);
        _exit(127);
    }
    close(p[1]);
    char c = 0;
    if (read(p[0], &c, 1) != 1 || c != 'R') {
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        close(p[0]);
        return -1;
    }
    if (!wait_all_asleep(pid)) /* into sleep() */
        fprintf(stderr, "  the python child never went to sleep\n");
    *out_fd = p[0];
    return pid;
}

static void check_python_stack(const char *json)
{
    CHECK(strstr(json, "{\"func\":\"<module>\",\"file\":\"<string>\","
                       "\"line\":10},{\"func\":\"outer\",\"file\":"
                       "\"<string>\",\"line\":8},{\"func\":\"inner\","
                       "\"file\":\"<string>\",\"line\":5}]}") != NULL);
    /* the main thread is the oldest, listed last; the other thread is in
     * threading's code */
    CHECK(strstr(json, "\"func\":\"run\"") != NULL);
    CHECK(strstr(json, "\"current\":true") == NULL); /* both sleep */
}

static void python_child_read_without_waking_it(void)
{
    if (access(PYTHON, X_OK) != 0) {
        printf("skip: no %s\n", PYTHON);
        return;
    }
    int fd;
    pid_t pid = spawn_python(&fd);
    REQUIRE(pid > 0);
    ss_buf b = {0};
    char why[256] = "";
    int rc = ss_py_read_stacks(pid, NULL, &b, NULL, NULL, why, sizeof why);
    if (rc != 0)
        fprintf(stderr, "  why: %s\n", why);
    CHECK_EQ_INT(rc, 0);
    if (rc == 0)
        check_python_stack(b.data);
    /* a second reading with a cache: the python's symbols are read once
     * and serve again */
    ss_py_cache cache;
    memset(&cache, 0, sizeof cache);
    for (int i = 0; i < 2; i++) {
        ss_buf_reset(&b);
        CHECK_EQ_INT(ss_py_read_stacks(pid, &cache, &b, NULL, NULL, why,
                                       sizeof why), 0);
        CHECK_EQ_INT(cache.n, 1);
        CHECK(cache.f[0].found && cache.f[0].runtime != 0);
        if (b.data)
            check_python_stack(b.data);
    }
    /* stopped, it is read as it stands */
    kill(pid, SIGSTOP);
    int st;
    REQUIRE(waitpid(pid, &st, WUNTRACED) == pid && WIFSTOPPED(st));
    ss_buf_reset(&b);
    CHECK_EQ_INT(ss_py_read_stacks(pid, NULL, &b, NULL, NULL, why, sizeof why), 0);
    if (b.data)
        check_python_stack(b.data);
    kill(pid, SIGCONT);
    /* the sleep ran its full 2 s: nothing interrupted it */
    char out[64] = "";
    ssize_t n = 0, got;
    while (n < (ssize_t)sizeof out - 1 &&
           (got = read(fd, out + n, sizeof out - 1 - (size_t)n)) > 0)
        n += got;
    out[n > 0 ? n : 0] = '\0';
    CHECK(atof(out) >= 1.9);
    close(fd);
    waitpid(pid, NULL, 0);
    ss_buf_free(&b);
}

static void not_python_and_gone(void)
{
    pid_t pid = fork();
    if (pid == 0) {
        struct timespec ts = {100, 0};
        for (;;)
            nanosleep(&ts, NULL);
    }
    REQUIRE(pid > 0);
    usleep(50000);
    ss_buf b = {0};
    char why[256] = "";
    CHECK_EQ_INT(ss_py_read_stacks(pid, NULL, &b, NULL, NULL, why, sizeof why),
                 -1);
    CHECK(strstr(why, "no CPython interpreter") != NULL);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    CHECK_EQ_INT(ss_py_read_stacks(pid, NULL, &b, NULL, NULL, why, sizeof why),
                 -1);
    CHECK(strstr(why, "/maps") != NULL);
    CHECK(b.data == NULL || b.len == 0);
    ss_buf_free(&b);
}

TEST_LIST(TEST(line_table_forms), TEST(walk_synthetic_image),
          TEST(torn_image_gives_why_and_nothing),
          TEST(frame_cycle_is_bounded),
          TEST(python_child_read_without_waking_it),
          TEST(not_python_and_gone))
