/* Profiles as documents: validation, merging, and the table for people. */
#include <string.h>

#include "core/hps_json.h"
#include "profile/hps_profile.h"

static double num(json_t *o, const char *key)
{
    json_t *v = json_object_get(o, key);
    return json_is_number(v) ? json_number_value(v) : 0.0;
}

static double med(json_t *o, const char *key) { return num(json_object_get(o, key), "median"); }

static int validate_layer(json_t *layer, const char *ctx, hps_error *err)
{
    static const char *const timings[] = {"forward_ms", "backward_ms", NULL};
    static const char *const numbers[] = {"flops_forward", "flops_backward", "bytes_in",
                                          "bytes_out", "param_bytes", "sparse_bytes", NULL};
    const char *name;
    if (!json_is_object(layer) || hps_json_str(layer, "name", HPS_REQUIRED, &name, ctx, err))
        return hps_fail(err, HPS_EXIT_USAGE, "%s: expected a layer object with a name", ctx);
    for (int i = 0; timings[i]; i++) {
        double v;
        json_t *t = json_object_get(layer, timings[i]);
        char sub[768];
        snprintf(sub, sizeof sub, "%s '%s': %s", ctx, name, timings[i]);
        if (!json_is_object(t))
            return hps_fail(err, HPS_EXIT_USAGE, "%s: missing timing object", sub);
        if (hps_json_num(t, "median", HPS_REQUIRED, 0, 1e12, &v, sub, err)) return -1;
    }
    for (int i = 0; numbers[i]; i++) {
        double v;
        char sub[768];
        snprintf(sub, sizeof sub, "%s '%s'", ctx, name);
        if (hps_json_num(layer, numbers[i], HPS_REQUIRED, 0, 1e30, &v, sub, err)) return -1;
    }
    return 0;
}

static int validate_device(json_t *dev, int n_layers, const char *name, int i, hps_error *err)
{
    static const char *const kinds[] = {"cpu", "gpu", NULL};
    static const char *const sources[] = {"measured", "estimated", NULL};
    char ctx[300];
    const char *id;
    int kind, source;
    snprintf(ctx, sizeof ctx, "%s: device %d", name, i);
    if (!json_is_object(dev) || hps_json_str(dev, "id", HPS_REQUIRED, &id, ctx, err))
        return hps_fail(err, HPS_EXIT_USAGE, "%s: expected a device object with an id", ctx);
    snprintf(ctx, sizeof ctx, "%s: device '%s'", name, id);
    if (hps_json_enum(dev, "kind", HPS_REQUIRED, kinds, &kind, ctx, err) ||
        hps_json_enum(dev, "source", HPS_REQUIRED, sources, &source, ctx, err))
        return -1;
    json_t *layers = json_object_get(dev, "layers");
    if (!json_is_array(layers) || (int)json_array_size(layers) != n_layers)
        return hps_fail(err, HPS_EXIT_USAGE, "%s: layers must be an array of %d entries", ctx,
                        n_layers);
    for (int l = 0; l < n_layers; l++) {
        char lctx[320];
        snprintf(lctx, sizeof lctx, "%s: layer %d", ctx, l);
        if (validate_layer(json_array_get(layers, l), lctx, err)) return -1;
    }
    return 0;
}

