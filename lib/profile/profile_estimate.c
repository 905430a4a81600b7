/* Estimated profiles for devices one does not have, from a spec sheet.
 *
 * A GPU comes from a model of the device alone, so that no CPU time (and no
 * noise of the machine that profiled) enters its figures: per pass
 *     fc         (F + F_half) / P  or  M / W, the larger, + kernels * launch
 *                (a GEMM's efficiency F / (F + F_half) rises with its size;
 *                F_half = P * gemm_half_us)
 *     embedding  sparse bytes / gather rate + the rest of M / W + launch
 *     others     max(F / P, M / W) + launch
 * with P, W the attainable compute rate and bandwidth; the overhead adds the
 * batch over PCIe.  A CPU spec is calibrated on the measured device, layer
 * by layer:
 *     e = roofline(measured device) / measured time,   clamped to [0.01, 1]
 *     t(estimated device) = roofline(spec) / e + kernels * launch overhead
 * where the measured device's "peaks" are its own measured sgemm and triad
 * rates.  hps-profile(1) documents the spec fields and defaults.
 */
#include <dirent.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/hps_io.h"
#include "core/hps_json.h"
#include "profile/hps_profile.h"

typedef struct {
    const char *name, *kind, *model;
    double peak_gflops, mem_gbps, memory_gb, launch_us, attainable, power_w, pcie_gbps,
        parallel_fraction, gemm_half_us, gather_gbps;
} device_spec;

static int load_spec(const char *path, device_spec *s, hps_error *err)
{
    static const char *const keys[] = {"name", "kind", "model", "peak_gflops", "mem_gbps",
                                       "memory_gb", "launch_us", "attainable", "power_w",
                                       "pcie_gbps", "parallel_fraction", "price_per_hour",
                                       "gemm_half_us", "gather_gbps", "comment", NULL};
    static const char *const kinds[] = {"cpu", "gpu", NULL};
    json_t *root;
    if (hps_json_load(path, &root, err)) return -1;
    const char *ctx = hps_path_name(path);
    int kind = 1;
    *s = (device_spec){.model = "spec sheet", .launch_us = 5, .attainable = 0.7,
                       .pcie_gbps = 25, .parallel_fraction = 0.95, .gemm_half_us = 20};
    int rc = hps_json_known_keys(root, keys, ctx, err) ||
             hps_json_str(root, "name", HPS_REQUIRED, &s->name, ctx, err) ||
             hps_json_enum(root, "kind", HPS_OPTIONAL, kinds, &kind, ctx, err) ||
             hps_json_str(root, "model", HPS_OPTIONAL, &s->model, ctx, err) ||
             hps_json_num(root, "peak_gflops", HPS_REQUIRED, 1e-3, 1e9, &s->peak_gflops, ctx, err) ||
             hps_json_num(root, "mem_gbps", HPS_REQUIRED, 1e-3, 1e9, &s->mem_gbps, ctx, err) ||
             hps_json_num(root, "memory_gb", HPS_OPTIONAL, 0, 1e9, &s->memory_gb, ctx, err) ||
             hps_json_num(root, "launch_us", HPS_OPTIONAL, 0, 1e6, &s->launch_us, ctx, err) ||
             hps_json_num(root, "attainable", HPS_OPTIONAL, 0.01, 1, &s->attainable, ctx, err) ||
             hps_json_num(root, "power_w", HPS_OPTIONAL, 0, 1e6, &s->power_w, ctx, err) ||
             hps_json_num(root, "pcie_gbps", HPS_OPTIONAL, 1e-3, 1e6, &s->pcie_gbps, ctx, err) ||
             hps_json_num(root, "parallel_fraction", HPS_OPTIONAL, 0, 1, &s->parallel_fraction,
                          ctx, err) ||
             hps_json_num(root, "gemm_half_us", HPS_OPTIONAL, 0, 1e6, &s->gemm_half_us, ctx, err) ||
             hps_json_num(root, "gather_gbps", HPS_OPTIONAL, 0, 1e9, &s->gather_gbps, ctx, err);
    /* random rows reach about half the streaming bandwidth (32-byte sectors) */
    if (rc == 0 && !(s->gather_gbps > 0)) s->gather_gbps = s->mem_gbps * s->attainable / 2;
    s->kind = kinds[kind];
    if (rc == 0) /* the strings point into root: copy them before it goes */
        s->name = hps_strdup(s->name), s->kind = hps_strdup(s->kind), s->model = hps_strdup(s->model);
    json_decref(root);
    return rc ? -1 : 0;
}

static double layer_bytes(const hps_profile_layer *L)
{
    return L->bytes_in + L->bytes_out + L->param_bytes + L->sparse_bytes;
}

static int is_type(const hps_profile_layer *L, const char *type) { return L->type && strcmp(L->type, type) == 0; }

