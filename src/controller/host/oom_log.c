/*
 * oom_log.c - the kernel's OOM kills during a job (oom_log.h).
 *
 * The log is read line by line: /dev/kmsg returns one record per read
 * ("PRIO,SEQ,USEC,FLAGS;message", then continuation lines that start with
 * a space), a regular file any number of lines per read; both end their
 * lines with '\n'.  Of the OOM killer's report three lines matter, in the
 * order the kernel writes them: "memory: usage ..., limit ..." (a cgroup's
 * OOM), "oom-kill:constraint=...,oom_memcg=...,pid=..." and "... Killed
 * process PID (COMM) total-vm:..., anon-rss:..., file-rss:...", which ends
 * one kill.  The last SS_OOM_KEPT kills are kept.
 */
#include "oom_log.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SS_OOM_KEPT 32
#define LINE_MAX_BYTES 2048
#define READ_CAP_LINES 200000 /* per call: a chatty log cannot hold a caller */

struct ss_oom_log {
    int fd;                      /* -1: the log cannot be read */
    char unreadable[160];
    char vmstat[256];
    long long base_kills;        /* the host's count at the open; -1 none */
    long long answered;          /* kills answered 2 for */
    char line[LINE_MAX_BYTES];
    size_t line_len;
    int line_too_long;           /* the rest of this line is skipped */
    /* The report being read. */
    long long pending_limit_kb;
    char pending_cgroup[128];
    int pending_memcg;
    ss_oom_kill kept[SS_OOM_KEPT];
    unsigned kept_next, kept_count;
};

/* The host's count of OOM kills, or -1 when it cannot be read. */
static long long host_oom_kills(const char *path)
{
    FILE *f = fopen(path, "re");
    if (!f)
        return -1;
    char key[64];
    long long v, found = -1;
    while (fscanf(f, "%63s %lld", key, &v) == 2) {
        if (strcmp(key, "oom_kill") == 0) {
            found = v;
            break;
        }
    }
    fclose(f);
    return found;
}