int hps_profile_validate(json_t *doc, const char *name, hps_error *err)
{
    const char *format = NULL, *digest;
    long long version = 0, batch, n_layers;
    if (hps_json_str(doc, "format", HPS_REQUIRED, &format, name, err)) return -1;
    if (strcmp(format, "hps-profile") != 0)
        return hps_fail(err, HPS_EXIT_USAGE, "%s: format is '%s', expected 'hps-profile'", name,
                        format);
    if (hps_json_int(doc, "version", HPS_REQUIRED, 1, 1 << 30, &version, name, err)) return -1;
    if (version != HPS_PROFILE_VERSION)
        return hps_fail(err, HPS_EXIT_USAGE, "%s: profile version %lld, this hps reads version %d",
                        name, version, HPS_PROFILE_VERSION);
    json_t *model = json_object_get(doc, "model");
    char ctx[300];
    snprintf(ctx, sizeof ctx, "%s: model", name);
    if (!json_is_object(model)) return hps_fail(err, HPS_EXIT_USAGE, "%s: missing object", ctx);
    if (hps_json_str(model, "digest", HPS_REQUIRED, &digest, ctx, err) ||
        hps_json_int(model, "batch", HPS_REQUIRED, 1, HPS_MAX_BATCH, &batch, ctx, err) ||
        hps_json_int(model, "layers", HPS_REQUIRED, 1, HPS_MAX_LAYERS, &n_layers, ctx, err))
        return -1;
    json_t *devices = json_object_get(doc, "devices");
    if (!json_is_array(devices))
        return hps_fail(err, HPS_EXIT_USAGE, "%s: missing array 'devices'", name);
    for (size_t i = 0; i < json_array_size(devices); i++) {
        if (validate_device(json_array_get(devices, i), (int)n_layers, name, (int)i, err)) return -1;
        const char *id = json_string_value(json_object_get(json_array_get(devices, i), "id"));
        for (size_t j = 0; j < i; j++)
            if (strcmp(id, json_string_value(json_object_get(json_array_get(devices, j), "id"))) == 0)
                return hps_fail(err, HPS_EXIT_USAGE, "%s: device '%s' appears twice", name, id);
    }
    return 0;
}

json_t *hps_profile_merge(json_t **docs, const char **names, int n, hps_error *err)
{
    json_t *out = json_deep_copy(docs[0]), *devices = json_object_get(out, "devices");
    json_t *from = json_array();
    json_array_append_new(from, json_string(names[0]));
    json_t *model0 = json_object_get(docs[0], "model");
    for (int i = 1; i < n; i++) {
        json_t *model = json_object_get(docs[i], "model");
        if (!json_equal(json_object_get(model, "digest"), json_object_get(model0, "digest")) ||
            !json_equal(json_object_get(model, "batch"), json_object_get(model0, "batch"))) {
            hps_fail(err, HPS_EXIT_USAGE,
                     "%s: profiles model '%s' (batch %lld), but %s profiles '%s' (batch %lld)",
                     names[i], json_string_value(json_object_get(model, "name")),
                     (long long)json_integer_value(json_object_get(model, "batch")), names[0],
                     json_string_value(json_object_get(model0, "name")),
                     (long long)json_integer_value(json_object_get(model0, "batch")));
            goto fail;
        }
        size_t k;
        json_t *dev;
        json_array_foreach(json_object_get(docs[i], "devices"), k, dev) {
            const char *id = json_string_value(json_object_get(dev, "id"));
            size_t j;
            json_t *have;
            json_array_foreach(devices, j, have) {
                if (strcmp(id, json_string_value(json_object_get(have, "id"))) == 0) {
                    hps_fail(err, HPS_EXIT_USAGE,
                             "%s: device '%s' is already profiled by an earlier input", names[i],
                             id);
                    goto fail;
                }
            }
            json_array_append(devices, dev);
        }
        json_array_append_new(from, json_string(names[i]));
    }
    json_object_set_new(out, "merged_from", from);
    return out;
fail:
    json_decref(from);
    json_decref(out);
    return NULL;
}

/* ---- the table for people ------------------------------------------------------ */