/* Seconds at a roofline of gflops and gbps. */
static double roofline(double flops, double bytes, double gflops, double gbps)
{
    double tc = flops / (gflops * 1e9), tm = bytes / (gbps * 1e9);
    return tc > tm ? tc : tm;
}

/* Inner layers of a cross: hps_layer_costs counts each one's output
 * (bytes_out) against the one input. */
static double cross_depth(const hps_profile_layer *L)
{
    return L->bytes_in > 0 ? fmax(1.0, round(L->bytes_out / L->bytes_in)) : 1.0;
}

/* Kernel launches per pass: an fc is a gemm plus bias and activation; a
 * cross layer per inner layer its products and gate (counted as a matrix's,
 * the vector kind's are as many); linear a bag and its sum. */
static int kernels(const hps_profile_layer *L, int backward)
{
    if (is_type(L, "fc")) return backward ? 4 : 2;
    if (is_type(L, "cross")) return (int)cross_depth(L) * (backward ? 4 : 2);
    if (is_type(L, "linear")) return backward ? 3 : 2;
    return 1;
}

static int is_gpu(const device_spec *s) { return strcmp(s->kind, "gpu") == 0; }

/* A GPU pass from the device model alone (the comment at the top). */
static double gpu_pass_ms(const hps_profile_layer *L, const device_spec *s, int backward)
{
    double k = backward ? 2 : 1, flops = backward ? L->flops_backward : L->flops_forward;
    double bytes = layer_bytes(L) * k, P = s->peak_gflops * s->attainable * 1e9, W = s->mem_gbps * s->attainable * 1e9;
    double t;
    if (is_type(L, "fc")) {
        t = fmax((flops + P * s->gemm_half_us * 1e-6) / P, bytes / W);
    } else if (is_type(L, "cross")) { /* a gemm's ramp-up per inner layer */
        t = fmax((flops + P * s->gemm_half_us * 1e-6 * cross_depth(L)) / P, bytes / W);
    } else if (is_type(L, "embedding") || is_type(L, "linear")) {
        double rows = L->sparse_bytes * k; /* gathered forward, scattered back */
        t = rows / (s->gather_gbps * 1e9) + (bytes - rows) / W;
    } else {
        t = fmax(flops / P, bytes / W);
    }
    return (t + kernels(L, backward) * s->launch_us * 1e-6) * 1e3;
}

static double estimate_pass(const hps_profile_layer *L, const hps_profile_device *ref, const device_spec *s,
                            int backward)
{
    if (is_gpu(s)) return gpu_pass_ms(L, s, backward);
    double flops = backward ? L->flops_backward : L->flops_forward;
    double bytes = layer_bytes(L) * (backward ? 2 : 1);
    double measured = (backward ? L->backward_ms : L->forward_ms) * 1e-3;
    double ref_roof = roofline(flops, bytes, ref->sgemm_gflops, ref->triad_gbps);
    double e = measured > 0 ? ref_roof / measured : 1.0;
    e = e < 0.01 ? 0.01 : e > 1 ? 1 : e;
    double roof = roofline(flops, bytes, s->peak_gflops * s->attainable, s->mem_gbps * s->attainable);
    return (roof / e + kernels(L, backward) * s->launch_us * 1e-6) * 1e3;
}

/* The batch_scaling of an estimated layer (hps-profile(5)): the share of
 * its time that half the samples do not halve, on a GPU the device model's
 * own (its launches and a matrix product's ramp-up), on a CPU the
 * reference's at each thread count (its figures as written). */
static json_t *estimate_batch_scaling(const hps_profile_layer *L, const device_spec *s, double full_ms)
{
    if (!is_gpu(s)) return hps_profile_batch_scaling_copy(L->json);
    hps_profile_layer half = *L; /* what scales with the samples, halved */
    half.flops_forward /= 2, half.flops_backward /= 2, half.bytes_in /= 2, half.bytes_out /= 2;
    half.sparse_bytes /= 2;
    double half_ms = gpu_pass_ms(&half, s, 0) + gpu_pass_ms(&half, s, 1);
    static const int one = 1;
    double fixed = hps_fixed_fraction(full_ms, half_ms);
    return hps_profile_batch_scaling_json(&(hps_profile_batch_out){.n = 1, .units = &one, .fixed_fraction = &fixed});
}

/* The reference's layer object with the estimated figures in its place
 * (a copy, so that what the estimate does not set stays as the reference
 * wrote it). */
