/*
 * cmd_cli_test.c - the command lines of the front-ends (commands.h), one
 * row each: the arguments, the exit status, and a text that must start
 * stdout or appear in stderr.  --help, unknown options, missing values,
 * values out of range and options that exclude each other are refused
 * before any store or controller is touched (none exists here).  The
 * commands' work with real stores: cmd_report_test.c, cmd_trace_test.c
 * and the others beside it.
 */
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "testing.h"
#include "testing_cmd.h"

typedef struct {
    const char *name;    /* the row, in a failure message */
    testing_cmd_fn cmd;
    const char *args[8]; /* after ARGV[0], NULL-terminated */
    int status;
    const char *out;     /* stdout starts with it; NULL: not checked */
    const char *err;     /* stderr contains it; NULL: not checked */
} row;

#define NOSTORE "/nonexistent/stepscope-test.db"

static const row rows[] = {
    {"report --help", ss_cmd_report,
     {"--help"}, 0,
     "usage: stepscope report", NULL},
    {"report bad option", ss_cmd_report,
     {"--bogus"}, 2,
     NULL, "stepscope report: unknown option '--bogus'"},
    {"report --html --json", ss_cmd_report,
     {"--html", "--json", "--db", NOSTORE}, 2,
     NULL, "exclude each other"},
    {"report -o without --html", ss_cmd_report,
     {"-o", "x.html", "--db", NOSTORE}, 2,
     NULL, "-o is for --html"},
    {"report -o without a file", ss_cmd_report,
     {"--html", "--db", NOSTORE, "-o"}, 2,
     NULL, "-o needs a file name"},
    {"report two runs", ss_cmd_report,
     {"--db", NOSTORE, "a", "b"}, 2,
     NULL, "unexpected argument 'b'"},
    {"report no store", ss_cmd_report,
     {"--db", NOSTORE}, 1,
     NULL, "stepscope report: "},
    {"runs -h", ss_cmd_runs,
     {"-h"}, 0,
     "usage: stepscope runs", NULL},
    {"runs --db without a path", ss_cmd_runs,
     {"--db"}, 2,
     NULL, "stepscope runs: --db needs a path"},
    {"runs takes no RUN", ss_cmd_runs,
     {"1"}, 2,
     NULL, "unexpected argument '1'"},
    {"upgrade --help", ss_cmd_upgrade,
     {"--help"}, 0,
     "usage: stepscope upgrade", NULL},
    {"upgrade stray argument", ss_cmd_upgrade,
     {"x"}, 2,
     NULL, "stepscope upgrade: unexpected argument 'x'"},
    {"upgrade no store", ss_cmd_upgrade,
     {"--db", NOSTORE}, 1,
     NULL, "no store there"},
    {"diff --help", ss_cmd_diff,
     {"--help"}, 0,
     "usage: stepscope diff", NULL},
    {"diff one run", ss_cmd_diff,
     {"1"}, 2,
     NULL, "give two runs, RUN_A and RUN_B"},
    {"diff --db-b without a value", ss_cmd_diff,
     {"1", "2", "--db-b"}, 2,
     NULL, "--db-b needs a value"},
    {"goodput --help", ss_cmd_goodput,
     {"--help"}, 0,
     "usage: stepscope goodput", NULL},
    {"goodput RUN and --name", ss_cmd_goodput,
     {"1", "--name", "x"}, 2,
     NULL, "give a RUN or --name NAME, not both"},
    {"guard --help", ss_cmd_guard,
     {"--help"}, 0,
     "usage: stepscope guard", NULL},
    {"guard --last 0", ss_cmd_guard,
     {"--last", "0"}, 2,
     NULL, "--last: expected 1..10000"},
    {"guard --set unknown", ss_cmd_guard,
     {"--set", "nope=1"}, 2,
     NULL, "unknown setting"},
    {"guard RUN and --name", ss_cmd_guard,
     {"--name", "a", "1"}, 2,
     NULL, "give RUN or --name, not both"},
    {"trace --help", ss_cmd_trace,
     {"--help"}, 0,
     "usage: stepscope trace", NULL},
    {"trace without -o", ss_cmd_trace,
     {"--db", NOSTORE}, 2,
     NULL, "say where to write the trace"},
    {"trace --attempt x", ss_cmd_trace,
     {"--attempt", "x", "-o", "-"}, 2,
     NULL, "--attempt needs a number"},
    {"top --help", ss_cmd_top,
     {"--help"}, 0,
     "usage: stepscope top", NULL},
    {"top --interval 0", ss_cmd_top,
     {"--interval", "0"}, 2,
     NULL, "--interval wants seconds from 0.1 to 3600"},
    {"top --url not http", ss_cmd_top,
     {"--url", "ftp://x/"}, 2,
     NULL, "--url wants http://HOST:PORT/"},
    {"stacks --help", ss_cmd_stacks,
     {"--help"}, 0,
     "usage: stepscope stacks", NULL},
    {"stacks --db and --url", ss_cmd_stacks,
     {"--db", NOSTORE, "--url", "http://127.0.0.1:1/"}, 2,
     NULL, "give --db or --url, not both"},
    {"stacks two runs", ss_cmd_stacks,
     {"1", "2"}, 2,
     NULL, "unexpected argument '2'"},
    {"profile --help", ss_cmd_profile,
     {"--help"}, 0,
     "usage: stepscope profile", NULL},
    {"profile without --seconds", ss_cmd_profile,
     {"--ranks", "0"}, 2,
     NULL, "--ranks and --seconds are needed"},
    {"profile --ranks x", ss_cmd_profile,
     {"--ranks", "x", "--seconds", "1"}, 2,
     NULL, "--ranks wants a list"},
    {"profile --seconds 601", ss_cmd_profile,
     {"--ranks", "0", "--seconds", "601"}, 2, NULL,
      "--seconds wants a number in (0, 600]"}, {"gpus --help", ss_cmd_gpus,
      {"--help"}, 0,
     "usage: stepscope gpus", NULL},
    {"gpus --watch 0", ss_cmd_gpus,
     {"--watch", "0"}, 2,
     NULL, "--watch wants seconds from 1 to 3600"},
    {"gpus --interval 5", ss_cmd_gpus,
     {"--interval", "5"}, 2,
     NULL, "--interval wants milliseconds from 20 to 60000"},
    {"native-stack no PID", ss_cmd_native_stack,
     {NULL}, 2,
     NULL, "usage: stepscope __native-stack PID..."},
    {"native-stack not a PID", ss_cmd_native_stack,
     {"1", "x"}, 2,
     NULL, "not a process id: x"},
    {"run mistyped option", ss_cmd_run,
     {"--atuo", "-n", "2", "--", "true"}, 2,
     NULL, "stepscope run: unknown option '--atuo'; did you mean --auto? "
           "(`stepscope run --help` lists the options)\n"},
    {"run option without its value", ss_cmd_run,
     {"-n", "2", "--db"}, 2,
     NULL, "stepscope run: --db needs a value (`stepscope run --help`"},
    {"run flag with a value", ss_cmd_run,
     {"--auto=1", "-n", "2", "--", "true"}, 2,
     NULL, "stepscope run: --auto takes no value"},
    {"run missing command", ss_cmd_run,
     {"-n", "1", "--db", NOSTORE, "--", "stepscope-no-such-command"}, 127,
     NULL, "stepscope run: cannot run 'stepscope-no-such-command': no such "
           "command on PATH; no rank was started\n"},
    {"run missing script", ss_cmd_run,
     {"-n", "1", "--db", NOSTORE, "--", "no-such-train.py"}, 127,
     NULL, "stepscope run: cannot run 'no-such-train.py': No such file"},
    {"serve --help", ss_cmd_serve,
     {"--help"}, 0,
     "usage: stepscope serve", NULL},
    {"serve bad --http", ss_cmd_serve,
     {"--http", "not-an-address"}, 2,
     NULL, "stepscope serve: --http: "},
};

