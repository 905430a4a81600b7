/* A shard directory's manifest.json. */
#include "data/hps_shard.h"
#include "fuzz.h"

static char dir[64];

static void remove_dir(void) { rmdir(dir); }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!dir[0]) {
        snprintf(dir, sizeof dir, "/tmp/hps-fuzz-manifest-XXXXXX");
        HPS_CHECK(mkdtemp(dir));
        atexit(remove_dir);
    }
    char path[128];
    snprintf(path, sizeof path, "%s/manifest.json", dir);
    FILE *f = fopen(path, "wb");
    HPS_CHECK(f && (size == 0 || fwrite(data, 1, size, f) == size));
    fclose(f);
    hps_error err;
    hps_manifest *m = hps_manifest_load(dir, &err);
    for (int i = 0; m && i < m->n_shards; i++) free(hps_manifest_shard_path(m, i));
    hps_manifest_free(m);
    unlink(path);
    return 0;
}
