/*
 * pg_conn_test.c - unit tests for pg_conn.c that need no server: what
 * names a team database, a password in a URI refused before anything is
 * sent (in the user part or as a parameter), a malformed URI and a server
 * that is not there each said in one line, and libpq's multi-line
 * messages made one.  tests/e2e/test_team_store.py runs a real server.
 */
#include "pg_conn.h"

#include <stdio.h>
#include <string.h>

#include "testing.h"
#include "testing_tmp.h"

static void uris_are_told_from_paths(void)
{
    CHECK(ss_pg_is_uri("postgresql://u@h/db"));
    CHECK(ss_pg_is_uri("postgres://h/db"));
    CHECK(!ss_pg_is_uri("postgresql:/x"));
    CHECK(!ss_pg_is_uri("store.db"));
    CHECK(!ss_pg_is_uri("./postgresql://x"));
    CHECK(!ss_pg_is_uri(NULL));
}

static void passwords_in_uris_are_refused(void)
{
    static const char *const with[] = {
        "postgresql://alice:secret@db.example/team",
        "postgres://alice:@db.example/team",
        "postgresql://alice@/team?host=/tmp&password=secret",
        "postgresql://alice@/team?Password=secret"};
    char err[512];
    for (size_t i = 0; i < sizeof with / sizeof with[0]; i++) {
        err[0] = '\0';
        CHECK(ss_pg_connect(with[i], err, sizeof err) == NULL);
        CHECK(strstr(err, "password in it") != NULL);
        CHECK(strstr(err, "secret") == NULL);
        CHECK(strchr(err, '\n') == NULL);
    }
}

static void bad_uris_and_absent_servers_are_one_line(void)
{
    char err[1024], dir[4096], uri[4200];
    CHECK(ss_pg_connect("postgresql://a@/db?nosuch=1", err, sizeof err) ==
          NULL);
    CHECK(strstr(err, "not a valid database URI") != NULL);
    CHECK(strchr(err, '\n') == NULL);
    CHECK(ss_pg_connect("team.db", err, sizeof err) == NULL);
    CHECK(strstr(err, "not a PostgreSQL URI") != NULL);
    /* A socket directory where no server listens. */
    testing_tmp_path("nosrv", dir, sizeof dir);
    snprintf(uri, sizeof uri, "postgresql://a@/db?host=%s", dir);
    CHECK(ss_pg_connect(uri, err, sizeof err) == NULL);
    CHECK(strncmp(err, "cannot connect to postgresql://", 31) == 0);
    CHECK(strchr(err, '\n') == NULL);
}

static void messages_become_one_line(void)
{
    char err[256];
    ss_pg_error_line(err, sizeof err, "x: ",
                     "connection failed: FATAL:  no\n\tDETAIL:  why\n");
    CHECK_STR(err, "x: connection failed: FATAL: no DETAIL: why");
    ss_pg_error_line(err, sizeof err, "x: ", "");
    CHECK_STR(err, "x: no reason given");
}

TEST_LIST(TEST(uris_are_told_from_paths), TEST(passwords_in_uris_are_refused),
          TEST(bad_uris_and_absent_servers_are_one_line),
          TEST(messages_become_one_line))
