/*
 * fingerprint.c - a run's fingerprint, collected at launch (see
 * fingerprint.h and docs/guard.md).
 */
#include "fingerprint.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "stepscope.h"

/* The environment variables that change how fast the same job runs. */
static const char *const speed_knobs[] = {
    "OMP_NUM_THREADS", "MKL_NUM_THREADS", "CUDA_VISIBLE_DEVICES",
};
#define NCCL_PREFIX "NCCL_"

/* Prints the Python version, then torch's, one a line (an empty line when
 * torch is not installed), without importing torch. */
static const char probe_script[] =
    "import sys, os, importlib.util as u\n"
    "print(sys.version.split()[0])\n"
    "t = ''\n"
    "try:\n"
    "    s = u.find_spec('torch')\n"
    "    for d in (s.submodule_search_locations or []) if s else []:\n"
    "        for l in open(os.path.join(d, 'version.py')):\n"
    "            if l.startswith('__version__'):\n"
    "                t = l.split('=', 1)[1].strip().strip('\\'\"')\n"
    "        break\n"
    "except Exception:\n"
    "    pass\n"
    "print(t)\n";

void ss_fingerprint_sources_default(ss_fingerprint_sources *src)
{
    src->cpuinfo = "/proc/cpuinfo";
    src->nvidia_driver = "/proc/driver/nvidia/version";
    src->nvidia_gpus = "/proc/driver/nvidia/gpus";
}

int ss_fingerprint_is_python(const char *argv0)
{
    const char *slash = strrchr(argv0, '/');
    return strncmp(slash ? slash + 1 : argv0, "python", 6) == 0;
}

/* Strips leading and trailing white space of S in place; returns S. */
static char *trim(char *s)
{
    while (*s == ' ' || *s == '\t')
        s++;
    size_t n = strlen(s);
    while (n && (s[n - 1] == '\n' || s[n - 1] == ' ' || s[n - 1] == '\t' ||
                 s[n - 1] == '\r'))
        s[--n] = '\0';
    return s;
}

/* The value after the first "KEY<spaces>:" line of file PATH, into OUT;
 * 0, or -1 when there is none. */
static int read_keyed_line(const char *path, const char *key, char *out,
                           size_t outlen)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    char line[1024];
    int found = -1;
    size_t klen = strlen(key);
    while (found < 0 && fgets(line, sizeof line, f)) {
        if (strncmp(line, key, klen) != 0)
            continue;
        char *p = line + klen;
        while (*p == ' ' || *p == '\t')
            p++;
        if (*p != ':')
            continue;
        snprintf(out, outlen, "%s", trim(p + 1));
        found = out[0] ? 0 : -1;
    }
    fclose(f);
    return found;
}

/* The GPU models of every GPU the NVIDIA driver lists, distinct ones
 * joined by ", " in directory order, into OUT; 0, or -1 when none. */
static int read_gpu_models(const char *dir, char *out, size_t outlen)
{
    DIR *d = opendir(dir);
    if (!d)
        return -1;
    out[0] = '\0';
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        char path[1024], model[256];
        snprintf(path, sizeof path, "%s/%s/information", dir, e->d_name);
        if (read_keyed_line(path, "Model", model, sizeof model) != 0 ||
            strstr(out, model))
            continue;
        size_t len = strlen(out);
        snprintf(out + len, outlen - len, "%s%s", len ? ", " : "", model);
    }
    closedir(d);
    return out[0] ? 0 : -1;
}

/* The driver version from the first line of /proc/driver/nvidia/version
 * ("NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.14  ..."): the
 * first word that starts with a digit and holds a dot. */
static int read_driver_version(const char *path, char *out, size_t outlen)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    char line[512];
    int found = -1;
    if (fgets(line, sizeof line, f)) {
        char *save = NULL;
        for (char *w = strtok_r(line, " \t\n", &save); w;
             w = strtok_r(NULL, " \t\n", &save))
            if (w[0] >= '0' && w[0] <= '9' && strchr(w, '.')) {
                snprintf(out, outlen, "%s", w);
                found = 0;
                break;
            }
    }
    fclose(f);
    return found;
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Runs `PYTHON -c probe_script` and reads its two lines into PY and TORCH
 * (either may be left ""), killing it after SS_FINGERPRINT_PROBE_MS. */
