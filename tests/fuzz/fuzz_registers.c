/* Fuzz target: qmp_parse_registers over `info registers` / `info registers -a` text.
 *
 * Input: the text (NUL-terminated here). Parsed into a full table and into a table of one, and
 * the two must agree on the first CPU. */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "qmp.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    memcpy(text, data, size);
    text[size] = '\0';

    struct qmp_regs all[QMP_MAX_CPUS], one[1];
    struct qp_error err = {0};
    int n_all = -1, n_one = -1;
    int rc = qmp_parse_registers(text, all, QMP_MAX_CPUS, &n_all, &err);
    FUZZ_ASSERT(rc == 0 || (rc < 0 && err.msg[0] != '\0'));
    if (rc == 0) {
        FUZZ_ASSERT(n_all >= 1 && n_all <= QMP_MAX_CPUS);
        for (int i = 0; i < n_all; i++)
            FUZZ_ASSERT(all[i].long_mode == ((all[i].efer & 0x400) != 0));
    }
    int rc_one = qmp_parse_registers(text, one, 1, &n_one, NULL);
    FUZZ_ASSERT(rc_one == rc);
    if (rc == 0) {
        FUZZ_ASSERT(n_one == 1);
        FUZZ_ASSERT(one[0].rip == all[0].rip && one[0].rsp == all[0].rsp &&
                    one[0].cpl == all[0].cpl && one[0].cpu_index == all[0].cpu_index);
    }
    free(text);
    return 0;
}
