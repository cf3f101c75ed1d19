/* Fuzz target: out_record_read over an arbitrary record file (a file cut short by a killed
 * recorder, a corrupt one, one from another version).
 *
 * Input: the file's bytes. Whatever loads is self-consistent: every sample names an interned
 * stack, every frame a module or none, and the folded writer runs over it. */
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
        FUZZ_ASSERT(r[i].stack < n_stacks);
    for (size_t i = 0; i < n_stacks; i++) {
        const struct out_stack *s = out_profile_stack(p, (uint32_t)i);
        FUZZ_ASSERT(s->n_user <= s->n_frames);
        for (int k = 0; k < s->n_frames; k++)
            FUZZ_ASSERT(s->frames[k].module == OUT_NO_MODULE || s->frames[k].module < n_modules);
    }
    out_names *n = out_names_new(p, NULL, NULL);
    FILE *sink = fopen("/dev/null", "w");
    FUZZ_ASSERT(out_write(p, n, OUT_FOLDED, NULL, sink, NULL) == 0);
    fclose(sink);
    out_names_free(n);
    out_profile_free(p);
    free(meta);
    return 0;
}
