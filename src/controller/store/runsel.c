/*
 * runsel.c - opening the store for reading and choosing a run (runsel.h).
 */
#include "runsel.h"

#include <inttypes.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store_schema.h"

int ss_store_reader_open(ss_store_reader *r, const char *path, char *err,
                         size_t errlen)
{
    memset(r, 0, sizeof *r);
    if (path) {
        snprintf(r->path, sizeof r->path, "%s", path);
    } else if (ss_store_default_path(r->path, sizeof r->path) != 0) {
        snprintf(err, errlen, "neither XDG_DATA_HOME nor HOME is set: use "
                              "--db PATH");
        return -1;
    }
    int version = ss_schema_open_readonly(r->path, &r->db, err, errlen);
    if (version < 0)
        return -1;
    if (version < SS_SCHEMA_VERSION) {
        sqlite3_close(r->db);
        r->db = NULL;
        r->store = ss_store_open(r->path, NULL, 0, err, errlen);
        if (!r->store)
            return -1;
        r->db = ss_store_db(r->store);
    }
    return 0;
}

void ss_store_reader_close(ss_store_reader *r)
{
    if (r->store)
        ss_store_close(r->store);
    else if (r->db)
        sqlite3_close(r->db);
    r->db = NULL;
    r->store = NULL;
}

/* Runs SQL (?1 bound to TEXT, or to NUM when TEXT is NULL) and stores the
 * two integer columns of its first row in OUT (SS_MISSING for NULL or no
 * row).  Returns 0 or -1 with ERR. */
static int query2(sqlite3 *db, const char *sql, const char *text, int64_t num,
                  int64_t out[2], char *err, size_t errlen)
{
    sqlite3_stmt *st = NULL;
    out[0] = out[1] = SS_MISSING;
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) {
        snprintf(err, errlen, "cannot query the store: %s",
                 sqlite3_errmsg(db));
        return -1;
    }
    if (sqlite3_bind_parameter_count(st) >= 1) {
        if (text)
            sqlite3_bind_text(st, 1, text, -1, SQLITE_STATIC);
        else
            sqlite3_bind_int64(st, 1, num);
    }
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        for (int i = 0; i < 2 && i < sqlite3_column_count(st); i++)
            if (sqlite3_column_type(st, i) != SQLITE_NULL)
                out[i] = sqlite3_column_int64(st, i);
        rc = SQLITE_DONE;
    }
    if (rc != SQLITE_DONE)
        snprintf(err, errlen, "cannot read the store: %s", sqlite3_errmsg(db));
    sqlite3_finalize(st);
    return rc == SQLITE_DONE ? 0 : -1;
}

static int all_digits(const char *s)
{
    if (!*s)
        return 0;
    for (; *s; s++)
        if (*s < '0' || *s > '9')
            return 0;
    return 1;
}

int ss_run_select(sqlite3 *db, const char *spec, int64_t *run_id, char *err,
                  size_t errlen)
{
    int64_t v[2];
    if (!spec) {
        if (query2(db, "SELECT max(id) FROM runs", NULL, 0, v, err, errlen))
            return -1;
        if (v[0] == SS_MISSING) {
            snprintf(err, errlen, "no runs in the store yet (`stepscope run` "
                                  "records one)");
            return -1;
        }
        *run_id = v[0];
        return 0;
    }
    if (all_digits(spec) && strlen(spec) < 19) {
        if (query2(db, "SELECT id FROM runs WHERE id = ?1", NULL,
                   strtoll(spec, NULL, 10), v, err, errlen))
            return -1;
        if (v[0] != SS_MISSING) {
            *run_id = v[0];
            return 0;
        }
    }
    if (query2(db, "SELECT max(id) FROM runs WHERE name = ?1", spec, 0, v,
               err, errlen))
        return -1;
    if (v[0] != SS_MISSING) {
        *run_id = v[0];
        return 0;
    }
    if (query2(db, "SELECT count(*), max(id) FROM runs "
                   "WHERE substr(uuid, 1, length(?1)) = ?1",
               spec, 0, v, err, errlen))
        return -1;
    if (v[0] > 1) {
        snprintf(err, errlen, "run '%s' is ambiguous: %" PRId64 " runs have a "
                 "uuid starting with it; give more of it or the run id", spec,
                 v[0]);
        return -1;
    }
    if (v[0] == 1) {
        *run_id = v[1];
        return 0;
    }
    snprintf(err, errlen, "no run '%s' in the store; `stepscope runs` lists "
                          "them", spec);
    return -1;
}