ss_oom_log *ss_oom_log_open(const char *kmsg_path, const char *vmstat_path)
{
    ss_oom_log *o = calloc(1, sizeof *o);
    if (!o)
        return NULL;
    const char *kmsg = kmsg_path ? kmsg_path : "/dev/kmsg";
    snprintf(o->vmstat, sizeof o->vmstat, "%s",
             vmstat_path ? vmstat_path : "/proc/vmstat");
    o->base_kills = host_oom_kills(o->vmstat);
    o->pending_limit_kb = -1;
    o->fd = open(kmsg, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (o->fd < 0) {
        snprintf(o->unreadable, sizeof o->unreadable, "%s: %s", kmsg,
                 strerror(errno));
    } else if (lseek(o->fd, 0, SEEK_END) < 0) {
        snprintf(o->unreadable, sizeof o->unreadable, "%s: %s", kmsg,
                 strerror(errno));
        close(o->fd);
        o->fd = -1;
    }
    return o;
}

void ss_oom_log_free(ss_oom_log *o)
{
    if (!o)
        return;
    if (o->fd >= 0)
        close(o->fd);
    free(o);
}

const char *ss_oom_log_unreadable(const ss_oom_log *o)
{
    return o ? o->unreadable : "";
}

/* The number after KEY in S (as "KEY123kB"), or -1. */
static long long number_after(const char *s, const char *key)
{
    const char *p = strstr(s, key);
    if (!p)
        return -1;
    char *end;
    long long v = strtoll(p + strlen(key), &end, 10);
    return end == p + strlen(key) ? -1 : v;
}

/* Copies the value of KEY= in the comma-separated S into OUT ("" when
 * absent). */
static void field_value(const char *s, const char *key, char *out,
                        size_t len)
{
    out[0] = '\0';
    size_t k = strlen(key);
    for (const char *p = s; (p = strstr(p, key)) != NULL; p += k) {
        if ((p == s || p[-1] == ',' || p[-1] == ':') && p[k] == '=') {
            size_t n = strcspn(p + k + 1, ",");
            if (n >= len)
                n = len - 1;
            memcpy(out, p + k + 1, n);
            out[n] = '\0';
            return;
        }
    }
}

/* One message of the log (without the record's header). */
static void take_message(ss_oom_log *o, const char *msg)
{
    if (strncmp(msg, "memory: usage ", 14) == 0) {
        o->pending_limit_kb = number_after(msg, "limit ");
        return;
    }
    if (strncmp(msg, "oom-kill:", 9) == 0) {
        char constraint[48];
        field_value(msg + 9, "constraint", constraint, sizeof constraint);
        o->pending_memcg = strcmp(constraint, "CONSTRAINT_MEMCG") == 0;
        field_value(msg + 9, "oom_memcg", o->pending_cgroup,
                    sizeof o->pending_cgroup);
        return;
    }
    const char *k = strstr(msg, "Killed process ");
    if (!k)
        return;
    ss_oom_kill kill = {.limit_kb = -1, .anon_kb = -1, .file_kb = -1};
    char *end;
    long pid = strtol(k + 15, &end, 10);
    if (end == k + 15 || pid <= 0)
        return;
    kill.pid = (pid_t)pid;
    const char *open_paren = strchr(end, '(');
    const char *close_paren = open_paren ? strrchr(open_paren, ')') : NULL;
    if (open_paren && close_paren) {
        size_t n = (size_t)(close_paren - open_paren - 1);
        if (n >= sizeof kill.comm)
            n = sizeof kill.comm - 1;
        memcpy(kill.comm, open_paren + 1, n);
    }
    kill.anon_kb = number_after(k, "anon-rss:");
    kill.file_kb = number_after(k, "file-rss:");
    kill.memcg = o->pending_memcg ||
                 strncmp(msg, "Memory cgroup out of memory", 27) == 0;
    if (kill.memcg) {
        kill.limit_kb = o->pending_limit_kb;
        snprintf(kill.cgroup, sizeof kill.cgroup, "%s", o->pending_cgroup);
    }
    o->kept[o->kept_next] = kill;
    o->kept_next = (o->kept_next + 1) % SS_OOM_KEPT;
    if (o->kept_count < SS_OOM_KEPT)
        o->kept_count++;
    o->pending_limit_kb = -1;
    o->pending_memcg = 0;
    o->pending_cgroup[0] = '\0';
}

/* One line of the log: a kmsg record's header ("6,123,456,-;") or dmesg's
 * time stamp ("[  12.345678] ") is skipped; continuation lines too. */
static void take_line(ss_oom_log *o, const char *line)
{
    if (line[0] == ' ' || line[0] == '\0')
        return;
    const char *semi = strchr(line, ';');
    const char *stamp_end = line[0] == '[' ? strchr(line, ']') : NULL;
    if (semi && strspn(line, "0123456789,-+cm") == (size_t)(semi - line))
        line = semi + 1;
    else if (stamp_end)
        line = stamp_end + 1 + (stamp_end[1] == ' ');
    take_message(o, line);
}

/* Reads what the log has now, up to READ_CAP_LINES lines. */
static void read_log(ss_oom_log *o)
{
    char buf[8192];
    unsigned lines = 0;
    while (o->fd >= 0 && lines < READ_CAP_LINES) {
        ssize_t n = read(o->fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EPIPE)
            continue; /* records overwritten before they were read */
        if (n < 0 && errno != EAGAIN) {
            /* Opened but not readable (EPERM, say): the count answers. */
            snprintf(o->unreadable, sizeof o->unreadable, "reading the "
                     "kernel's log: %s", strerror(errno));
            close(o->fd);
            o->fd = -1;
            break;
        }
        if (n <= 0)
            break;    /* EAGAIN: nothing more now; 0: a file's end */
        for (ssize_t i = 0; i < n; i++) {
            if (buf[i] != '\n') {
                if (o->line_len + 1 < sizeof o->line)
                    o->line[o->line_len++] = buf[i];
                else
                    o->line_too_long = 1;
                continue;
            }
            o->line[o->line_len] = '\0';
            if (!o->line_too_long)
                take_line(o, o->line);
            o->line_len = 0;
            o->line_too_long = 0;
            lines++;
        }
    }
}

/* Does TEXT name PID as a process: "pid 42", "pid(s) 42", "pid=42",
 * "pids 7, 42" (up to the end of that list)? */
static int names_pid(const char *text, pid_t pid)
{
    for (const char *p = text; (p = strstr(p, "pid")) != NULL; p += 3) {
        if (p > text && isalpha((unsigned char)p[-1]))
            continue; /* "rapid 12" */
        const char *q = p + 3;
        q += strspn(q, "(s)= ");
        while (*q >= '0' && *q <= '9') {
            char *end;
            long v = strtol(q, &end, 10);
            if (v == (long)pid)
                return 1;
            q = end + strspn(end, ", ");
        }
    }
    return 0;
}

/* The latest kept kill of PID, or with TEXT the latest whose pid TEXT
 * names, into KILL (may be NULL): 1, or 0 when there is none. */
static int find_kill(const ss_oom_log *o, pid_t pid, const char *text,
                     ss_oom_kill *kill)
{
    for (unsigned i = 0; i < o->kept_count; i++) {
        const ss_oom_kill *k =
            &o->kept[(o->kept_next + SS_OOM_KEPT - 1 - i) % SS_OOM_KEPT];
        if (text ? names_pid(text, k->pid) : k->pid == pid) {
            if (kill)
                *kill = *k;
            return 1;
        }
    }
    return 0;
}

int ss_oom_log_explain(ss_oom_log *o, pid_t pid, ss_oom_kill *kill)
{
    if (!o)
        return 0;
    read_log(o);
    if (o->fd >= 0)
        return find_kill(o, pid, NULL, kill);
    long long now = host_oom_kills(o->vmstat);
    if (o->base_kills < 0 || now < 0 || now - o->base_kills <= o->answered)
        return 0;
    o->answered++;
    return 2;
}

/* KB as "1011 MiB" or "1.7 GiB" into OUT. */
static void size_text(long long kb, char *out, size_t len)
{
    if (kb >= 1024LL * 1024)
        snprintf(out, len, "%.1f GiB", (double)kb / (1024.0 * 1024.0));
    else
        snprintf(out, len, "%lld MiB", (kb + 512) / 1024);
}

void ss_oom_kill_describe(const ss_oom_kill *kill, char *out, size_t len)
{
    if (len == 0)
        return;
    char limit[32] = "", anon[32] = "", file[32] = "", held[96] = "";
    if (kill->limit_kb >= 0)
        size_text(kill->limit_kb, limit, sizeof limit);
    if (kill->anon_kb >= 0)
        size_text(kill->anon_kb, anon, sizeof anon);
    if (kill->file_kb >= 0)
        size_text(kill->file_kb, file, sizeof file);
    if (anon[0] && file[0])
        snprintf(held, sizeof held, " (the process held %s anonymous and "
                 "%s file-backed memory)", anon, file);
    else if (anon[0])
        snprintf(held, sizeof held, " (the process held %s anonymous "
                 "memory)", anon);
    if (kill->memcg)
        snprintf(out, len, "its memory cgroup%s%s reached its limit%s%s%s",
                 kill->cgroup[0] ? " " : "", kill->cgroup,
                 limit[0] ? " of " : "", limit, held);
    else
        snprintf(out, len, "the host ran out of memory%s", held);
}

int ss_oom_log_kill_named_in(ss_oom_log *o, const char *text,
                             ss_oom_kill *kill)
{
    if (!o || !text)
        return 0;
    read_log(o);
    return find_kill(o, 0, text, kill);
}
