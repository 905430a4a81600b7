/* A cluster file (hps-cluster(5)). */
#include "fuzz.h"
#include "plan/hps_cluster.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    hps_error err;
    hps_cluster *c = hps_cluster_load(fuzz_path(data, size), &err);
    if (c) hps_cluster_free(c);
    return 0;
}
