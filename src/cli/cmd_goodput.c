/*
 * cmd_goodput.c - the command line of `stepscope goodput` (commands.h):
 * its options, usage and checks; views/goodput_view.h lays the figures
 * out.
 *
 *   stepscope goodput [--db PATH] [--json] [RUN | --name NAME]
 */
#include <stdio.h>
#include <string.h>

#include "cli_args.h"
#include "commands.h"
#include "goodput_view.h"

static const char usage[] =
    "usage: stepscope goodput [--db PATH] [--json] [RUN | --name NAME]\n"
    "\n"
    "Where a run's wall time went: productive training, start-up,\n"
    "checkpoints, lost work, restarts, hangs, data stalls, stragglers and\n"
    "the rest, per attempt (docs/fault-tolerance.md).  With --name: every\n"
    "run of that name, then MTBF, MTTR and the Young/Daly checkpoint\n"
    "interval over them.\n"
    "\n"
    "  RUN          a run id, a run name (its latest run) or a uuid prefix;\n"
    "               default: the latest run\n"
    "  --name NAME  every run named NAME\n"
    "  --db PATH    the store; default: $XDG_DATA_HOME/stepscope/stepscope.db\n"
    "               or ~/.local/share/stepscope/stepscope.db\n"
    "  --json       print one JSON object\n"
    "  -h, --help   print this help\n";

int ss_cmd_goodput(int argc, char **argv)
{
    ss_goodput_opts o = {0};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            fputs(usage, stdout);
            return 0;
        } else if (strcmp(a, "--json") == 0) {
            o.json = 1;
        } else if (strcmp(a, "--db") == 0 || strcmp(a, "--name") == 0) {
            if (ss_cli_option_value("goodput", argc, argv, &i,
                                    a[2] == 'd' ? &o.db : &o.name, stderr))
                return 2;
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "stepscope goodput: unknown option '%s' (see "
                            "`stepscope goodput --help`)\n", a);
            return 2;
        } else if (!o.run) {
            o.run = a;
        } else {
            fprintf(stderr, "stepscope goodput: unexpected argument '%s'\n",
                    a);
            return 2;
        }
    }
    if (o.run && o.name) {
        fprintf(stderr, "stepscope goodput: give a RUN or --name NAME, not "
                        "both\n");
        return 2;
    }
    return ss_goodput_cmd(&o, stdout, stderr);
}
