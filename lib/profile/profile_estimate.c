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
 * batch over PCIe.  A CPU is the measured CPU device times the ratio of the
 * two machines' modelled times, layer by layer (hps_cpu_pass_ms):
 *     t = min(t_m, B_m) * B_s / B_m + (t_m - min(t_m, B_m)) * clock_m / clock_s
 * with B a pass's bound on each machine (GEMM: FLOPs / GEMM rate; anything
 * else: bytes / bandwidth), the measured device's rates its own sgemm and
 * triad, the sheet's its peaks times attainable; what the bound does not
 * explain is latency, and scales by the clock.  So a sheet of the measured
 * machine gives its times back, and --check-estimate can test the model
 * where it can be tested: on this machine's other thread counts.
 * hps-profile(1) documents the spec fields and defaults.
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
    /* a CPU's sheet: the chip (its caches are recorded, not modelled) */
    double cores, threads, clock_ghz, vector_width, flops_per_cycle, l1d_kib, l2_kib, l3_mib;
} device_spec;

static const char *const cpu_fields[] = {"cores", "threads", "clock_ghz", "vector_width", "flops_per_cycle",
                                         "l1d_kib", "l2_kib", "l3_mib", NULL};

/* A CPU's fields: peak_gflops defaults to cores x clock x FLOPs per cycle,
 * and FLOPs per cycle to two FMA units (4 x the vector's lanes). */
static int read_cpu_fields(json_t *root, device_spec *s, const char *ctx, hps_error *err)
{
    int rc = hps_json_num(root, "cores", HPS_REQUIRED, 1, 1 << 20, &s->cores, ctx, err) ||
             hps_json_num(root, "threads", HPS_OPTIONAL, 1, 1 << 20, &s->threads, ctx, err) ||
             hps_json_num(root, "clock_ghz", HPS_OPTIONAL, 0.01, 100, &s->clock_ghz, ctx, err) ||
             hps_json_num(root, "vector_width", HPS_OPTIONAL, 1, 1024, &s->vector_width, ctx, err) ||
             hps_json_num(root, "flops_per_cycle", HPS_OPTIONAL, 1, 1 << 16, &s->flops_per_cycle, ctx, err) ||
             hps_json_num(root, "l1d_kib", HPS_OPTIONAL, 0, 1 << 20, &s->l1d_kib, ctx, err) ||
             hps_json_num(root, "l2_kib", HPS_OPTIONAL, 0, 1 << 24, &s->l2_kib, ctx, err) ||
             hps_json_num(root, "l3_mib", HPS_OPTIONAL, 0, 1 << 20, &s->l3_mib, ctx, err);
    if (rc) return -1;
    if (s->threads != floor(s->threads) || s->cores != floor(s->cores))
        return hps_fail(err, HPS_EXIT_USAGE, "%s: cores and threads must be whole numbers", ctx);
    if (!(s->threads > 0)) s->threads = s->cores;
    if (!(s->flops_per_cycle > 0)) s->flops_per_cycle = 4 * s->vector_width;
    if (!(s->peak_gflops > 0)) s->peak_gflops = s->cores * s->clock_ghz * s->flops_per_cycle;
    if (!(s->peak_gflops > 0))
        return hps_fail(err, HPS_EXIT_USAGE,
                        "%s: peak_gflops is missing (give it, or clock_ghz and vector_width or flops_per_cycle)",
                        ctx);
    return 0;
}

/* A GPU's sheet has none of a CPU's fields: one there is a mistake. */
static int no_cpu_fields(json_t *root, const char *ctx, hps_error *err)
{
    for (int i = 0; cpu_fields[i]; i++)
        if (json_object_get(root, cpu_fields[i]))
            return hps_fail(err, HPS_EXIT_USAGE, "%s: %s is a CPU's field (this sheet's kind is gpu)", ctx,
                            cpu_fields[i]);
    return 0;
}