static void every_row(void)
{
    for (size_t k = 0; k < sizeof rows / sizeof rows[0]; k++) {
        const row *r = &rows[k];
        char *argv[10] = {"cmd"};
        int argc = 1;
        for (; argc < 9 && r->args[argc - 1]; argc++)
            argv[argc] = (char *)r->args[argc - 1];
        argv[argc] = NULL;
        char *out = NULL, *err = NULL;
        size_t olen = 0, elen = 0;
        FILE *o = open_memstream(&out, &olen), *e = open_memstream(&err, &elen);
        int status = testing_cmd_run(r->cmd, argc, argv, o, e);
        fclose(o);
        fclose(e);
        int ok = status == r->status &&
                 (!r->out || strncmp(out, r->out, strlen(r->out)) == 0) &&
                 (!r->err || strstr(err, r->err) != NULL);
        if (!ok)
            fprintf(stderr, "  row '%s': status %d (want %d)\n"
                            "  stdout: %.200s\n  stderr: %.300s\n",
                    r->name, status, r->status, out, err);
        CHECK(ok);
        free(out);
        free(err);
    }
}

/* A usage error of `stepscope run` is one line on stderr, not the help. */
static void run_usage_errors_are_one_line(void)
{
    static const char *const cases[][6] = {
        {"--atuo", "-n", "2", "--", "true", NULL},
        {"-x", "-n", "2", "--", "true", NULL},
        {"-n", "2", "--grace", NULL},
        {"-n", "0", "--", "true", NULL},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        char *argv[8] = {"run"};
        int argc = 1;
        for (; cases[k][argc - 1]; argc++)
            argv[argc] = (char *)cases[k][argc - 1];
        char *err = NULL;
        size_t elen = 0;
        FILE *e = open_memstream(&err, &elen);
        int status = testing_cmd_run(ss_cmd_run, argc, argv, NULL, e);
        fclose(e);
        CHECK_EQ_INT(status, 2);
        CHECK(strncmp(err, "stepscope run: ", 15) == 0);
        CHECK(strchr(err, '\n') == err + elen - 1);
        if (strncmp(err, "stepscope run: ", 15) != 0 ||
            strchr(err, '\n') != err + elen - 1)
            fprintf(stderr, "  case %zu: %s\n", k, err);
        free(err);
    }
}