static void print_device(json_t *dev, FILE *out)
{
    fprintf(out, "device %s (%s, %s): %s, %lld threads\n",
            json_string_value(json_object_get(dev, "id")),
            json_string_value(json_object_get(dev, "kind")),
            json_string_value(json_object_get(dev, "source")),
            json_string_value(json_object_get(dev, "name")),
            (long long)json_integer_value(json_object_get(dev, "threads")));
    fprintf(out, "  sgemm %.1f GFLOP/s, triad %.1f GB/s, gather %.1f Mrows/s\n",
            num(dev, "sgemm_gflops"), num(dev, "triad_gbps"), num(dev, "gather_mrows_per_s"));
    fprintf(out, "  %-3s %-16s %-15s %10s %10s %9s %10s %10s %10s %6s %6s\n", "#", "layer", "type",
            "fwd ms", "bwd ms", "GFLOP", "in KiB", "out KiB", "param KiB", "a", "f");
    size_t i;
    json_t *L;
    json_array_foreach(json_object_get(dev, "layers"), i, L) {
        json_t *a = json_object_get(json_object_get(L, "scaling"), "parallel_fraction");
        /* at the device's threads: the last measured */
        json_t *fs = json_object_get(json_object_get(L, "batch_scaling"), "fixed_fraction");
        json_t *f = json_array_get(fs, json_array_size(fs) - 1);
        fprintf(out, "  %-3zu %-16.16s %-15s %10.3f %10.3f %9.3f %10.1f %10.1f %10.1f %6.2f %6.2f\n", i,
                json_string_value(json_object_get(L, "name")),
                json_string_value(json_object_get(L, "type")), med(L, "forward_ms"),
                med(L, "backward_ms"),
                (num(L, "flops_forward") + num(L, "flops_backward")) / 1e9,
                num(L, "bytes_in") / 1024, num(L, "bytes_out") / 1024,
                num(L, "param_bytes") / 1024, json_is_number(a) ? json_number_value(a) : 0.0,
                json_is_number(f) ? json_number_value(f) : 0.0);
    }
    fprintf(out, "  overhead %.3f ms, layers + overhead %.3f ms, whole step %.3f ms",
            med(dev, "overhead_ms"), num(dev, "layers_sum_ms"), med(dev, "step_ms"));
    json_t *e = json_object_get(json_object_get(dev, "energy"), "step_j");
    if (json_is_number(e)) fprintf(out, ", %.3f J/step", json_number_value(e));
    fprintf(out, "\n");
    if (json_object_get(dev, "read_ms")) fprintf(out, "  read %.3f ms a batch\n", med(dev, "read_ms"));
    json_t *x = json_object_get(dev, "exchange");
    if (json_is_object(x))
        fprintf(out, "  exchange with a server: %.0f rows, %.1f KiB both ways, worker %.3f ms, server %.3f ms\n",
                num(x, "rows"), num(x, "bytes") / 1024, med(x, "worker_ms"), med(x, "server_ms"));
}

void hps_profile_print_table(json_t *doc, FILE *out)
{
    json_t *model = json_object_get(doc, "model");
    fprintf(out, "model %s, batch %lld\n", json_string_value(json_object_get(model, "name")),
            (long long)json_integer_value(json_object_get(model, "batch")));
    size_t i;
    json_t *dev;
    json_array_foreach(json_object_get(doc, "devices"), i, dev) {
        fputc('\n', out);
        print_device(dev, out);
    }
}

/* Multiplies the figures of a timing object ({median, min, max, mad}). */
static void scale_timing(json_t *t, double f)
{
    const char *key;
    json_t *v;
    json_object_foreach(t, key, v)
        if (json_is_number(v)) json_object_set_new(t, key, json_real(json_number_value(v) * f));
}

int hps_profile_scale_layers(json_t *doc, const char *device_id, int first, int end, double factor,
                             const char *run)
{
    size_t i;
    json_t *dev, *found = NULL;
    json_array_foreach(json_object_get(doc, "devices"), i, dev)
        if (strcmp(json_string_value(json_object_get(dev, "id")), device_id) == 0) found = dev;
    json_t *layers = json_object_get(found, "layers");
    if (!found || end > (int)json_array_size(layers)) return -1;
    for (int l = first; l < end; l++) {
        json_t *layer = json_array_get(layers, (size_t)l), *sc = json_object_get(layer, "scaling");
        scale_timing(json_object_get(layer, "forward_ms"), factor);
        scale_timing(json_object_get(layer, "backward_ms"), factor);
        /* the curve moves with the times; its parallel fraction stays */
        json_t *ms = json_object_get(sc, "ms"), *v;
        size_t k;
        json_array_foreach(ms, k, v) json_array_set_new(ms, k, json_real(json_number_value(v) * factor));
        json_t *before = json_object_get(json_object_get(layer, "calibrated"), "factor");
        double total = factor * (json_is_number(before) ? json_number_value(before) : 1);
        json_object_set_new(layer, "calibrated", json_pack("{s:f, s:s}", "factor", total, "run", run));
    }
    return 0;
}
