/*
 * names.c - interning of phase, sync and metric names.
 *
 * A name is looked up by linear search under the table's mutex: the table
 * holds at most SS_MAX_NAMES short strings and each call site interns its
 * name once.  Names must be acceptable to the wire protocol's NAME frame
 * (1..63 bytes, no control characters), so a bad name is refused here, at
 * the call site, rather than breaking the connection later.
 */
#include "names.h"

#include <pthread.h>
#include <string.h>

static pthread_mutex_t names_mu = PTHREAD_MUTEX_INITIALIZER;
static char names_tab[SS_MAX_NAMES + 1][SS_MAX_NAME_LEN + 1]; /* [0] unused */
static unsigned names_count;

static int name_valid(const char *name)
{
    if (!name)
        return 0;
    size_t len = strnlen(name, SS_MAX_NAME_LEN + 1);
    if (len == 0 || len > SS_MAX_NAME_LEN)
        return 0;
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)name[i] < 0x20 || name[i] == 0x7f)
            return 0;
    return 1;
}

ss_name_id ss__name_intern(const char *name)
{
    if (!name_valid(name))
        return 0;
    ss_name_id id = 0;
    pthread_mutex_lock(&names_mu);
    for (unsigned i = 1; i <= names_count; i++) {
        if (strcmp(names_tab[i], name) == 0) {
            id = i;
            break;
        }
    }
    if (!id && names_count < SS_MAX_NAMES) {
        id = ++names_count;
        strcpy(names_tab[id], name);
    }
    pthread_mutex_unlock(&names_mu);
    return id;
}

int ss__name_copy(ss_name_id id, char out[SS_MAX_NAME_LEN + 1])
{
    int rc = -1;
    pthread_mutex_lock(&names_mu);
    if (id >= 1 && id <= names_count) {
        memcpy(out, names_tab[id], SS_MAX_NAME_LEN + 1);
        rc = 0;
    }
    pthread_mutex_unlock(&names_mu);
    return rc;
}

void ss__names_lock(void) { pthread_mutex_lock(&names_mu); }

void ss__names_unlock(void) { pthread_mutex_unlock(&names_mu); }