/* An unknown option is one line on stderr naming the command, with the
 * nearest option when one is near, for every command that reads a store
 * or a live job. */
static void every_command_refuses_an_unknown_option_in_one_line(void)
{
    static const struct {
        const char *name;
        testing_cmd_fn cmd;
    } cmds[] = {
        {"report", ss_cmd_report}, {"runs", ss_cmd_runs},
        {"upgrade", ss_cmd_upgrade}, {"serve", ss_cmd_serve},
        {"stacks", ss_cmd_stacks}, {"top", ss_cmd_top},
        {"profile", ss_cmd_profile}, {"guard", ss_cmd_guard},
        {"trace", ss_cmd_trace}, {"goodput", ss_cmd_goodput},
        {"diff", ss_cmd_diff}, {"gpus", ss_cmd_gpus},
    };
    for (size_t k = 0; k < sizeof cmds / sizeof cmds[0]; k++) {
        char *argv[3] = {(char *)cmds[k].name, "--bogus", NULL};
        char *err = NULL;
        size_t elen = 0;
        FILE *e = open_memstream(&err, &elen);
        int status = testing_cmd_run(cmds[k].cmd, 2, argv, NULL, e);
        fclose(e);
        char want[64];
        int wlen = snprintf(want, sizeof want, "stepscope %s: ",
                            cmds[k].name);
        int ok = status == 2 && strncmp(err, want, (size_t)wlen) == 0 &&
                 strstr(err, "--bogus") &&
                 strchr(err, '\n') == err + elen - 1;
        if (!ok)
            fprintf(stderr, "  %s: status %d: %s\n", cmds[k].name, status,
                    err);
        CHECK(ok);
        free(err);
    }
    /* a near miss is named */
    char *argv[4] = {"serve", "--htpp", "x", NULL};
    char *err = NULL;
    size_t elen = 0;
    FILE *e = open_memstream(&err, &elen);
    CHECK_EQ_INT(testing_cmd_run(ss_cmd_serve, 3, argv, NULL, e), 2);
    fclose(e);
    CHECK(strstr(err, "did you mean --http?") != NULL);
    free(err);
}

TEST_LIST(TEST(every_row), TEST(run_usage_errors_are_one_line),
          TEST(every_command_refuses_an_unknown_option_in_one_line))
