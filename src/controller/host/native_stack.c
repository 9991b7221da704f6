/*
 * native_stack.c - every thread's native stack of a process, through
 * ptrace and libdw's unwinder (native_stack.h).  Bounded: at most
 * SS_NATIVE_MAX_THREADS threads and SS_NATIVE_MAX_FRAMES frames each, the
 * cut said with "truncated"; a symbol longer than 500 bytes is cut.
 */
#include "native_stack.h"

#include <dlfcn.h>
#include <elfutils/libdwfl.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* C++ symbols are demangled with libstdc++'s __cxa_demangle when that
 * library can be loaded; else they stay mangled. */
typedef char *(*demangle_fn)(const char *, char *, size_t *, int *);

static demangle_fn demangler(void)
{
    static int tried;
    static demangle_fn fn;
    if (!tried) {
        tried = 1;
        void *h = dlopen("libstdc++.so.6", RTLD_LAZY | RTLD_LOCAL);
        if (h)
            *(void **)&fn = dlsym(h, "__cxa_demangle");
    }
    return fn;
}

typedef struct {
    Dwfl *dwfl;
    pid_t pid;
    ss_buf *out;
    int nthreads;
    int nframes;
    int first_frame;
} unwind_ctx;

static const Dwfl_Callbacks proc_callbacks = {
    .find_elf = dwfl_linux_proc_find_elf,
    .find_debuginfo = dwfl_standard_find_debuginfo,
};

static void thread_name(pid_t pid, pid_t tid, char *out, size_t cap)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/task/%d/comm", (int)pid, (int)tid);
    out[0] = '\0';
    FILE *f = fopen(path, "re");
    if (!f)
        return;
    if (fgets(out, (int)cap, f))
        out[strcspn(out, "\n")] = '\0';
    fclose(f);
}

static int on_frame(Dwfl_Frame *frame, void *arg)
{
    unwind_ctx *u = arg;
    Dwarf_Addr pc;
    bool activation;
    if (!dwfl_frame_pc(frame, &pc, &activation))
        return DWARF_CB_ABORT;
    if (u->nframes >= SS_NATIVE_MAX_FRAMES) {
        ss_buf_puts(u->out, "],\"truncated\":true");
        u->nframes = -1; /* the array is closed */
        return DWARF_CB_ABORT;
    }
    /* A return address points after the call: look up the call itself. */
    Dwarf_Addr look = activation ? pc : pc - 1;
    Dwfl_Module *mod = dwfl_addrmodule(u->dwfl, look);
    const char *sym = NULL, *modname = NULL;
    GElf_Off off = 0;
    GElf_Sym s;
    if (mod) {
        sym = dwfl_module_addrinfo(mod, look, &off, &s, NULL, NULL, NULL);
        modname = dwfl_module_info(mod, NULL, NULL, NULL, NULL, NULL, NULL,
                                   NULL);
        if (modname) {
            const char *slash = strrchr(modname, '/');
            if (slash)
                modname = slash + 1;
        }
    }
    if (u->nframes++)
        ss_buf_puts(u->out, ",");
    ss_buf_printf(u->out, "{\"pc\":\"0x%llx\",\"symbol\":",
                  (unsigned long long)pc);
    if (sym) {
        char name[512];
        char *plain = NULL;
        demangle_fn dm = sym[0] == '_' && sym[1] == 'Z' ? demangler() : NULL;
        int status = -1;
        if (dm)
            plain = dm(sym, NULL, NULL, &status);
        const char *shown = plain && status == 0 ? plain : sym;
        if (off)
            snprintf(name, sizeof name, "%s+0x%llx", shown,
                     (unsigned long long)off);
        else
            snprintf(name, sizeof name, "%s", shown);
        free(plain);
        ss_buf_json_str(u->out, name);
    } else {
        ss_buf_puts(u->out, "null");
    }
    ss_buf_puts(u->out, ",\"module\":");
    if (modname && *modname)
        ss_buf_json_str(u->out, modname);
    else
        ss_buf_puts(u->out, "null");
    ss_buf_puts(u->out, "}");
    return DWARF_CB_OK;
}

