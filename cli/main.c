/* qprof: sample a QEMU guest's kernel and user stacks through QMP. See `qprof --help`.
 *
 *   qprof [OPTIONS]                 sample, then write every -o (record + report in one go)
 *   qprof record [OPTIONS] -o FILE  sample into a record file, written as sampling goes
 *   qprof report -i FILE [...]      read a record file and write any format from it
 *   qprof top [OPTIONS]             a live view, refreshed every second until q
 *   qprof diff BASE NEW [...]       compare two profiles
 *   qprof annotate -i FILE [FN]     a function's instructions with their samples */
#include "cli.h"

#include <string.h>

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "report") == 0)
        return prof_report_main(argc - 1, argv + 1);
    if (argc > 1 && strcmp(argv[1], "top") == 0)
        return prof_top_main(argc - 1, argv + 1);
    if (argc > 1 && strcmp(argv[1], "diff") == 0)
        return prof_diff_main(argc - 1, argv + 1);
    if (argc > 1 && strcmp(argv[1], "annotate") == 0)
        return prof_annotate_main(argc - 1, argv + 1);
    bool record = argc > 1 && strcmp(argv[1], "record") == 0;
    struct prof_options o;
    prof_options_init(&o);
    int rc = record ? prof_parse_args(argc - 1, argv + 1, &o) : prof_parse_args(argc, argv, &o);
    if (rc >= 0)
        return rc;
    if (record && prof_options_for_record(&o) != 0)
        return PROF_EXIT_USAGE;
    return prof_main(&o);
}
