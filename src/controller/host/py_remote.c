/*
 * py_remote.c - the Python stacks of another process, read from its
 * memory (py_remote.h).
 *
 * Three parts: finding `_PyRuntime` (the target's maps, then the ELF
 * symbol tables of the files mapped there whose name says python, with
 * the load bias of a position-independent file); the walk over the
 * interpreter's thread states and frames through a read function (so the
 * unit test can hand it a synthetic memory image); and the line table
 * decoder.  The offsets per CPython version are the one table below.
 */
#include "py_remote.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

/* CPython 3.11 (release builds, 64-bit): offsetof/sizeof from its
 * Include/internal headers; py_remote_layout_test.c compares them with the
 * installed headers. */
static const ss_py_layout layouts[] = {
    {.major = 3, .minor = 11,
     .rt_interp_main = 48, .rt_tstate_current = 576,
     .is_threads_head = 16,
     .ts_next = 8, .ts_interp = 16, .ts_cframe = 56, .ts_thread_id = 152,
     .cf_current_frame = 8,
     .fr_code = 32, .fr_previous = 48, .fr_prev_instr = 56, .fr_size = 64,
     .ob_type = 8, .ob_size = 16,
     .co_firstlineno = 72, .co_filename = 112, .co_name = 120,
     .co_linetable = 136, .co_code_adaptive = 184,
     .bytes_sval = 32,
     .str_length = 16, .str_state = 32, .str_ascii_size = 48,
     .str_compact_size = 72},
};

const ss_py_layout *ss_py_layout_for(unsigned major, unsigned minor)
{
    for (size_t i = 0; i < sizeof layouts / sizeof layouts[0]; i++)
        if (layouts[i].major == major && layouts[i].minor == minor)
            return &layouts[i];
    return NULL;
}

static void say(char *why, size_t whylen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void say(char *why, size_t whylen, const char *fmt, ...)
{
    if (!why || !whylen)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, whylen, fmt, ap);
    va_end(ap);
}

/* ---- the line table ---- */

/* An unsigned varint of 6-bit groups, bit 6 set while more follow. */
static int read_varint(const uint8_t *t, size_t len, size_t *i,
                       unsigned long *v)
{
    unsigned long val = 0;
    unsigned shift = 0;
    for (;;) {
        if (*i >= len || shift > 30)
            return -1;
        uint8_t b = t[(*i)++];
        val |= (unsigned long)(b & 63) << shift;
        shift += 6;
        if (!(b & 64))
            break;
    }
    *v = val;
    return 0;
}

long ss_py_addr2line(const uint8_t *t, size_t len, long firstline,
                     long addr)
{
    if (addr < 0)
        return firstline;
    long line = firstline, start = 0;
    size_t i = 0;
    while (i < len) {
        uint8_t head = t[i];
        if (!(head & 128))
            return -1; /* not at an entry: a torn table */
        int code = (head >> 3) & 15;
        long end = start + 2 * ((head & 7) + 1);
        long delta = 0;
        size_t body = i + 1;
        if (code == 13 || code == 14) { /* no columns; long form */
            unsigned long u;
            size_t k = body;
            if (read_varint(t, len, &k, &u) != 0)
                return -1;
            delta = (u & 1) ? -(long)(u >> 1) : (long)(u >> 1);
        } else if (code >= 10 && code <= 12) { /* one line form */
            delta = code - 10;
        }
        line += delta;
        if (addr < end)
            return code == 15 ? -1 : line;
        start = end;
        /* the next entry is the next byte with its top bit set */
        for (i = body; i < len && !(t[i] & 128); i++)
            ;
    }
    return -1;
}

/* ---- the walk ---- */

typedef struct {
    ss_py_read_fn read;
    void *ctx;
    const ss_py_process *p;
    const ss_py_layout *l;
    char *why;
    size_t whylen;
} walker;

