/*
 * cmd_serve.c - the command line of `stepscope serve` (commands.h): its
 * options, usage and the listening address; api/serve.h serves.
 *
 *   stepscope serve [--db PATH] [--http ADDR:PORT]
 */
#include <getopt.h>
#include <stdio.h>

#include "cli_suggest.h"
#include "commands.h"
#include "http.h"
#include "serve.h"

static void usage(FILE *out)
{
    fprintf(out,
        "usage: stepscope serve [--db PATH] [--http ADDR:PORT]\n"
        "\n"
        "Serves the runs in the store over HTTP (JSON API, dashboard,\n"
        "docs/api.md) until Ctrl-C.\n"
        "\n"
        "options:\n"
        "      --db PATH          the store (default: $XDG_DATA_HOME/\n"
        "                         stepscope/stepscope.db)\n"
        "      --http ADDR:PORT   where to listen (default 127.0.0.1:%d;\n"
        "                         port 0: any free port).  Any address but\n"
        "                         loopback requires the printed token.\n"
        "  -h, --help             this text\n", SS_HTTP_DEFAULT_PORT);
}

int ss_cmd_serve(int argc, char **argv)
{
    static const struct option opts[] = {
        {"db", required_argument, NULL, 'd'},
        {"http", required_argument, NULL, 'H'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    const char *addr = NULL;
    ss_serve_opts o = {.port = SS_HTTP_DEFAULT_PORT};
    optind = 1;
    opterr = 0; /* the errors are said below, in one line each */
    int c;
    while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        switch (c) {
        case 'd': o.db = optarg; break;
        case 'H': addr = optarg; break;
        case 'h': usage(stdout); return 0;
        case ':':
            fprintf(stderr, "stepscope serve: option '%s' needs a value "
                            "(see `stepscope serve --help`)\n",
                    argv[optind - 1]);
            return 2;
        default:
            ss_cli_unknown_option(stderr, "serve", argv[optind - 1], opts);
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "stepscope serve: unexpected argument '%s' (see "
                        "`stepscope serve --help`)\n", argv[optind]);
        return 2;
    }
    char host[64], err[512];
    snprintf(host, sizeof host, "127.0.0.1");
    if (addr && ss_http_parse_addr(addr, host, sizeof host, &o.port, err,
                                   sizeof err) != 0) {
        fprintf(stderr, "stepscope serve: --http: %s\n", err);
        return 2;
    }
    o.host = host;
    o.fallback = addr == NULL; /* the default port may be taken */
    return ss_serve(&o);
}