static int read_spec(json_t *root, const char *ctx, device_spec *s, hps_error *err)
{
    static const char *const keys[] = {"name", "kind", "model", "peak_gflops", "mem_gbps",
                                       "memory_gb", "launch_us", "attainable", "power_w",
                                       "pcie_gbps", "parallel_fraction", "price_per_hour",
                                       "gemm_half_us", "gather_gbps", "comment", "cores", "threads",
                                       "clock_ghz", "vector_width", "flops_per_cycle", "l1d_kib",
                                       "l2_kib", "l3_mib", NULL};
    static const char *const kinds[] = {"cpu", "gpu", NULL};
    int kind = 1;
    *s = (device_spec){.model = "spec sheet", .launch_us = 5, .attainable = 0.7,
                       .pcie_gbps = 25, .parallel_fraction = 0.95, .gemm_half_us = 20};
    if (hps_json_known_keys(root, keys, ctx, err) ||
        hps_json_enum(root, "kind", HPS_OPTIONAL, kinds, &kind, ctx, err))
        return -1;
    int cpu = kind == 0;
    int rc = hps_json_str(root, "name", HPS_REQUIRED, &s->name, ctx, err) ||
             hps_json_str(root, "model", HPS_OPTIONAL, &s->model, ctx, err) ||
             hps_json_num(root, "peak_gflops", cpu ? HPS_OPTIONAL : HPS_REQUIRED, 1e-3, 1e9, &s->peak_gflops, ctx,
                          err) ||
             hps_json_num(root, "mem_gbps", HPS_REQUIRED, 1e-3, 1e9, &s->mem_gbps, ctx, err) ||
             hps_json_num(root, "memory_gb", HPS_OPTIONAL, 0, 1e9, &s->memory_gb, ctx, err) ||
             hps_json_num(root, "launch_us", HPS_OPTIONAL, 0, 1e6, &s->launch_us, ctx, err) ||
             hps_json_num(root, "attainable", HPS_OPTIONAL, 0.01, 1, &s->attainable, ctx, err) ||
             hps_json_num(root, "power_w", HPS_OPTIONAL, 0, 1e6, &s->power_w, ctx, err) ||
             hps_json_num(root, "pcie_gbps", HPS_OPTIONAL, 1e-3, 1e6, &s->pcie_gbps, ctx, err) ||
             hps_json_num(root, "parallel_fraction", HPS_OPTIONAL, 0, 1, &s->parallel_fraction,
                          ctx, err) ||
             hps_json_num(root, "gemm_half_us", HPS_OPTIONAL, 0, 1e6, &s->gemm_half_us, ctx, err) ||
             hps_json_num(root, "gather_gbps", HPS_OPTIONAL, 0, 1e9, &s->gather_gbps, ctx, err) ||
             (cpu ? read_cpu_fields(root, s, ctx, err) : no_cpu_fields(root, ctx, err));
    if (rc) return -1;
    /* random rows reach about half the streaming bandwidth (32-byte sectors) */
    if (!(s->gather_gbps > 0)) s->gather_gbps = s->mem_gbps * s->attainable / 2;
    s->kind = kinds[kind];
    /* the strings point into root: copy them before it goes */
    s->name = hps_strdup(s->name), s->kind = hps_strdup(s->kind), s->model = hps_strdup(s->model);
    return 0;
}

static void spec_free(device_spec *s) { free((char *)s->name), free((char *)s->kind), free((char *)s->model); }

static int load_spec(const char *path, device_spec *s, hps_error *err)
{
    json_t *root;
    if (hps_json_load(path, &root, err)) return -1;
    int rc = read_spec(root, hps_path_name(path), s, err);
    json_decref(root);
    return rc;
}

int hps_spec_sheet_parse(const char *name, const char *text, size_t len, hps_error *err)
{
    json_t *root;
    if (hps_json_loadb(name, text, len, &root, err)) return -1;
    device_spec s;
    int rc = read_spec(root, name, &s, err);
    if (rc == 0) spec_free(&s);
    json_decref(root);
    return rc;
}

static double layer_bytes(const hps_profile_layer *L)
{
    return L->bytes_in + L->bytes_out + L->param_bytes + L->sparse_bytes;
}

static int is_type(const hps_profile_layer *L, const char *type) { return L->type && strcmp(L->type, type) == 0; }

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

/* A CPU layer's kind in the device model: a matrix product is GEMM-bound,
 * anything else moves its bytes (hps-profile(1), ESTIMATES). */
static int gemm_bound(const hps_profile_layer *L) { return is_type(L, "fc") || is_type(L, "cross"); }

