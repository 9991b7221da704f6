/*
 * stack_json_test.c - unit tests for stack_json.c: what is and is not one
 * JSON value (the grammar's corners, control characters, nesting, bytes
 * after it), a rank's object told from another's, lazy walks over members
 * and elements (strings with escaped quotes and brackets inside, a value
 * left early, one not of the kind asked for), decoding with every escape,
 * walks over broken bytes that stop at the end, and every cut and
 * one-byte change of an object checked and walked inside its buffer.
 */
#include "stack_json.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testing.h"

static int valid(const char *s)
{
    const char *end = s + strlen(s);
    const char *e = ss_sj_value(s, end);
    while (e && e < end && (*e == ' ' || *e == '\n'))
        e++;
    return e == end;
}

static void the_grammar(void)
{
    static const char *const good[] = {
        "{}", "[]", " { } ", "0", "-0", "12.5e-3", "1E+9", "true", "false",
        "null", "\"\"", "\"a\\\"b\\\\c\\/\\b\\f\\n\\r\\t\\u00e9\\uD83D\\uDE00\"",
        "{\"a\":[1,{\"b\":null}],\"c\":\"]}\"}", "[[[[[]]]]]",
        "\"long string without escapes, longer than eight bytes\"",
        "{\"k\":\"\xc3\xa9t\xc3\xa9\"}"};
    for (size_t i = 0; i < sizeof good / sizeof *good; i++)
        if (!valid(good[i])) {
            CHECK(!"valid JSON refused");
            fprintf(stderr, "  refused: %s\n", good[i]);
        }
    static const char *const bad[] = {
        "", " ", "{", "}", "[1,]", "{\"a\":1,}", "{\"a\" 1}", "{a:1}", "01",
        "1.", ".5", "-", "1e", "+1", "tru", "nul", "\"abc", "\"a\\x\"",
        "\"\\u12G4\"", "\"tab\there\"", "\"new\nline\"", "[1 2]", "{} {}",
        "{\"a\":1}]", "'a'", "[\"a\",\"b\"", "\"0123456789abcdef\x01\""};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        if (valid(bad[i])) {
            CHECK(!"invalid JSON taken");
            fprintf(stderr, "  taken: %s\n", bad[i]);
        }
    /* nesting is bounded: SS_SJ_MAX_DEPTH levels, not one more */
    char deep[2 * SS_SJ_MAX_DEPTH + 8];
    for (int levels = SS_SJ_MAX_DEPTH; levels <= SS_SJ_MAX_DEPTH + 1;
         levels++) {
        size_t n = 0;
        for (int i = 0; i < levels; i++)
            deep[n++] = '[';
        for (int i = 0; i < levels; i++)
            deep[n++] = ']';
        deep[n] = 0;
        CHECK_EQ_INT(valid(deep), levels == SS_SJ_MAX_DEPTH);
    }
    /* a NUL inside is not the end: the span decides */
    const char with_nul[] = "{\"a\":\"x\0y\"}";
    CHECK(ss_sj_value(with_nul, with_nul + sizeof with_nul - 1) == NULL);
}

static void a_rank_object(void)
{
    const char *s = "{\"host\":\"h\",\"rank\":17,\"threads\":[]}";
    CHECK_EQ_INT(ss_sj_is_rank_object(s, strlen(s), 17), 1);
    CHECK_EQ_INT(ss_sj_is_rank_object(s, strlen(s), 18), 0);
    const char *t = "{\"rank\":17,\"threads\":[]} ]";
    CHECK_EQ_INT(ss_sj_is_rank_object(t, strlen(t), 17), 0);
    const char *u = "{\"rank\":\"17\"}";
    CHECK_EQ_INT(ss_sj_is_rank_object(u, strlen(u), 17), 0);
    const char *v = "[17]";
    CHECK_EQ_INT(ss_sj_is_rank_object(v, strlen(v), 17), 0);
    const char *w = "{\"threads\":[{\"rank\":17}]}";
    CHECK_EQ_INT(ss_sj_is_rank_object(w, strlen(w), 17), 0);
    const char *x = " {\"rank\":1.7e1}\n";
    CHECK_EQ_INT(ss_sj_is_rank_object(x, strlen(x), 17), 1);
}

