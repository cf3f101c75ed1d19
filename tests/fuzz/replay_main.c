/* Replays inputs through a fuzz target without libFuzzer: every regular file named on the
 * command line, or found directly in a directory named there (sorted; dot files skipped), is
 * read into a buffer of exactly its size and passed to LLVMFuzzerTestOneInput once. A crash or
 * a sanitizer report ends the run like any test failure, naming the input on stderr first.
 *
 *   replay_<target> tests/fuzz/corpus/<target> tests/fuzz/regressions/<target>
 *
 * A directory that does not exist counts as empty (a target's regressions/ before its first
 * saved input), but a run that replays nothing at all fails: the arguments are wrong.
 *
 * Exit codes: 0 every input ran, 1 an input could not be read or there was none, 2 usage. */
#include <dirent.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz.h"

static int replay_file(const char *path)
{
    FILE *fp = fopen(path, "rb");
    if (fp == NULL) {
        fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
        return -1;
    }
    int rc = -1;
    uint8_t *data = NULL;
    struct stat st;
    if (fstat(fileno(fp), &st) != 0 || st.st_size < 0)
        goto out;
    size_t size = (size_t)st.st_size;
    /* Exactly size bytes (at least one to malloc), so ASan sees a read past the input. */
    data = malloc(size ? size : 1);
    if (data == NULL || fread(data, 1, size, fp) != size)
        goto out;
    fprintf(stderr, "replay: %s (%zu bytes)\n", path, size);
    LLVMFuzzerTestOneInput(data, size);
    rc = 0;
out:
    if (rc < 0)
        fprintf(stderr, "replay: cannot read %s\n", path);
    free(data);
    fclose(fp);
    return rc;
}

static int by_name(const struct dirent **a, const struct dirent **b)
{
    return strcmp((*a)->d_name, (*b)->d_name);
}

static int skip_dot_files(const struct dirent *d)
{
    return d->d_name[0] != '.';
}

/* Returns the number of inputs replayed, or -1. */
static int replay_dir(const char *dir)
{
    struct dirent **names;
    int n = scandir(dir, &names, skip_dot_files, by_name);
    if (n < 0) {
        fprintf(stderr, "replay: %s: %s\n", dir, strerror(errno));
        return -1;
    }
    int count = 0;
    for (int i = 0; i < n; i++) {
        char path[4096];
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", dir, names[i]->d_name);
        if (count >= 0 && stat(path, &st) == 0 && S_ISREG(st.st_mode))
            count = replay_file(path) == 0 ? count + 1 : -1;
        free(names[i]);
    }
    free(names);
    return count;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s FILE|DIR...\n", argv[0]);
        return 2;
    }
    int total = 0;
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) != 0 && errno == ENOENT) {
            fprintf(stderr, "replay: %s does not exist: no inputs from it\n", argv[i]);
            continue;
        }
        bool is_dir = S_ISDIR(st.st_mode);
        int n = is_dir ? replay_dir(argv[i]) : replay_file(argv[i]) == 0 ? 1 : -1;
        if (n < 0)
            return 1;
        total += n;
    }
    printf("replayed %d inputs\n", total);
    return total > 0 ? 0 : 1;
}
