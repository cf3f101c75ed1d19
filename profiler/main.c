/* qprof: sample a QEMU guest's kernel and user stacks through QMP. See `qprof --help`. */
#include "profiler.h"

int main(int argc, char **argv)
{
    struct prof_options o;
    prof_options_init(&o);
    int rc = prof_parse_args(argc, argv, &o);
    if (rc >= 0)
        return rc;
    return prof_main(&o);
}
