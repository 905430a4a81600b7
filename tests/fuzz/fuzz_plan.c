/* A plan file (hps-plan(5)): as hps-train reads it against its model (the
 * seeds carry testdata's demo-ctr digest, so mutations get past the check),
 * as the one reader reads it for every tool, and, under mpirun, as the ranks
 * take their roles from it (dist_read_roles) for a few world sizes: the
 * plan's own, and one fewer and one more. */
#include "core/hps_json.h"
#include "fuzz.h"
#include "model/hps_model.h"
#include "plan/hps_plan_file.h"
#include "train/hps_train.h"
#ifdef HPS_MPI
#include "dist/dist_internal.h"

/* Roles for a world of `size` ranks, each named as the start-up message does. */
static int roles(hps_dist *d, const char *path, int size)
{
    hps_error err;
    char name[256];
    memset(d, 0, sizeof *d);
    d->size = size;
    if (dist_read_roles(d, path, &err)) return -1;
    for (int r = 0; r < d->size; r++) dist_role_name(d, r, name, sizeof name);
    return 0;
}

static void take_roles(const char *path)
{
    static hps_dist *d;
    if (!d) d = hps_malloc(sizeof *d);
    roles(d, path, 1);
    int needed = d->workers + d->servers; /* what the plan asks, read before the size is checked */
    for (int size = needed - 1; size <= needed + 1; size++)
        if (size > 1 && size <= HPS_DIST_MAX_RANKS) roles(d, path, size);
}
#else
static void take_roles(const char *path) { (void)path; } /* MPI=0: one process, no roles */
#endif

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static hps_model *m;
    hps_error err;
    if (!m) HPS_CHECK((m = hps_model_load(fuzz_testdata("models/demo-ctr.json"), &err)));
    const char *path = fuzz_path(data, size);
    plan_file plan;
    if (hps_train_plan_load(path, m, &plan, &err) == 0) plan_file_free(&plan);
    plan_file pf;
    if (plan_file_load(path, &pf, &err) == 0) {
        plan_file_free(&pf);
        take_roles(path);
    }
    return 0;
}
