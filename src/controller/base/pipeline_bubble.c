/*
 * pipeline_bubble.c - the arithmetic of pipeline bubbles
 * (pipeline_bubble.h): the schedules' formulas and one rank's busy time.
 *
 * Sources of the formulas: GPipe (Huang et al. 2019) and 1F1B /
 * PipeDream-Flush (Narayanan et al. 2021), (p-1)(F+B); interleaved 1F1B
 * (Narayanan et al. 2021, Megatron-LM), (p-1)(F+B)/v, which is (p-1)(F+B)
 * in the spans of one chunk; ZB1P (Qi et al. 2023, Zero Bubble Pipeline
 * Parallelism) and DualPipe as tabulated in the DeepSeek-V3 technical
 * report (2024), where B is the whole backward.
 */
#include "pipeline_bubble.h"

#include <math.h>
#include <stdlib.h>

static const char *const names[] = {"?", "gpipe", "1f1b", "interleaved",
                                    "zb1p", "dualpipe"};

const char *ss_pipe_schedule_name(int code)
{
    return names[code >= 1 && code <= 5 ? code : 0];
}

double ss_pipe_formula_ms(int code, int stages, double f_ms, double b_ms,
                          double w_ms)
{
    double p = stages, b_full = b_ms + w_ms, v;
    switch (code) {
    case 1: /* gpipe */
    case 2: /* 1f1b */
    case 3: /* interleaved: F and B are one chunk's spans */
        v = (p - 1) * (f_ms + b_full);
        break;
    case 4: /* zb1p */
        v = (p - 1) * (f_ms + b_full - 2 * w_ms);
        break;
    case 5: /* dualpipe: F&B taken as F + B_full, no overlap gain */
        v = (p / 2 - 1) * ((f_ms + b_full) + b_full - 3 * w_ms);
        break;
    default:
        return NAN;
    }
    return v > 0 ? v : 0;
}

static int cmp_begin(const void *a, const void *b)
{
    const double *x = a, *y = b;
    return (x[0] > y[0]) - (x[0] < y[0]);
}

uint32_t ss_pipe_rank_read(const double *v, uint32_t n, double *scratch,
                           ss_pipe_rank *out)
{
    *out = (ss_pipe_rank){0};
    uint32_t spans = n / SS_PIPE_SPAN_LEN, k = 0;
    if (spans > SS_PIPE_SPANS_MAX)
        spans = SS_PIPE_SPANS_MAX;
    for (uint32_t i = 0; i < spans; i++) {
        const double *s = &v[SS_PIPE_SPAN_LEN * i];
        int kind = (int)s[1];
        if (!isfinite(s[2]) || !isfinite(s[3]) || s[3] < s[2] ||
            kind < SS_PIPE_F || kind > SS_PIPE_W)
            continue;
        scratch[2 * k] = s[2];
        scratch[2 * k + 1] = s[3];
        out->sum_ns[kind] += s[3] - s[2];
        out->count[kind] += 1;
        k++;
    }
    if (!k)
        return 0;
    qsort(scratch, k, 2 * sizeof *scratch, cmp_begin);
    double last = scratch[1], cur_b = scratch[0], cur_e = scratch[1], u = 0;
    for (uint32_t i = 1; i < k; i++) {
        double b = scratch[2 * i], e = scratch[2 * i + 1];
        if (e > last)
            last = e;
        if (b > cur_e) {
            u += cur_e - cur_b;
            cur_b = b, cur_e = e;
        } else if (e > cur_e) {
            cur_e = e;
        }
    }
    out->busy_ns = u + (cur_e - cur_b);
    out->first_ns = scratch[0];
    out->last_ns = last;
    return k;
}