const char *hps_cpu_layer_bound(const hps_profile_layer *L) { return gemm_bound(L) ? "gemm" : "bandwidth"; }

/* A pass's modelled bound on a CPU of rates r, in ms. */
static double cpu_bound_ms(const hps_profile_layer *L, int backward, const hps_cpu_rates *r)
{
    if (gemm_bound(L)) return (backward ? L->flops_backward : L->flops_forward) / (r->gflops * 1e6);
    return layer_bytes(L) * (backward ? 2 : 1) / (r->gbps * 1e6);
}

double hps_cpu_pass_ms(const hps_profile_layer *L, int backward, const hps_cpu_rates *from, const hps_cpu_rates *to)
{
    double measured = backward ? L->backward_ms : L->forward_ms;
    double m_from = cpu_bound_ms(L, backward, from), m_to = cpu_bound_ms(L, backward, to);
    /* the share of the measured time the bound explains, the rest latency;
     * a layer faster than its bound (its data in cache) is all bound */
    double bound = m_from > 0 ? fmin(measured, m_from) : 0, latency = measured - bound;
    double clock = from->clock_ghz > 0 && to->clock_ghz > 0 ? from->clock_ghz / to->clock_ghz : 1;
    return (bound > 0 ? bound * (m_to / m_from) : 0) + latency * clock;
}

static hps_cpu_rates spec_rates(const device_spec *s)
{
    return (hps_cpu_rates){s->peak_gflops * s->attainable, s->mem_gbps * s->attainable, s->clock_ghz};
}

static hps_cpu_rates device_rates(const hps_profile_device *d)
{
    return (hps_cpu_rates){d->sgemm_gflops, d->triad_gbps, d->clock_ghz};
}

static double estimate_pass(const hps_profile_layer *L, const hps_profile_device *ref, const device_spec *s,
                            int backward)
{
    if (is_gpu(s)) return gpu_pass_ms(L, s, backward);
    hps_cpu_rates from = device_rates(ref), to = spec_rates(s);
    return hps_cpu_pass_ms(L, backward, &from, &to);
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
    int units = is_gpu(s) ? 1 : (int)s->threads; /* a CPU's time is on all its threads */
    hps_profile_layer_out out = {
        .source = "estimated", .forward_ms = hps_profile_timing_point(f), .backward_ms = hps_profile_timing_point(b),
        .scaling = {.n = 1, .units = &units, .ms = &both,
                    .parallel_fraction = is_gpu(s) ? s->parallel_fraction : ref_layer->scaling.parallel_fraction},
        .energy_j = s->power_w > 0 ? s->power_w * both * 1e-3 : NAN};
    hps_profile_layer_set_estimate(L, &out, estimate_batch_scaling(ref_layer, s, both));
    *sum_ms += both;
    return L;
}

/* Overhead: on a CPU the engine's, timed on the reference, is table rows
 * and the optimizer's streams: bandwidth-bound, it scales by the bandwidths.
 * A GPU's: the optimizer streams parameters, gradients and two moments (16
 * bytes a parameter) through memory, and the batch crosses PCIe. */
static double estimate_overhead_ms(const hps_profile_device *ref, const device_spec *s, double batch_bytes)
{
    if (!is_gpu(s) && ref->overhead_ms > 0) return ref->overhead_ms * ref->triad_gbps / (s->mem_gbps * s->attainable);
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
        .pcie_gbps = is_gpu(s) ? s->pcie_gbps : 0, .threads = is_gpu(s) ? 0 : (int)s->threads,
        .clock_ghz = s->clock_ghz,
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
    spec_free(&s);
    return rc;
}

int hps_profile_estimate(json_t *doc, const char *spec_path, hps_error *err)
{
    hps_profile *p = hps_profile_read(doc, "-", err);
    int rc = p ? estimate_into(doc, p, spec_path, err) : -1;
    hps_profile_free(p);
    return rc;
}

/* ---- --check-estimate: the CPU model against this machine's measurements ---- */