static int rd(walker *w, uint64_t addr, void *buf, size_t len,
              const char *what)
{
    if (addr == 0 || w->read(w->ctx, addr, buf, len) != 0) {
        say(w->why, w->whylen, "cannot read %s at 0x%llx", what,
            (unsigned long long)addr);
        return -1;
    }
    return 0;
}

static int rd_ptr(walker *w, uint64_t addr, uint64_t *v, const char *what)
{
    return rd(w, addr, v, sizeof *v, what);
}

/* Appends C as UTF-8. */
static void put_utf8(char *out, size_t *n, size_t cap, uint32_t c)
{
    char tmp[4];
    size_t k;
    if (c < 0x80) {
        tmp[0] = (char)c;
        k = 1;
    } else if (c < 0x800) {
        tmp[0] = (char)(0xc0 | c >> 6);
        tmp[1] = (char)(0x80 | (c & 63));
        k = 2;
    } else if (c < 0x10000) {
        tmp[0] = (char)(0xe0 | c >> 12);
        tmp[1] = (char)(0x80 | (c >> 6 & 63));
        tmp[2] = (char)(0x80 | (c & 63));
        k = 3;
    } else {
        tmp[0] = (char)(0xf0 | (c >> 18 & 7));
        tmp[1] = (char)(0x80 | (c >> 12 & 63));
        tmp[2] = (char)(0x80 | (c >> 6 & 63));
        tmp[3] = (char)(0x80 | (c & 63));
        k = 4;
    }
    if (*n + k < cap) {
        memcpy(out + *n, tmp, k);
        *n += k;
    }
}

/* The str object at ADDR as UTF-8 in OUT (CAP bytes, at most
 * SS_PY_MAX_STRING kept).  Compact strings only (what the compiler makes
 * of names and file names). */
static int rd_str(walker *w, uint64_t addr, char *out, size_t cap,
                  const char *what)
{
    const ss_py_layout *l = w->l;
    uint8_t head[128];
    if (rd(w, addr, head, l->str_compact_size, what) != 0)
        return -1;
    uint64_t type, length;
    uint32_t state;
    memcpy(&type, head + l->ob_type, 8);
    memcpy(&length, head + l->str_length, 8);
    memcpy(&state, head + l->str_state, 4);
    if (type != w->p->unicode_type) {
        say(w->why, w->whylen, "%s at 0x%llx is not a str", what,
            (unsigned long long)addr);
        return -1;
    }
    unsigned kind = state >> 2 & 7, compact = state >> 5 & 1,
             ascii = state >> 6 & 1;
    if (!compact || (kind != 1 && kind != 2 && kind != 4)) {
        snprintf(out, cap, "?");
        return 0;
    }
    size_t nchars = length > SS_PY_MAX_STRING ? SS_PY_MAX_STRING
                                              : (size_t)length;
    uint8_t raw[SS_PY_MAX_STRING * 4];
    uint64_t data = addr + (ascii ? l->str_ascii_size : l->str_compact_size);
    if (nchars && rd(w, data, raw, nchars * kind, what) != 0)
        return -1;
    size_t n = 0;
    for (size_t i = 0; i < nchars; i++) {
        uint32_t c;
        if (kind == 1)
            c = raw[i];
        else if (kind == 2) {
            uint16_t h;
            memcpy(&h, raw + 2 * i, 2);
            c = h;
        } else
            memcpy(&c, raw + 4 * i, 4);
        if (c > 0x10ffff || (c >= 0xd800 && c < 0xe000))
            c = 0xfffd;
        put_utf8(out, &n, cap, c);
    }
    out[n] = '\0';
    return 0;
}

typedef struct {
    char func[SS_PY_MAX_STRING * 3 + 1];
    char file[SS_PY_MAX_STRING * 3 + 1];
    long line;
} frame_info;

/* The code object of a frame: its names, and the line of the frame's
 * last instruction PREV_INSTR. */
