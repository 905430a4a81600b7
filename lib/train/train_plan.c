/* What hps-train reads of a plan (hps-plan(5)), and the checks that tie the
 * plan to the model it was made for. */
#include <stdlib.h>
#include <string.h>

#include "core/hps_io.h"
#include "core/hps_json.h"
#include "train/hps_train.h"

void hps_train_plan_single(const hps_model *m, hps_train_plan *plan)
{
    memset(plan, 0, sizeof *plan);
    /* path stays empty: no plan file ("plan": null in the metrics) */
    snprintf(plan->model_digest, sizeof plan->model_digest, "%s", m->digest);
    plan->batch = m->batch;
    plan->n_layers = m->n_layers;
    plan->n_stages = 1;
    plan->servers = 1;
    hps_train_stage *s = &plan->stages[0];
    snprintf(s->type, sizeof s->type, "cpu");
    snprintf(s->kind, sizeof s->kind, "cpu");
    s->first = 0;
    s->end = m->n_layers;
    s->units = 1;
}

static int read_stage(json_t *js, int i, hps_train_stage *s, int n_layers, const char *name,
                      hps_error *err)
{
    static const char *const kinds[] = {"cpu", "gpu", NULL};
    char ctx[600];
    snprintf(ctx, sizeof ctx, "%s: stage %d", name, i);
    const char *type;
    long long units = 1;
    int kind = 0;
    json_t *layers = json_object_get(js, "layers");
    if (!json_is_object(js) || hps_json_str(js, "type", HPS_REQUIRED, &type, ctx, err) ||
        hps_json_int(js, "units", HPS_REQUIRED, 0, 1 << 20, &units, ctx, err) ||
        hps_json_enum(js, "kind", HPS_OPTIONAL, kinds, &kind, ctx, err) ||
        hps_json_num(js, "ms_per_batch", HPS_OPTIONAL, 0, 1e12, &s->predicted_ms, ctx, err))
        return -1;
    if (!json_is_array(layers) || json_array_size(layers) != 2 ||
        !json_is_integer(json_array_get(layers, 0)) || !json_is_integer(json_array_get(layers, 1)))
        return hps_fail(err, HPS_EXIT_USAGE, "%s: layers must be [first, last]", ctx);
    s->first = (int)json_integer_value(json_array_get(layers, 0));
    s->end = (int)json_integer_value(json_array_get(layers, 1)) + 1;
    if (s->first < 0 || s->end <= s->first || s->end > n_layers)
        return hps_fail(err, HPS_EXIT_USAGE, "%s: layers [%d, %d] are not within the model's %d",
                        ctx, s->first, s->end - 1, n_layers);
    snprintf(s->type, sizeof s->type, "%s", type);
    snprintf(s->kind, sizeof s->kind, "%s", kinds[kind]);
    s->units = (int)units;
    return 0;
}

static int check_model(json_t *root, const hps_model *m, hps_train_plan *plan, const char *name,
                       hps_error *err)
{
    const char *digest = NULL;
    json_t *digests = json_object_get(root, "digests");
    char ctx[600];
    snprintf(ctx, sizeof ctx, "%s: digests", name);
    if (!json_is_object(digests) || hps_json_str(digests, "model", HPS_REQUIRED, &digest, ctx, err))
        return hps_fail(err, HPS_EXIT_USAGE, "%s: missing digests.model", name);
    if (strcmp(digest, m->digest) != 0)
        return hps_fail(err, HPS_EXIT_USAGE,
                        "%s: made for model %.19s..., but %s is %.19s... (re-run hps-plan)", name,
                        digest, m->path, m->digest);
    snprintf(plan->model_digest, sizeof plan->model_digest, "%s", digest);
    long long batch = m->batch, layers = m->n_layers;
    json_t *model = json_object_get(root, "model");
    snprintf(ctx, sizeof ctx, "%s: model", name);
    if (json_is_object(model) &&
        (hps_json_int(model, "batch", HPS_OPTIONAL, 1, HPS_MAX_BATCH, &batch, ctx, err) ||
         hps_json_int(model, "layers", HPS_OPTIONAL, 1, HPS_MAX_LAYERS, &layers, ctx, err)))
        return -1;
    if (layers != m->n_layers)
        return hps_fail(err, HPS_EXIT_USAGE, "%s: plans %lld layers, the model has %d", name,
                        layers, m->n_layers);
    plan->batch = (int)batch;
    plan->n_layers = m->n_layers;
    return 0;
}

static int read_stages(json_t *root, hps_train_plan *plan, const char *name, hps_error *err)
{
    json_t *stages = json_object_get(root, "stages");
    if (!json_is_array(stages) || json_array_size(stages) == 0 ||
        json_array_size(stages) > HPS_TRAIN_MAX_STAGES)
        return hps_fail(err, HPS_EXIT_USAGE, "%s: stages must be an array of 1 to %d stages", name,
                        HPS_TRAIN_MAX_STAGES);
    plan->n_stages = (int)json_array_size(stages);
    int next = 0;
    for (int i = 0; i < plan->n_stages; i++) {
        hps_train_stage *s = &plan->stages[i];
        if (read_stage(json_array_get(stages, i), i, s, plan->n_layers, name, err)) return -1;
        if (s->first != next)
            return hps_fail(err, HPS_EXIT_USAGE, "%s: stage %d starts at layer %d, expected %d",
                            name, i, s->first, next);
        next = s->end;
    }
    if (next != plan->n_layers)
        return hps_fail(err, HPS_EXIT_USAGE, "%s: stages end at layer %d of %d", name, next - 1,
                        plan->n_layers);
    return 0;
}

int hps_train_plan_load(const char *path, const hps_model *m, hps_train_plan *plan,
                        hps_error *err)
{
    memset(plan, 0, sizeof *plan);
    const char *name = hps_path_name(path);
    char *text;
    size_t len;
    if (hps_json_read(path, &text, &len, err)) return -1;
    json_t *root;
    int rc = hps_json_loadb(name, text, len, &root, err);
    if (rc == 0) {
        hps_sha256_hex(text, len, plan->digest);
        snprintf(plan->path, sizeof plan->path, "%s", name);
        const char *format = "";
        long long version = 0, servers = 1;
        json_t *sv = json_object_get(root, "servers");
        rc = hps_json_str(root, "format", HPS_REQUIRED, &format, name, err) ||
             hps_json_int(root, "version", HPS_REQUIRED, 0, 1 << 20, &version, name, err);
        if (rc == 0 && (strcmp(format, "hps-plan") != 0 || version != 1))
            rc = hps_fail(err, HPS_EXIT_USAGE,
                          "%s: not an hps-plan version 1 file (format '%s', version %lld)", name,
                          format, version);
        if (rc == 0 && json_is_object(sv))
            rc = hps_json_int(sv, "count", HPS_OPTIONAL, 1, 1 << 20, &servers, name, err);
        plan->servers = (int)servers;
        if (rc == 0) rc = check_model(root, m, plan, name, err);
        if (rc == 0) rc = read_stages(root, plan, name, err);
        json_decref(root);
    }
    free(text);
    return rc ? -1 : 0;
}
