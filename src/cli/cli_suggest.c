/*
 * cli_suggest.c - "did you mean" for the front-ends (cli_suggest.h): the
 * optimal-string-alignment distance between a mistyped word and each
 * known one, the nearest kept when it is within a typo's reach.
 */
#include "cli_suggest.h"

#include <string.h>

#define WORD_MAX 64

/* Edit distance of A and B with swaps of neighbours; both < WORD_MAX. */
static size_t distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    size_t d[WORD_MAX + 1][WORD_MAX + 1];
    for (size_t i = 0; i <= la; i++)
        d[i][0] = i;
    for (size_t j = 0; j <= lb; j++)
        d[0][j] = j;
    for (size_t i = 1; i <= la; i++)
        for (size_t j = 1; j <= lb; j++) {
            size_t cost = a[i - 1] != b[j - 1];
            size_t best = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < best)
                best = d[i][j - 1] + 1;
            if (d[i - 1][j - 1] + cost < best)
                best = d[i - 1][j - 1] + cost;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] &&
                a[i - 2] == b[j - 1] && d[i - 2][j - 2] + 1 < best)
                best = d[i - 2][j - 2] + 1;
            d[i][j] = best;
        }
    return d[la][lb];
}

const char *ss_cli_suggest(const char *word, const char *const *words,
                           size_t n)
{
    size_t len = word ? strlen(word) : 0;
    if (len == 0 || len >= WORD_MAX)
        return NULL;
    size_t reach = len <= 4 ? 1 : len <= 8 ? 2 : 3;
    const char *best = NULL;
    size_t best_d = reach + 1;
    for (size_t i = 0; i < n; i++) {
        if (!words[i] || strlen(words[i]) >= WORD_MAX)
            continue;
        size_t d = distance(word, words[i]);
        if (d < best_d) {
            best = words[i];
            best_d = d;
        }
    }
    return best;
}

const char *ss_cli_suggest_option(const char *typed,
                                  const struct option *opts)
{
    if (!typed || strncmp(typed, "--", 2) != 0)
        return NULL;
    char word[WORD_MAX];
    size_t len = strcspn(typed + 2, "=");
    if (len == 0 || len >= sizeof word)
        return NULL;
    memcpy(word, typed + 2, len);
    word[len] = '\0';
    const char *names[256];
    size_t n = 0;
    for (; opts[n].name && n < sizeof names / sizeof names[0]; n++)
        names[n] = opts[n].name;
    return ss_cli_suggest(word, names, n);
}

void ss_cli_unknown_option(FILE *err, const char *cmd, const char *typed,
                           const struct option *opts)
{
    const char *near = ss_cli_suggest_option(typed, opts);
    fprintf(err, "stepscope %s: unknown option '%s'%s%s%s (see `stepscope "
            "%s --help`)\n", cmd, typed, near ? "; did you mean --" : "",
            near ? near : "", near ? "?" : "", cmd);
}