static int rd_code(walker *w, uint64_t code, uint64_t prev_instr,
                   frame_info *f)
{
    const ss_py_layout *l = w->l;
    uint8_t co[256];
    if (rd(w, code, co, l->co_code_adaptive, "a code object") != 0)
        return -1;
    uint64_t type, filename, name, table;
    int32_t firstline;
    memcpy(&type, co + l->ob_type, 8);
    if (type != w->p->code_type) {
        say(w->why, w->whylen, "the object at 0x%llx is not a code object",
            (unsigned long long)code);
        return -1;
    }
    memcpy(&filename, co + l->co_filename, 8);
    memcpy(&name, co + l->co_name, 8);
    memcpy(&table, co + l->co_linetable, 8);
    memcpy(&firstline, co + l->co_firstlineno, 4);
    if (rd_str(w, filename, f->file, sizeof f->file, "co_filename") != 0 ||
        rd_str(w, name, f->func, sizeof f->func, "co_name") != 0)
        return -1;
    uint8_t th[64];
    if (rd(w, table, th, l->bytes_sval, "co_linetable") != 0)
        return -1;
    uint64_t ttype;
    int64_t tlen;
    memcpy(&ttype, th + l->ob_type, 8);
    memcpy(&tlen, th + l->ob_size, 8);
    if (ttype != w->p->bytes_type || tlen < 0) {
        say(w->why, w->whylen, "co_linetable at 0x%llx is not bytes",
            (unsigned long long)table);
        return -1;
    }
    if (tlen > SS_PY_MAX_LINETABLE)
        tlen = SS_PY_MAX_LINETABLE;
    uint8_t *t = malloc(tlen ? (size_t)tlen : 1);
    if (!t) {
        say(w->why, w->whylen, "out of memory");
        return -1;
    }
    if (tlen && rd(w, table + l->bytes_sval, t, (size_t)tlen,
                   "co_linetable") != 0) {
        free(t);
        return -1;
    }
    uint64_t first_instr = code + l->co_code_adaptive;
    long addr = (long)((int64_t)(prev_instr - first_instr) / 2) * 2;
    f->line = ss_py_addr2line(t, (size_t)tlen, firstline, addr);
    free(t);
    return 0;
}

/* Writes a thread; where its innermost frame's "line" ends goes to *LEAF
 * (0: no frame), told to the caller once the walk is whole (a walk made
 * again must not report its first try's). */
static void emit_thread(ss_buf *out, int first, uint64_t id, int current,
                        const frame_info *fr, size_t nfr, size_t *leaf)
{
    *leaf = 0;
    ss_buf_printf(out, "%s{\"id\":\"0x%016llx\",\"current\":%s,"
                  "\"frames\":[", first ? "" : ",", (unsigned long long)id,
                  current ? "true" : "false");
    for (size_t k = nfr; k-- > 0;) { /* FR is innermost first */
        ss_buf_puts(out, "{\"func\":");
        ss_buf_json_str(out, fr[k].func);
        ss_buf_puts(out, ",\"file\":");
        ss_buf_json_str(out, fr[k].file);
        ss_buf_printf(out, ",\"line\":%ld", fr[k].line);
        if (k == 0)
            *leaf = out->len;
        ss_buf_puts(out, k ? "}," : "}");
    }
    ss_buf_puts(out, "]}");
}

