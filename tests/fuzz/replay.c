/* The fuzz targets without libFuzzer, for `make check`: every file under the
 * directories HPS_FUZZ_INPUTS names (':'-separated; the target's seeds and the
 * crashers found so far), and under those named as arguments (a corpus, for
 * tests/fuzz/cov.sh), goes through LLVMFuzzerTestOneInput once.  A crash,
 * a sanitizer report or a leak under `make asan` fails the run; otherwise one
 * TAP line says how many inputs passed. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz.h"

static int replay_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *buf = malloc(n > 0 ? (size_t)n : 1);
    size_t got = n > 0 ? fread(buf, 1, (size_t)n, f) : 0;
    fclose(f);
    LLVMFuzzerTestOneInput(buf, got);
    free(buf);
    return 1;
}

static int replay_dir(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) return 0;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        char path[8192];
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (e->d_name[0] != '.' && stat(path, &st) == 0 && S_ISREG(st.st_mode)) n += replay_file(path);
    }
    closedir(d);
    return n;
}

int main(int argc, char **argv)
{
    char *dirs = strdup(HPS_FUZZ_INPUTS);
    int n = 0;
    for (char *save, *dir = strtok_r(dirs, ":", &save); dir; dir = strtok_r(NULL, ":", &save))
        n += replay_dir(dir);
    free(dirs);
    for (int i = 1; i < argc; i++) n += replay_dir(argv[i]);
    printf("1..1\n%s 1 - %s: %d inputs replayed\n", n > 0 ? "ok" : "not ok", HPS_FUZZ_NAME, n);
    return n > 0 ? 0 : 1;
}