static void walks_and_strings(void)
{
    const char *s = "{\"id\":\"0x7f\",\"frames\":[{\"func\":\"a\\\"]}\","
                    "\"line\":3},{\"func\":\"b\\u00e9\\n\",\"code\":"
                    "\"x = \\\"{\\\"\"}], \"n\" : -1.5e2 , \"z\":[[1],{}]}";
    const char *end = s + strlen(s);
    REQUIRE(ss_sj_value(s, end) == end);
    ss_sj_iter it, fa, fo, z;
    ss_sj_span k, v;
    REQUIRE(ss_sj_object((ss_sj_span){s, end}, &it) == 0);
    char buf[256];
    int members = 0, frames = 0;
    while (ss_sj_key(&it, &k)) {
        members++;
        if (ss_sj_key_is(k, "frames")) {
            REQUIRE(ss_sj_enter(&it, &fa, '[') == 0);
            while (ss_sj_next(&fa)) {
                frames++;
                REQUIRE(ss_sj_enter(&fa, &fo, '{') == 0);
                while (ss_sj_key(&fo, &k) && ss_sj_take(&fo, &v)) {
                    if (ss_sj_key_is(k, "line"))
                        continue;
                    ss_sj_str(v, buf);
                    if (ss_sj_key_is(k, "func") && frames == 1)
                        CHECK_STR(buf, "a\"]}");
                    if (ss_sj_key_is(k, "func") && frames == 2)
                        CHECK_STR(buf, "b\xc3\xa9\n");
                    if (ss_sj_key_is(k, "code"))
                        CHECK_STR(buf, "x = \"{\"");
                }
                ss_sj_leave(&fa, &fo);
            }
            ss_sj_leave(&it, &fa);
            continue;
        }
        if (ss_sj_key_is(k, "z")) {
            /* left early: the walk goes on after the value */
            REQUIRE(ss_sj_enter(&it, &z, '[') == 0);
            CHECK_EQ_INT(ss_sj_next(&z), 1);
            ss_sj_leave(&it, &z);
            continue;
        }
        REQUIRE(ss_sj_take(&it, &v));
        if (ss_sj_key_is(k, "id")) {
            CHECK(ss_sj_is_str(v));
            ss_sj_str(v, buf);
            CHECK_STR(buf, "0x7f");
        } else if (ss_sj_key_is(k, "n")) {
            CHECK(ss_sj_is_num(v));
            CHECK(ss_sj_num(v, 0) == -150.0);
        }
    }
    CHECK_EQ_INT(members, 4);
    CHECK_EQ_INT(frames, 2);
    /* not what was asked: stepped over */
    const char *t = "{\"a\":\"[x]\",\"b\":1}";
    REQUIRE(ss_sj_object((ss_sj_span){t, t + strlen(t)}, &it) == 0);
    REQUIRE(ss_sj_key(&it, &k));
    CHECK_EQ_INT(ss_sj_enter(&it, &z, '['), -1);
    REQUIRE(ss_sj_key(&it, &k));
    CHECK(ss_sj_key_is(k, "b"));
    /* surrogate pairs, a lone surrogate, an escaped NUL ending the text */
    const char *e = "\"\\uD83D\\uDE00|\\uDE00|\\/\\b\\f\\r\\t|\\u0000after\"";
    ss_sj_str((ss_sj_span){e, e + strlen(e)}, buf);
    CHECK_STR(buf, "\xf0\x9f\x98\x80|\xef\xbf\xbd|/\b\f\r\t|");
}

static void broken_bytes_end_the_walk(void)
{
    /* never checked: the walk yields what it can and stops at the end */
    const char *s = "{\"a\":\"unterminated, \"b\":[1,2";
    ss_sj_iter it, in;
    ss_sj_span k, v;
    REQUIRE(ss_sj_object((ss_sj_span){s, s + strlen(s)}, &it) == 0);
    int n = 0;
    while (ss_sj_key(&it, &k) && n < 10) {
        if (ss_sj_enter(&it, &in, '[') == 0) {
            while (ss_sj_next(&in) && ss_sj_take(&in, &v))
                CHECK(v.end <= s + strlen(s));
            ss_sj_leave(&it, &in);
        }
        CHECK(it.p <= s + strlen(s));
        n++;
    }
    CHECK(n < 10);
    CHECK(ss_sj_object((ss_sj_span){s, s}, &it) == -1);
}

/* Enters every container IT walks, steps over everything else. */
static int walk_all(ss_sj_iter *it, int obj, int depth)
{
    ss_sj_span k, v;
    ss_sj_iter in;
    int n = 0;
    while (n < 100000 && (obj ? ss_sj_key(it, &k) : ss_sj_next(it))) {
        n++;
        if (depth < 8 && ss_sj_enter(it, &in, '{') == 0) {
            n += walk_all(&in, 1, depth + 1);
            ss_sj_leave(it, &in);
        } else if (depth < 8 && ss_sj_enter(it, &in, '[') == 0) {
            n += walk_all(&in, 0, depth + 1);
            ss_sj_leave(it, &in);
        } else if (!ss_sj_take(it, &v)) {
            break;
        }
    }
    return n;
}

/* Every cut and every one-byte change of a rank's object, each in a
 * buffer of its exact size (the sanitizers see a read past it): the
 * check and a walk over all of it stay inside, valid or not. */
static void changed_bytes_stay_inside(void)
{
    static const char base[] =
        "{\"rank\":3,\"why\":null,\"threads\":[{\"id\":\"0x1\",\"frames\":"
        "[{\"func\":\"a\\\"b\",\"line\":-1.5e3},{\"code\":\"\\u00e9\"}]}],"
        "\"n\":[true,false,null,{}]}";
    static const char repl[] = "\"\\{}[],:0a u\x01-.e";
    size_t len = sizeof base - 1;
    int valid = 0;
    for (size_t cut = 0; cut <= len; cut++)
        for (size_t at = 0; at <= cut; at++)
            for (size_t r = 0; r < (at < cut ? sizeof repl - 1 : 1); r++) {
                char *b = malloc(cut ? cut : 1);
                REQUIRE(b);
                memcpy(b, base, cut);
                if (at < cut)
                    b[at] = repl[r];
                const char *e = ss_sj_value(b, b + cut);
                CHECK(!e || (e >= b && e <= b + cut));
                valid += e == b + cut;
                ss_sj_is_rank_object(b, cut, 3);
                ss_sj_iter it;
                if (ss_sj_object((ss_sj_span){b, b + cut}, &it) == 0)
                    walk_all(&it, 1, 0);
                free(b);
            }
    CHECK(valid > 0);
}

TEST_LIST(TEST(the_grammar), TEST(a_rank_object), TEST(walks_and_strings),
          TEST(broken_bytes_end_the_walk), TEST(changed_bytes_stay_inside))