int ss_py_walk(const ss_py_process *p, ss_py_read_fn read, void *rctx,
               ss_buf *out, ss_py_leaf_fn on_leaf, void *lctx, char *why,
               size_t whylen)
{
    walker w = {read, rctx, p, p->layout, why, whylen};
    const ss_py_layout *l = p->layout;
    if (!l) {
        say(why, whylen, "no layout for this Python");
        return -1;
    }
    size_t mark = out->len;
    uint64_t interp, current = 0, ts;
    if (rd_ptr(&w, p->runtime + l->rt_interp_main, &interp,
               "_PyRuntime") != 0)
        return -1;
    if (!interp) {
        say(why, whylen, "the interpreter is not running (not yet "
            "initialised, or finalised)");
        return -1;
    }
    if (rd_ptr(&w, p->runtime + l->rt_tstate_current, &current,
               "_PyRuntime") != 0 ||
        rd_ptr(&w, interp + l->is_threads_head, &ts,
               "the interpreter state") != 0)
        return -1;
    frame_info *fr = malloc(SS_PY_MAX_FRAMES * sizeof *fr);
    frame_info *leaf = malloc(SS_PY_MAX_THREADS * sizeof *leaf);
    size_t leaf_at[SS_PY_MAX_THREADS];
    if (!fr || !leaf) {
        free(fr);
        free(leaf);
        say(why, whylen, "out of memory");
        return -1;
    }
    int nthreads = 0, rc = 0;
    while (ts && nthreads < SS_PY_MAX_THREADS) {
        uint8_t tsb[256];
        size_t tslen = l->ts_thread_id + 8;
        if (rd(&w, ts, tsb, tslen, "a thread state") != 0) {
            rc = -1;
            break;
        }
        uint64_t next, tinterp, cframe, tid, frame = 0;
        memcpy(&next, tsb + l->ts_next, 8);
        memcpy(&tinterp, tsb + l->ts_interp, 8);
        memcpy(&cframe, tsb + l->ts_cframe, 8);
        memcpy(&tid, tsb + l->ts_thread_id, 8);
        if (tinterp != interp) {
            say(why, whylen, "the thread state at 0x%llx is not the "
                "interpreter's", (unsigned long long)ts);
            rc = -1;
            break;
        }
        if (cframe && rd_ptr(&w, cframe + l->cf_current_frame, &frame,
                             "a thread's C frame") != 0) {
            rc = -1;
            break;
        }
        /* innermost first; beyond SS_PY_MAX_FRAMES the outer ones are
         * left out, as faulthandler does */
        size_t nfr = 0;
        while (frame && nfr < SS_PY_MAX_FRAMES) {
            uint8_t fb[128];
            if (rd(&w, frame, fb, l->fr_size, "a frame") != 0) {
                rc = -1;
                break;
            }
            uint64_t code, prev, instr;
            memcpy(&code, fb + l->fr_code, 8);
            memcpy(&prev, fb + l->fr_previous, 8);
            memcpy(&instr, fb + l->fr_prev_instr, 8);
            if (rd_code(&w, code, instr, &fr[nfr]) != 0) {
                rc = -1;
                break;
            }
            nfr++;
            frame = prev;
        }
        if (rc != 0)
            break;
        emit_thread(out, nthreads == 0, tid, ts == current, fr, nfr,
                    &leaf_at[nthreads]);
        if (nfr)
            leaf[nthreads] = fr[0];
        nthreads++;
        ts = next;
    }
    free(fr);
    if (rc != 0 || out->oom) {
        if (out->oom)
            say(why, whylen, "out of memory");
        out->len = mark;
        if (out->data)
            out->data[mark] = '\0';
        free(leaf);
        return -1;
    }
    for (int i = 0; on_leaf && i < nthreads; i++)
        if (leaf_at[i])
            on_leaf(lctx, leaf[i].file, leaf[i].line, leaf_at[i]);
    free(leaf);
    return 0;
}

/* ---- finding the interpreter ---- */

/* The symbols we want from one symbol table. */
static void scan_symtab(const uint8_t *m, size_t size, const Elf64_Shdr *sh,
                        const Elf64_Shdr *strsh, ss_py_elf *e)
{
    if (sh->sh_offset + sh->sh_size > size ||
        strsh->sh_offset + strsh->sh_size > size ||
        sh->sh_entsize != sizeof(Elf64_Sym))
        return;
    const Elf64_Sym *sym = (const Elf64_Sym *)(m + sh->sh_offset);
    size_t n = sh->sh_size / sizeof *sym;
    const char *str = (const char *)(m + strsh->sh_offset);
    size_t strsize = strsh->sh_size;
    for (size_t i = 0; i < n; i++) {
        if (sym[i].st_name >= strsize || sym[i].st_shndx == SHN_UNDEF)
            continue;
        const char *name = str + sym[i].st_name;
        size_t room = strsize - sym[i].st_name;
        if (strnlen(name, room) == room)
            continue;
        if (strcmp(name, "_PyRuntime") == 0)
            e->runtime = sym[i].st_value;
        else if (strcmp(name, "Py_Version") == 0)
            e->version = sym[i].st_value;
        else if (strcmp(name, "PyCode_Type") == 0)
            e->code_type = sym[i].st_value;
        else if (strcmp(name, "PyUnicode_Type") == 0)
            e->unicode_type = sym[i].st_value;
        else if (strcmp(name, "PyBytes_Type") == 0)
            e->bytes_type = sym[i].st_value;
        else if (strcmp(name, "_Py_RefTotal") == 0)
            e->debug = 1;
    }
}

