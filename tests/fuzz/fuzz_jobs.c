/* A jobs file (hps-plan(5), JOBS FILE) as hps-plan --jobs reads it, and a
 * joint plan as hps-plan show reads and draws it. */
#include "core/hps_json.h"
#include "fuzz.h"
#include "plan/hps_plan_jobs.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    hps_error err;
    json_t *root;
    if (hps_json_loadb("fuzz.json", (const char *)data, size, &root, &err)) return 0;
    plan_jobs_file jf;
    if (plan_jobs_file_parse(root, "dir/jobs.json", &jf, &err) == 0) HPS_CHECK(jf.n_jobs > 0);
    plan_jobs_file_free(&jf);
    plan_joint *jt = plan_joint_parse(root, "joint.json", &err);
    if (jt) {
        FILE *f = fopen("/dev/null", "w");
        plan_joint_table(f, jt);
        plan_joint_svg(f, jt);
        fclose(f);
        plan_joint_free(jt);
    }
    json_decref(root);
    return 0;
}