static json_t *estimate_layer(const hps_profile_layer *ref_layer, const hps_profile_device *ref,
                              const device_spec *s, double *sum_ms)
{
    json_t *L = json_deep_copy(ref_layer->json);
    double f = estimate_pass(ref_layer, ref, s, 0), b = estimate_pass(ref_layer, ref, s, 1), both = f + b;
    int one = 1;
    hps_profile_layer_out out = {
        .source = "estimated", .forward_ms = hps_profile_timing_point(f), .backward_ms = hps_profile_timing_point(b),
        .scaling = {.n = 1, .units = &one, .ms = &both,
                    .parallel_fraction = is_gpu(s) ? s->parallel_fraction : ref_layer->scaling.parallel_fraction},
        .energy_j = s->power_w > 0 ? s->power_w * both * 1e-3 : NAN};
    hps_profile_layer_set_estimate(L, &out, estimate_batch_scaling(ref_layer, s, both));
    *sum_ms += both;
    return L;
}

/* Overhead: the optimizer streams parameters, gradients and two moments
 * (16 bytes a parameter) through memory; a GPU also receives the batch. */
static double estimate_overhead_ms(const hps_profile_device *ref, const device_spec *s, double batch_bytes)
{
    double params = 0;
    for (int l = 0; l < ref->n_layers; l++) params += ref->layers[l].param_bytes;
    double t = params * 4 / (s->mem_gbps * s->attainable * 1e9) + 2 * s->launch_us * 1e-6;
    if (is_gpu(s)) t += batch_bytes / (s->pcie_gbps * 1e9);
    return t * 1e3;
}

static const hps_profile_device *first_measured(const hps_profile *p)
{
    for (int i = 0; i < p->n_devices; i++) {
        const hps_profile_device *d = &p->devices[i];
        if (!d->estimated && d->sgemm_gflops > 0 && d->triad_gbps > 0) return d;
    }
    return NULL;
}

static json_t *estimated_device(const hps_profile_device *ref, const device_spec *s)
{
    /* a CPU's gather rate scaled from the measured one; a GPU's rows of 16
     * floats at its gather rate */
    double ratio = s->mem_gbps * s->attainable / ref->triad_gbps;
    hps_profile_device_out d = {
        .id = s->name, .is_gpu = is_gpu(s), .name = s->model, .host = "estimated", .source = "estimated",
        .calibrated_on = ref->id, .memory_bytes = s->memory_gb * 1073741824.0,
        .sgemm_gflops = s->peak_gflops * s->attainable, .triad_gbps = s->mem_gbps * s->attainable,
        .pcie_gbps = is_gpu(s) ? s->pcie_gbps : 0,
        .gather_mrows_per_s = is_gpu(s) ? s->gather_gbps * 1e3 / 64 : ref->gather_mrows_per_s * ratio, .step_j = NAN};
    json_t *layers = json_array();
    double sum_ms = 0, batch_bytes = 0;
    for (int i = 0; i < ref->n_layers; i++) {
        const hps_profile_layer *L = &ref->layers[i];
        json_array_append_new(layers, estimate_layer(L, ref, s, &sum_ms));
        if (is_type(L, "embedding") || i == 0) batch_bytes += L->bytes_in;
    }
    double overhead = estimate_overhead_ms(ref, s, batch_bytes);
    d.overhead_ms = hps_profile_timing_point(overhead);
    d.step_ms = hps_profile_timing_point(sum_ms + overhead);
    d.layers_sum_ms = sum_ms + overhead;
    if (s->power_w > 0) {
        d.energy_source = "estimated";
        d.step_j = s->power_w * (sum_ms + overhead) * 1e-3;
        d.energy_reason = "power_w x estimated time";
    } else {
        d.energy_reason = "the spec gives no power_w";
    }
    return hps_profile_device_json(&d, layers);
}

/* The estimate against a profile already read: doc is p's document. */
static int estimate_into(json_t *doc, const hps_profile *p, const char *spec_path, hps_error *err)
{
    const hps_profile_device *ref = first_measured(p);
    if (!ref)
        return hps_fail(err, HPS_EXIT_USAGE,
                        "%s: --estimate needs a measured CPU device to calibrate against",
                        hps_path_name(spec_path));
    device_spec s;
    if (load_spec(spec_path, &s, err)) return -1;
    int rc = 0;
    if (hps_profile_device_find(p, s.name))
        rc = hps_fail(err, HPS_EXIT_USAGE, "%s: device '%s' is already in the profile",
                      hps_path_name(spec_path), hps_printable(s.name, (char[128]){0}, 128));
    if (rc == 0) json_array_append_new(hps_profile_doc_devices(doc), estimated_device(ref, &s));
    free((char *)s.name), free((char *)s.kind), free((char *)s.model);
    return rc;
}

int hps_profile_estimate(json_t *doc, const char *spec_path, hps_error *err)
{
    hps_profile *p = hps_profile_read(doc, "-", err);
    int rc = p ? estimate_into(doc, p, spec_path, err) : -1;
    hps_profile_free(p);
    return rc;
}