/* The symbols of the ELF file at PATH and the virtual address of its
 * first loadable segment (for the load bias) into E.  0, or -1. */
static int elf_symbols(const char *path, ss_py_elf *e)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0)
        return -1;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) ||
        (size_t)st.st_size < sizeof(Elf64_Ehdr)) {
        close(fd);
        return -1;
    }
    size_t size = (size_t)st.st_size;
    const uint8_t *m = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (m == MAP_FAILED)
        return -1;
    int rc = -1;
    const Elf64_Ehdr *eh = (const Elf64_Ehdr *)m;
    if (memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 ||
        eh->e_ident[EI_CLASS] != ELFCLASS64 ||
        eh->e_ident[EI_DATA] != ELFDATA2LSB ||
        eh->e_shentsize != sizeof(Elf64_Shdr) ||
        eh->e_phentsize != sizeof(Elf64_Phdr) ||
        eh->e_shoff + (uint64_t)eh->e_shnum * sizeof(Elf64_Shdr) > size ||
        eh->e_phoff + (uint64_t)eh->e_phnum * sizeof(Elf64_Phdr) > size)
        goto out;
    e->is_dyn = eh->e_type == ET_DYN;
    const Elf64_Phdr *ph = (const Elf64_Phdr *)(m + eh->e_phoff);
    int have_load = 0;
    for (unsigned i = 0; i < eh->e_phnum && !have_load; i++)
        if (ph[i].p_type == PT_LOAD) {
            e->first_vaddr = ph[i].p_vaddr - ph[i].p_offset;
            have_load = 1;
        }
    if (!have_load)
        goto out;
    const Elf64_Shdr *sh = (const Elf64_Shdr *)(m + eh->e_shoff);
    for (unsigned i = 0; i < eh->e_shnum; i++)
        if ((sh[i].sh_type == SHT_DYNSYM || sh[i].sh_type == SHT_SYMTAB) &&
            sh[i].sh_link < eh->e_shnum)
            scan_symtab(m, size, &sh[i], &sh[sh[i].sh_link], e);
    e->found = e->runtime != 0;
    rc = 0;
out:
    munmap((void *)m, size);
    return rc;
}

/* What the file DEV/INODE (at PATH in PID's mount namespace) says: from
 * CACHE when it was read before. */
static const ss_py_elf *file_symbols(ss_py_cache *cache, pid_t pid,
                                     const char *dev,
                                     unsigned long long inode,
                                     const char *path, ss_py_elf *tmp)
{
    for (unsigned i = 0; cache && i < cache->n; i++)
        if (cache->f[i].inode == inode && strcmp(cache->f[i].dev, dev) == 0)
            return &cache->f[i];
    char full[PATH_MAX + 64];
    /* through the target's root: the same file in its mount namespace */
    snprintf(full, sizeof full, "/proc/%d/root%s", (int)pid, path);
    memset(tmp, 0, sizeof *tmp);
    snprintf(tmp->dev, sizeof tmp->dev, "%s", dev);
    tmp->inode = inode;
    if (elf_symbols(full, tmp) != 0)
        return tmp; /* not cached: it may be readable next time */
    if (cache && cache->n < SS_PY_CACHE_FILES) {
        cache->f[cache->n] = *tmp;
        return &cache->f[cache->n++];
    }
    return tmp;
}