static int on_thread(Dwfl_Thread *thread, void *arg)
{
    unwind_ctx *u = arg;
    if (u->nthreads >= SS_NATIVE_MAX_THREADS)
        return DWARF_CB_ABORT;
    pid_t tid = dwfl_thread_tid(thread);
    char name[64];
    thread_name(u->pid, tid, name, sizeof name);
    ss_buf_printf(u->out, "%s{\"tid\":%d,\"name\":", u->nthreads++ ? "," : "",
                  (int)tid);
    ss_buf_json_str(u->out, name);
    ss_buf_puts(u->out, ",\"native\":[");
    u->nframes = 0;
    /* An unwind that stops early (no CFI for a frame) keeps what it has. */
    (void)dwfl_thread_getframes(thread, on_frame, u);
    if (u->nframes >= 0)
        ss_buf_puts(u->out, "]");
    ss_buf_puts(u->out, "}");
    return DWARF_CB_OK;
}

int ss_native_stack_json(pid_t pid, ss_buf *out)
{
    ss_buf threads = {0};
    const char *why = NULL;
    char whybuf[256];
    unwind_ctx u = {.pid = pid, .out = &threads};
    u.dwfl = dwfl_begin(&proc_callbacks);
    if (!u.dwfl) {
        why = dwfl_errmsg(-1);
    } else if (dwfl_linux_proc_report(u.dwfl, pid) != 0) {
        snprintf(whybuf, sizeof whybuf, "reading /proc/%d/maps: %s", (int)pid,
                 strerror(errno));
        why = whybuf;
    } else if (dwfl_report_end(u.dwfl, NULL, NULL) != 0) {
        why = dwfl_errmsg(-1);
    } else {
        int rc = dwfl_linux_proc_attach(u.dwfl, pid, false);
        if (rc != 0) {
            snprintf(whybuf, sizeof whybuf, "ptrace attach: %s%s",
                     rc > 0 ? strerror(rc) : dwfl_errmsg(-1),
                     rc == EPERM ? " (kernel.yama.ptrace_scope or a missing "
                                   "CAP_SYS_PTRACE forbids it)" : "");
            why = whybuf;
        } else if (dwfl_getthreads(u.dwfl, on_thread, &u) != 0) {
            if (u.nthreads >= SS_NATIVE_MAX_THREADS) {
                snprintf(whybuf, sizeof whybuf,
                         "only the first %d threads were unwound",
                         SS_NATIVE_MAX_THREADS);
            } else {
                snprintf(whybuf, sizeof whybuf, "%s", dwfl_errmsg(-1));
            }
            why = whybuf;
        }
    }
    dwfl_end(u.dwfl); /* detaches: the process runs on (or stays stopped) */
    if (threads.oom)
        why = "out of memory";
    ss_buf_printf(out, "{\"pid\":%d", (int)pid);
    if (why) {
        ss_buf_puts(out, ",\"error\":");
        ss_buf_json_str(out, why);
    }
    ss_buf_puts(out, ",\"threads\":[");
    if (!threads.oom && threads.data)
        ss_buf_add(out, threads.data, threads.len);
    ss_buf_puts(out, "]}");
    ss_buf_free(&threads);
    return why ? -1 : 0;
}

void ss_native_stack_print(const pid_t *pids, size_t n, FILE *out)
{
    ss_buf b = {0};
    for (size_t i = 0; i < n; i++) {
        ss_buf_reset(&b);
        ss_native_stack_json(pids[i], &b);
        ss_buf_puts(&b, "\n");
        if (b.data)
            fwrite(b.data, 1, b.len, out);
        fflush(out);
    }
    ss_buf_free(&b);
}
