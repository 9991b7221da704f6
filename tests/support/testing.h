/*
 * testing.h - the minimal unit-test harness used by every *_test.c.
 *
 * A test file defines static test functions, lists them with TEST_LIST and
 * gets a main() that runs each one (or only those named on the command line,
 * `tests/wire_test decode_rejects_bad_token`) and ends with the line
 * "N passed, N failed".  CHECK records a failure and continues; REQUIRE
 * returns from the test.  Each test binary is one ctest entry.
 */
#ifndef STEPSCOPE_TESTING_H
#define STEPSCOPE_TESTING_H

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

static int testing_failures_;

#define CHECK(cond)                                                           \
    do {                                                                      \
        if (!(cond)) {                                                        \
            fprintf(stderr, "  %s:%d: CHECK(%s) failed\n", __FILE__,          \
                    __LINE__, #cond);                                         \
            testing_failures_++;                                              \
        }                                                                     \
    } while (0)

#define REQUIRE(cond)                                                         \
    do {                                                                      \
        if (!(cond)) {                                                        \
            fprintf(stderr, "  %s:%d: REQUIRE(%s) failed\n", __FILE__,        \
                    __LINE__, #cond);                                         \
            testing_failures_++;                                              \
            return;                                                           \
        }                                                                     \
    } while (0)

#define CHECK_EQ_INT(a, b)                                                    \
    do {                                                                      \
        long long a_ = (long long)(a), b_ = (long long)(b);                   \
        if (a_ != b_) {                                                       \
            fprintf(stderr, "  %s:%d: %s == %lld, expected %s == %lld\n",     \
                    __FILE__, __LINE__, #a, a_, #b, b_);                      \
            testing_failures_++;                                              \
        }                                                                     \
    } while (0)

#define CHECK_STR(a, b)                                                       \
    do {                                                                      \
        const char *a_ = (a), *b_ = (b);                                      \
        if (strcmp(a_, b_) != 0) {                                            \
            fprintf(stderr, "  %s:%d: %s == \"%s\", expected \"%s\"\n",       \
                    __FILE__, __LINE__, #a, a_, b_);                          \
            testing_failures_++;                                              \
        }                                                                     \
    } while (0)

typedef struct {
    const char *name;
    void (*fn)(void);
} testing_case;

#define TEST_LIST(...)                                                        \
    static const testing_case testing_cases_[] = {__VA_ARGS__};               \
    int main(int argc, char **argv)                                           \
    {                                                                         \
        int passed = 0, failed = 0;                                           \
        size_t n = sizeof testing_cases_ / sizeof testing_cases_[0];          \
        for (size_t i = 0; i < n; i++) {                                      \
            int wanted = argc < 2;                                            \
            for (int k = 1; k < argc; k++)                                    \
                wanted |= strcmp(argv[k], testing_cases_[i].name) == 0;       \
            if (!wanted)                                                      \
                continue;                                                     \
            int before = testing_failures_;                                   \
            testing_cases_[i].fn();                                           \
            int ok = testing_failures_ == before;                             \
            printf("%s %s\n", ok ? "ok  " : "FAIL", testing_cases_[i].name);  \
            ok ? passed++ : failed++;                                         \
        }                                                                     \
        printf("%d passed, %d failed\n", passed, failed);                     \
        return failed ? 1 : 0;                                                \
    }

#define TEST(fn) {#fn, fn}

#endif