static int vm_read(void *ctx, uint64_t addr, void *buf, size_t len)
{
    pid_t pid = *(pid_t *)ctx;
    struct iovec local = {buf, len}, remote = {(void *)(uintptr_t)addr, len};
    ssize_t n = process_vm_readv(pid, &local, 1, &remote, 1, 0);
    return n == (ssize_t)len ? 0 : -1;
}

int ss_py_locate(pid_t pid, ss_py_cache *cache, ss_py_process *p,
                 char *why, size_t whylen)
{
    memset(p, 0, sizeof *p);
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/maps", (int)pid);
    FILE *f = fopen(path, "re");
    if (!f) {
        say(why, whylen, "cannot read /proc/%d/maps: %s", (int)pid,
            strerror(errno));
        return -1;
    }
    /* The python executable and libpython, each where it is mapped from
     * offset 0 (the base its load bias is taken from). */
    char line[PATH_MAX + 256];
    const ss_py_elf *found = NULL;
    ss_py_elf tmp;
    uint64_t bias = 0;
    while (!found && fgets(line, sizeof line, f)) {
        unsigned long long start, end, off, inode;
        char dev[16];
        int name_at = 0;
        if (sscanf(line, "%llx-%llx %*s %llx %15s %llu %n", &start, &end,
                   &off, dev, &inode, &name_at) != 5 || !name_at ||
            line[name_at] != '/')
            continue;
        char *name = line + name_at;
        name[strcspn(name, "\n")] = '\0';
        const char *base = strrchr(name, '/') + 1;
        if (off != 0 || (strncmp(base, "python", 6) != 0 &&
                         strncmp(base, "libpython", 9) != 0))
            continue;
        const ss_py_elf *e = file_symbols(cache, pid, dev, inode, name,
                                          &tmp);
        if (!e->found)
            continue;
        found = e;
        bias = e->is_dyn ? start - e->first_vaddr : 0;
    }
    fclose(f);
    if (!found) {
        say(why, whylen, "no CPython interpreter (_PyRuntime) in the "
            "process's python executable or libpython");
        return -1;
    }
    ss_py_elf s = *found;
    if (!s.version) {
        say(why, whylen, "a CPython older than 3.11 (no Py_Version): not "
            "read from memory");
        return -1;
    }
    if (s.debug) {
        say(why, whylen, "a debug build of CPython: not read from memory");
        return -1;
    }
    if (!s.code_type || !s.unicode_type || !s.bytes_type) {
        say(why, whylen, "the interpreter's type objects are not exported");
        return -1;
    }
    uint64_t version = 0;
    if (vm_read(&pid, s.version + bias, &version, sizeof version) != 0) {
        say(why, whylen, "reading the process's memory: %s",
            errno == EPERM ? "Permission denied (process_vm_readv needs "
                             "ptrace permission over the process)"
                           : strerror(errno));
        return -1;
    }
    unsigned major = (unsigned)(version >> 24 & 0xff),
             minor = (unsigned)(version >> 16 & 0xff);
    p->layout = ss_py_layout_for(major, minor);
    if (!p->layout) {
        say(why, whylen, "CPython %u.%u: not read from memory (3.11 is)",
            major, minor);
        return -1;
    }
    p->runtime = s.runtime + bias;
    p->code_type = s.code_type + bias;
    p->unicode_type = s.unicode_type + bias;
    p->bytes_type = s.bytes_type + bias;
    p->version = (unsigned long)version;
    return 0;
}

int ss_py_read_stacks(pid_t pid, ss_py_cache *cache, ss_buf *out,
                      ss_py_leaf_fn on_leaf, void *lctx, char *why,
                      size_t whylen)
{
    ss_py_process p;
    if (ss_py_locate(pid, cache, &p, why, whylen) != 0)
        return -1;
    for (int attempt = 0; attempt < 3; attempt++)
        if (ss_py_walk(&p, vm_read, &pid, out, on_leaf, lctx, why,
                       whylen) == 0)
            return 0;
    return -1;
}
