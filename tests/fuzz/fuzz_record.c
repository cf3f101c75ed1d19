/* Fuzz target: out_record_read over an arbitrary record file (a file cut short by a killed
 * recorder, a corrupt one, one from another version, one someone made to hurt).
 *
 * Input: the file's bytes. Whatever loads is self-consistent: every sample names an interned
 * stack and a vCPU of at most OUT_MAX_CPU, every frame a module or none, no comm holds a
 * control character; and every writer (folded, SVG, pprof, speedscope; per vCPU and not) runs
 * over it without a sanitizer report. */
#include <stdio.h>
#include <stdlib.h>

#include "fuzz.h"
#include "output.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    out_profile *p = NULL;
    char *meta = NULL;
    struct qp_error err = {0};
    if (out_record_read(fuzz_file_with(data, size), &p, &meta, &err) != 0) {
        FUZZ_ASSERT(p == NULL && err.msg[0] != '\0');
        return 0;
    }
    size_t n_stacks = out_profile_stack_count(p), n_modules = out_profile_module_count(p);
    const struct out_record *r = out_profile_samples(p);
    for (size_t i = 0; i < out_profile_sample_count(p); i++)
        FUZZ_ASSERT(r[i].stack < n_stacks && r[i].cpu <= OUT_MAX_CPU);
    for (size_t i = 0; i < n_stacks; i++) {
        const struct out_stack *s = out_profile_stack(p, (uint32_t)i);
        FUZZ_ASSERT(s->n_user <= s->n_frames);
        for (const char *c = s->comm; *c; c++)
            FUZZ_ASSERT((unsigned char)*c >= 0x20 && *c != 0x7f);
        for (int k = 0; k < s->n_frames; k++)
            FUZZ_ASSERT(s->frames[k].module == OUT_NO_MODULE || s->frames[k].module < n_modules);
    }
    out_names *n = out_names_new(p, NULL, NULL);
    FILE *sink = fopen("/dev/null", "w");
    static const enum out_format formats[] = {OUT_FOLDED, OUT_SVG, OUT_PPROF, OUT_SPEEDSCOPE};
    for (int per_cpu = 0; per_cpu < 2; per_cpu++) {
        struct out_write_opts o = {.per_cpu = per_cpu};
        for (size_t f = 0; f < sizeof formats / sizeof formats[0]; f++)
            FUZZ_ASSERT(out_write(p, n, formats[f], &o, sink, NULL) == 0);
    }
    fclose(sink);
    out_names_free(n);
    out_profile_free(p);
    free(meta);
    return 0;
}