static void probe_python(const char *python, char *py, size_t pylen,
                         char *torch, size_t torchlen)
{
    py[0] = torch[0] = '\0';
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0)
        return;
    pid_t pid = fork();
    if (pid < 0) {
        close(fds[0]);
        close(fds[1]);
        return;
    }
    if (pid == 0) {
        int null = open("/dev/null", O_RDWR);
        dup2(null, 0);
        dup2(null, 2);
        dup2(fds[1], 1);
        char *const args[] = {(char *)python, "-c", (char *)probe_script,
                              NULL};
        execvp(python, args);
        _exit(127);
    }
    close(fds[1]);
    char text[512];
    size_t len = 0;
    int64_t deadline = now_ms() + SS_FINGERPRINT_PROBE_MS;
    for (;;) {
        int64_t left = deadline - now_ms();
        if (left <= 0 || len + 1 >= sizeof text)
            break;
        struct pollfd p = {fds[0], POLLIN, 0};
        int rc = poll(&p, 1, (int)left);
        if (rc < 0 && errno == EINTR)
            continue;
        if (rc <= 0)
            break;
        ssize_t got = read(fds[0], text + len, sizeof text - 1 - len);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            break;
        len += (size_t)got;
    }
    close(fds[0]);
    text[len] = '\0';
    kill(pid, SIGKILL); /* harmless when it has exited: it is not reaped */
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
        ;
    char *nl = strchr(text, '\n');
    if (!nl)
        return; /* killed before it said anything useful */
    *nl = '\0';
    char *second = nl + 1, *end = strchr(second, '\n');
    if (!end)
        return;
    *end = '\0';
    snprintf(py, pylen, "%s", trim(text));
    snprintf(torch, torchlen, "%s", trim(second));
}

/* Appends ,"KEY":"VALUE" when VALUE is not empty. */
static void add_str(ss_buf *out, const char *key, const char *value)
{
    if (!value || !value[0])
        return;
    ss_buf_printf(out, ",\"%s\":", key);
    ss_buf_json_str(out, value);
}

void ss_fingerprint_collect(ss_buf *out, char *const *argv,
                            const char *command, uint32_t world_size,
                            uint32_t nodes, const ss_fingerprint_sources *src)
{
    ss_buf_puts(out, "{\"command\":");
    ss_buf_json_str(out, command);
    ss_buf_printf(out, ",\"world_size\":%u,\"nodes\":%u", world_size, nodes);
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    add_str(out, "host", host);
    char text[512];
    if (read_keyed_line(src->cpuinfo, "model name", text, sizeof text) == 0)
        add_str(out, "cpu", text);
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    if (cpus > 0)
        ss_buf_printf(out, ",\"cpus\":%ld", cpus);
    struct utsname u;
    if (uname(&u) == 0)
        add_str(out, "kernel", u.release);
    if (read_gpu_models(src->nvidia_gpus, text, sizeof text) == 0)
        add_str(out, "gpu", text);
    if (read_driver_version(src->nvidia_driver, text, sizeof text) == 0)
        add_str(out, "gpu_driver", text);
    add_str(out, "stepscope", SS_VERSION_STRING);
    if (argv && argv[0] && ss_fingerprint_is_python(argv[0])) {
        char py[64], torch[64];
        probe_python(argv[0], py, sizeof py, torch, sizeof torch);
        add_str(out, "python", py);
        add_str(out, "torch", torch);
    }
    ss_buf_puts(out, ",\"env\":{");
    int first = 1;
    for (size_t i = 0; i < sizeof speed_knobs / sizeof speed_knobs[0]; i++) {
        const char *v = getenv(speed_knobs[i]);
        if (!v)
            continue;
        ss_buf_printf(out, "%s\"%s\":", first ? "" : ",", speed_knobs[i]);
        ss_buf_json_str(out, v);
        first = 0;
    }
    extern char **environ;
    for (char **e = environ; *e; e++) {
        const char *eq = strchr(*e, '=');
        if (!eq || strncmp(*e, NCCL_PREFIX, strlen(NCCL_PREFIX)) != 0)
            continue;
        char key[128];
        snprintf(key, sizeof key, "%.*s", (int)(eq - *e), *e);
        ss_buf_puts(out, first ? "" : ",");
        ss_buf_json_str(out, key);
        ss_buf_puts(out, ":");
        ss_buf_json_str(out, eq + 1);
        first = 0;
    }
    ss_buf_puts(out, "}}");
}
