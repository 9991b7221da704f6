/* headline_test.c - the headline's words (headline.h). */
#include "headline.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures;

static void expect(const char *want, const char *kind, const char *sev,
                   const int64_t *ranks, size_t n, const char *phase)
{
    ss_buf b = {0};
    ss_headline(&b, kind, sev, ranks, n, phase);
    if (!b.data || strcmp(b.data, want) != 0) {
        fprintf(stderr, "want '%s', got '%s'\n", want,
                b.data ? b.data : "(null)");
        failures++;
    }
    ss_buf_free(&b);
}

int main(void)
{
    const int64_t two[] = {2}, three[] = {0, 1, 3};
    int64_t many[10];
    for (int i = 0; i < 10; i++)
        many[i] = i;
    expect("rank 2 \xc2\xb7 phase compute \xc2\xb7 critical straggler",
           "straggler", "critical", two, 1, "compute");
    expect("ranks 0,1,3 \xc2\xb7 warning jitter", "jitter", "warning", three,
           3, NULL);
    expect("ranks 0,1,2,3,4,5,6,7,\xe2\x80\xa6 (10) \xc2\xb7 warning "
           "data stall", "data_stall", "warning", many, 10, "");
    expect("critical hang", "hang", "critical", NULL, 0, NULL);
    if (failures)
        return 1;
    puts("headline_test: ok");
    return 0;
}