static const hps_profile_device *fewest_threads(const hps_profile *p)
{
    const hps_profile_device *best = NULL;
    for (int i = 0; i < p->n_devices; i++) {
        const hps_profile_device *d = &p->devices[i];
        if (!d->estimated && !d->is_gpu && d->sgemm_gflops > 0 && d->triad_gbps > 0 &&
            (!best || d->threads < best->threads))
            best = d;
    }
    return best;
}

/* One device predicted from ref: each layer's forward+backward, then the
 * sum; the largest error of a layer into *worst. */
static void check_device(const hps_profile_device *ref, const hps_profile_device *d, const hps_cpu_rates *to,
                         const char *target, FILE *out, double *worst)
{
    hps_cpu_rates from = device_rates(ref);
    double sum_measured = 0, sum_predicted = 0;
    char shown[64];
    fprintf(out, "%s (%d thread%s) from %s (%d thread%s) at %s: %.1f GFLOP/s, %.1f GB/s\n", d->id, d->threads,
            d->threads == 1 ? "" : "s", ref->id, ref->threads, ref->threads == 1 ? "" : "s", target, to->gflops,
            to->gbps);
    fprintf(out, "  %-20s %-9s %11s %12s %8s\n", "layer", "bound", "measured_ms", "predicted_ms", "error");
    for (int l = 0; l < d->n_layers && l < ref->n_layers; l++) {
        const hps_profile_layer *L = &ref->layers[l];
        double measured = d->layers[l].forward_ms + d->layers[l].backward_ms;
        double predicted = hps_cpu_pass_ms(L, 0, &from, to) + hps_cpu_pass_ms(L, 1, &from, to);
        double error = measured > 0 ? predicted / measured - 1 : 0;
        if (fabs(error) > *worst) *worst = fabs(error);
        sum_measured += measured, sum_predicted += predicted;
        fprintf(out, "  %-20s %-9s %11.4f %12.4f %+7.1f%%\n", hps_printable(L->name, shown, sizeof shown),
                hps_cpu_layer_bound(L), measured, predicted, 100 * error);
    }
    fprintf(out, "  %-20s %-9s %11.4f %12.4f %+7.1f%%\n", "(layers)", "", sum_measured, sum_predicted,
            sum_measured > 0 ? 100 * (sum_predicted / sum_measured - 1) : 0);
}

int hps_profile_check_estimate(const hps_profile *p, const char *sheet_path, FILE *out, hps_error *err)
{
    device_spec s;
    if (load_spec(sheet_path, &s, err)) return -1;
    const char *name = hps_path_name(sheet_path);
    const hps_profile_device *ref = fewest_threads(p);
    int rc = 0;
    if (is_gpu(&s))
        rc = hps_fail(err, HPS_EXIT_USAGE, "%s: --check-estimate checks a CPU's sheet (this one's kind is gpu)", name);
    else if (!ref)
        rc = hps_fail(err, HPS_EXIT_USAGE, "%s: --check-estimate needs a measured CPU device with sgemm and triad "
                      "rates", p->name);
    int checked = 0;
    double worst = 0;
    for (int i = 0; rc == 0 && i < p->n_devices; i++) {
        const hps_profile_device *d = &p->devices[i];
        if (d->estimated || d->is_gpu || !(d->sgemm_gflops > 0 && d->triad_gbps > 0)) continue;
        int own = d->threads == (int)s.threads; /* the sheet's thread count: predicted at its rates */
        if (d == ref && !own) continue;         /* from itself at its own rates: nothing to check */
        hps_cpu_rates to = own ? spec_rates(&s) : device_rates(d);
        to.clock_ghz = ref->clock_ghz; /* one machine: one clock */
        char target[300];
        snprintf(target, sizeof target, own ? "the rates of %s" : "its own measured rates",
                 hps_printable(s.name, (char[128]){0}, 128));
        if (checked++) fputc('\n', out);
        check_device(ref, d, &to, target, out, &worst);
    }
    if (rc == 0 && !checked)
        rc = hps_fail(err, HPS_EXIT_USAGE,
                      "%s: nothing to check: %s has one measured CPU device and %s is of %d threads; profile "
                      "-D cpu:1,cpu:%d", p->name, p->name, name, (int)s.threads, (int)s.threads);
    if (rc == 0) fprintf(out, "\nlargest layer error %.1f%%\n", 100 * worst);
    spec_free(&s);
    return rc;
}
