/* The rl policy's file (lib/plan/rl-policy.json's format, hps-plan(1),
 * --train-policy and --policy): its one reader and its writer. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/hps_io.h"
#include "core/hps_json.h"
#include "plan/plan_rl.h"

void plan_policy_free(plan_policy *pol) { free(pol); }

static const char *const policy_keys[] = {"hps_plan_policy", "features", "hidden", "weights", "trained", NULL};

plan_policy *plan_policy_parse(json_t *root, const char *name, hps_error *err)
{
    long long version, nf, nh;
    if (!json_is_object(root)) {
        hps_fail(err, HPS_EXIT_RUNTIME, "%s: expected an object (an rl policy)", name);
        return NULL;
    }
    if (hps_json_known_keys(root, policy_keys, name, err) ||
        hps_json_int(root, "hps_plan_policy", HPS_REQUIRED, 1, 1, &version, name, err) ||
        hps_json_int(root, "features", HPS_REQUIRED, RL_F, RL_F, &nf, name, err) ||
        hps_json_int(root, "hidden", HPS_REQUIRED, RL_H, RL_H, &nh, name, err))
        return NULL;
    json_t *ws = json_object_get(root, "weights");
    if (!json_is_array(ws) || json_array_size(ws) != RL_NP) {
        hps_fail(err, HPS_EXIT_RUNTIME, "%s: weights must be an array of %d numbers", name, RL_NP);
        return NULL;
    }
    plan_policy *pol = hps_calloc(1, sizeof *pol);
    for (size_t i = 0; i < RL_NP; i++) {
        json_t *v = json_array_get(ws, i);
        if (!json_is_number(v) || !isfinite(json_number_value(v))) {
            hps_fail(err, HPS_EXIT_RUNTIME, "%s: weights[%zu] must be a finite number", name, i);
            free(pol);
            return NULL;
        }
        pol->w[i] = (float)json_number_value(v);
    }
    json_t *tr = json_object_get(root, "trained");
    if (json_is_object(tr)) {
        pol->seed = (uint64_t)json_integer_value(json_object_get(tr, "seed"));
        pol->instances = (long)json_integer_value(json_object_get(tr, "instances"));
        pol->episodes = (long)json_integer_value(json_object_get(tr, "episodes"));
    }
    return pol;
}

plan_policy *plan_policy_load(const char *path, hps_error *err)
{
    json_t *root;
    if (hps_json_load(path, &root, err)) return NULL;
    plan_policy *pol = plan_policy_parse(root, hps_path_name(path), err);
    json_decref(root);
    return pol;
}

int plan_policy_save(const plan_policy *pol, const char *path, hps_error *err)
{
    json_t *ws = json_array();
    for (int i = 0; i < RL_NP; i++) json_array_append_new(ws, json_real(pol->w[i]));
    json_t *root = json_pack("{s:i, s:i, s:i, s:o, s:{s:I, s:I, s:I}}", "hps_plan_policy", 1, "features", RL_F,
                             "hidden", RL_H, "weights", ws, "trained", "seed", (json_int_t)pol->seed,
                             "instances", (json_int_t)pol->instances, "episodes", (json_int_t)pol->episodes);
    int rc = hps_json_write(path, root, err);
    json_decref(root);
    return rc;
}

extern const char plan_policy_text[]; /* lib/plan/rl-policy.json, built in by the Makefile */

plan_policy *plan_policy_shipped(void)
{
    hps_error err;
    json_t *root;
    plan_policy *pol = NULL;
    if (!hps_json_loadb("rl-policy.json", plan_policy_text, strlen(plan_policy_text), &root, &err)) {
        pol = plan_policy_parse(root, "rl-policy.json", &err);
        json_decref(root);
    }
    if (!pol) { /* a build error, not the user's: the file is built in */
        hps_report(&err);
        abort();
    }
    return pol;
}
