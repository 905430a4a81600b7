/* The profile reader (hps-profile(5)): what it reads from testdata, the
 * fields it refuses, each named by file, device, layer and field, and what
 * the writer writes read back. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hps_test.h"
#include "core/hps_json.h"
#include "model/hps_model.h"
#include "profile/hps_profile.h"

#define TINY HPS_TESTDATA "/profiles/tiny.json"

static void test_reads_testdata(void **state)
{
    (void)state;
    hps_error err;
    hps_profile *p = hps_profile_load(TINY, &err);
    if (!p) fail_msg("%s", err.msg);
    assert_string_equal(p->name, TINY); /* as given */
    assert_int_equal(p->batch, 8);
    assert_int_equal(p->n_layers, 5);
    assert_true(p->n_devices >= 1);
    const hps_profile_device *d = &p->devices[0];
    assert_ptr_equal(hps_profile_device_find(p, d->id), d);
    assert_null(hps_profile_device_find(p, "no-such-device"));
    assert_int_equal(d->n_layers, 5);
    assert_true(d->layers[0].forward_ms > 0);
    assert_int_equal(d->layers[0].scaling.n, 2);
    assert_int_equal(d->layers[0].scaling.units[1], 2);
    assert_int_equal(d->layers[0].batch_scaling.n, 0); /* profiled before it: none */
    assert_true(isnan(d->layers[0].spread));            /* profiled before it: not recorded */
    assert_false(d->exchange.present);
    hps_profile_free(p);
}

/* tiny.json's first device as kind `kind` with `threads`, triad 12 GB/s and
 * pcie_gbps (0: absent): its host link (hps_profile_host_link_gbps). */
static double host_link(const char *kind, int threads, double pcie)
{
    hps_error err;
    json_t *doc;
    assert_int_equal(hps_json_load(TINY, &doc, &err), 0);
    json_t *dev = json_array_get(json_object_get(doc, "devices"), 0);
    json_object_set_new(dev, "kind", json_string(kind));
    json_object_set_new(dev, "threads", json_integer(threads));
    json_object_set_new(dev, "triad_gbps", json_real(12));
    if (pcie > 0) json_object_set_new(dev, "pcie_gbps", json_real(pcie));
    else json_object_del(dev, "pcie_gbps");
    hps_profile *p = hps_profile_read(doc, "p.json", &err);
    json_decref(doc);
    if (!p) fail_msg("%s", err.msg);
    double gbps = hps_profile_host_link_gbps(&p->devices[0]);
    hps_profile_free(p);
    return gbps;
}

/* A gpu device measured on CPU threads is the CPU backend (bench-fidelity's
 * gpu type on this machine's CPU, hps-train --cpu-fallback): its "device
 * memory" is an arena in host memory, and rows and activations reach it by
 * memcpy, at half the triad's bytes (read once, written once); a CUDA
 * device's link is its pcie_gbps, absent: not charged. */
static void test_host_link_of_the_cpu_backend(void **state)
{
    (void)state;
    assert_true(fabs(host_link("gpu", 2, 0) - 6) < 1e-12);
    assert_true(fabs(host_link("gpu", 2, 16) - 16) < 1e-12); /* a link given is the link */
    assert_true(host_link("gpu", 0, 0) == 0);                 /* a CUDA device: no threads, nothing given */
    assert_true(fabs(host_link("gpu", 0, 16) - 16) < 1e-12);
    assert_true(host_link("cpu", 2, 0) == 0);                 /* a CPU type has no device memory */
}

/* tiny.json with one field of its first device (or of the device's layer 1)
 * set to `value` (JSON text); the reader's error. */
static const char *refused(const char *field, const char *value, int in_layer)
{
    static hps_error err;
    json_t *doc, *v = json_loads(value, JSON_DECODE_ANY, NULL);
    assert_int_equal(hps_json_load(TINY, &doc, &err), 0);
    json_t *dev = json_array_get(json_object_get(doc, "devices"), 0);
    json_object_set_new(in_layer ? json_array_get(json_object_get(dev, "layers"), 1) : dev, field, v);
    hps_profile *p = hps_profile_read(doc, "p.json", &err);
    json_decref(doc);
    if (p) {
        hps_profile_free(p);
        return "";
    }
    return err.msg;
}

static void test_refuses_each_field_once(void **state)
{
    (void)state;
    /* what the planner alone refused before, now every reader */
    assert_string_equal(refused("batch_scaling", "{\"units\": [1], \"fixed_fraction\": [1.5]}", 1),
                        "p.json: device 'cpu': layer 1 'concat': batch_scaling: fixed_fraction[0] must be a number in [0, 1]");
    assert_string_equal(refused("scaling", "{\"units\": [1, 2], \"ms\": [1], \"parallel_fraction\": 0.5}", 1),
                        "p.json: device 'cpu': layer 1 'concat': scaling: units and ms must be arrays of one length");
    assert_string_equal(refused("handoff_us", "-3", 0), "p.json: device 'cpu': handoff_us=-3 must be in [0, 1e+06]");
    assert_string_equal(refused("device_rows_ms", "-1", 0),
                        "p.json: device 'cpu': device_rows_ms=-1 must be in [0, 1e+09]");
    assert_string_equal(refused("read_cpu_ms", "-0.5", 0), "p.json: device 'cpu': read_cpu_ms=-0.5 must be in [0, 1e+09]");
    assert_string_equal(refused("read_cpu_ms", "\"slow\"", 0), "p.json: device 'cpu': read_cpu_ms must be a number");
    assert_string_equal(refused("device_rows_spread", "-1", 0),
                        "p.json: device 'cpu': device_rows_spread=-1 must be in [0, 1e+06]");
    assert_string_equal(refused("device_row_miss_us", "-2", 0),
                        "p.json: device 'cpu': device_row_miss_us=-2 must be in [0, 1e+09]");
    assert_string_equal(refused("device_row_miss_spread", "-1", 0),
                        "p.json: device 'cpu': device_row_miss_spread=-1 must be in [0, 1e+06]");
    assert_string_equal(refused("machine_from", "3", 0), "p.json: device 'cpu': machine_from must be a non-empty string");
    assert_string_equal(refused("exchange", "5", 0), "p.json: device 'cpu': exchange: must be an object or null");
    /* a string read as 0 before; now refused as handoff_us always was */
    assert_string_equal(refused("pcie_gbps", "\"fast\"", 0), "p.json: device 'cpu': pcie_gbps must be a number");
    assert_string_equal(refused("triad_gbps", "\"fast\"", 0), "p.json: device 'cpu': triad_gbps must be a number");
    assert_string_equal(refused("threads", "\"two\"", 0),
                        "p.json: device 'cpu': threads must be an integer in [0, 1048576]");
    assert_string_equal(refused("spread", "-0.1", 1),
                        "p.json: device 'cpu': layer 1 'concat': spread=-0.1 must be in [0, 1e+06]");
    assert_string_equal(refused("spread", "\"wide\"", 1), "p.json: device 'cpu': layer 1 'concat': spread must be a number");
    /* null stays "not measured" */
    assert_string_equal(refused("spread", "null", 1), "");
    assert_string_equal(refused("pcie_gbps", "null", 0), "");
    assert_string_equal(refused("handoff_us", "null", 0), "");
    assert_string_equal(refused("exchange", "null", 0), "");
}

static void test_set_refuses_a_device_twice(void **state)
{
    (void)state;
    hps_error err;
    char *text;
    size_t len;
    assert_int_equal(hps_json_read(TINY, &text, &len, &err), 0);
    hps_profiles *ps = hps_profiles_new();
    assert_int_equal(hps_profiles_add(ps, "tiny.json", text, len, &err), 0);
    assert_int_equal(hps_profiles_add(ps, "again.json", text, len, &err), -1);
    assert_string_equal(err.msg, "again.json: device 'cpu' is also in tiny.json");
    const hps_profile *in;
    assert_non_null(hps_profiles_find(ps, "cpu", &in));
    assert_string_equal(in->name, "tiny.json");
    assert_int_equal(hps_profiles_count(ps), 1);
    assert_int_equal(strncmp(hps_profiles_digest(ps, 0), "sha256:", 7), 0);
    hps_profiles_free(ps);
    free(text);
}

/* tiny.json's devices replaced by one the writer wrote: 5 layers, a
 * batch_scaling, an exchange, rates not measured (null). */
static void test_reads_what_the_writer_writes(void **state)
{
    (void)state;
    hps_error err;
    json_t *doc;
    assert_int_equal(hps_json_load(TINY, &doc, &err), 0);
    int units[2] = {1, 2};
    double ms[2] = {4, 2.5}, full[2] = {4, 2.5}, half[2] = {2.5, 1.5}, fixed[2] = {0.25, 0.2}, sec[3] = {1e-3, 3e-3, 2e-3};
    json_t *layers = json_array();
    for (int l = 0; l < 5; l++) {
        hps_profile_layer_out L = {.index = l, .name = "fc", .type = "fc", .source = "measured",
                                   .forward_ms = hps_profile_timing_of(sec, 3),
                                   .backward_ms = hps_profile_timing_point(3),
                                   .cost = {.flops_fwd = 100, .bytes_in = 64},
                                   .scaling = {.n = 2, .units = units, .ms = ms, .parallel_fraction = 0.75},
                                   .batch_scaling = {.n = 2, .samples = 8, .units = units, .full_ms = full,
                                                     .half_ms = half, .fixed_fraction = fixed},
                                   .energy_j = NAN};
        json_array_append_new(layers, hps_profile_layer_json(&L));
    }
    hps_profile_device_out d = {.id = "cpu:9", .name = "a CPU", .host = "h", .source = "measured", .threads = 2,
                                .sgemm_gflops = 50, .triad_gbps = NAN, .gather_mrows_per_s = NAN, .handoff_us = 7,
                                .overhead_ms = hps_profile_timing_point(0.5), .step_ms = hps_profile_timing_point(9),
                                .has_read = 1, .read_ms = hps_profile_timing_point(1.5), .layers_sum_ms = 9,
                                .energy_reason = "not requested", .step_j = NAN};
    json_t *dev = hps_profile_device_json(&d, layers);
    hps_profile_exchange_out x = {.rows = 10, .bytes = 2048, .worker_ms = hps_profile_timing_point(0.25),
                                  .server_ms = hps_profile_timing_of(sec, 3)};
    hps_profile_device_set_exchange(dev, hps_profile_exchange_json(&x));
    /* the engine with its rows in device memory: 1.25 ms a step more */
    hps_profile_paired faster = {.ms = -0.25, .spread = 0.125, .pairs = 8};
    hps_profile_device_set_device_rows(dev, &faster); /* noise, never below 0 */
    assert_true(json_is_number(json_object_get(dev, "device_rows_ms")));
    assert_true(json_number_value(json_object_get(dev, "device_rows_ms")) == 0);
    hps_profile_device_set_device_rows(dev, &(hps_profile_paired){.ms = 1.25, .spread = 0.375, .pairs = 8});
    /* a cache's miss: 3.90625 us beyond rows hbm */
    hps_profile_device_set_row_miss(dev, &faster); /* noise, never below 0 */
    assert_true(json_number_value(json_object_get(dev, "device_row_miss_us")) == 0);
    hps_profile_device_set_row_miss(dev, &(hps_profile_paired){.ms = 0.00390625, .spread = 0.5, .pairs = 8});
    hps_profile_device_set_read_cpu(dev, -0.125); /* noise, never below 0 */
    assert_true(json_number_value(json_object_get(dev, "read_cpu_ms")) == 0);
    hps_profile_device_set_read_cpu(dev, 0.75);
    json_object_set_new(dev, "machine_from", json_string("machine.json"));
    json_object_set_new(doc, "devices", json_pack("[o]", dev));
    assert_true(json_is_null(json_object_get(dev, "triad_gbps")));
    assert_true(json_is_integer(json_object_get(json_object_get(dev, "step_ms"), "mad"))); /* a point: 0 */
    hps_profile *p = hps_profile_read(doc, "w.json", &err);
    json_decref(doc);
    if (!p) fail_msg("%s", err.msg);
    const hps_profile_device *r = &p->devices[0];
    assert_string_equal(r->id, "cpu:9");
    assert_false(r->is_gpu || r->estimated || r->has_step_j);
    assert_int_equal(r->threads, 2);
    assert_true(r->sgemm_gflops == 50 && r->triad_gbps == 0 && r->handoff_us == 7);
    assert_true(r->has_read && r->read_ms == 1.5 && r->overhead_ms == 0.5 && r->step_ms == 9);
    assert_true(r->device_rows_ms == 1.25 && r->device_rows_spread == 0.375);
    assert_true(r->device_row_miss_us == 3.90625 && r->device_row_miss_spread == 0.5);
    assert_true(r->read_cpu_ms == 0.75);
    assert_string_equal(r->machine_from, "machine.json");
    assert_true(r->exchange.present && r->exchange.rows == 10 && r->exchange.bytes == 2048);
    assert_true(fabs(r->exchange.server_ms - 2) < 1e-9 && r->exchange.worker_ms == 0.25);
    const hps_profile_layer *L = &r->layers[4];
    assert_true(fabs(L->forward_ms - 2) < 1e-9 && L->backward_ms == 3);
    assert_true(L->flops_forward == 100 && L->bytes_in == 64);
    assert_true(L->scaling.n == 2 && L->scaling.ms[1] == 2.5 && L->scaling.parallel_fraction == 0.75);
    assert_true(L->batch_scaling.n == 2 && L->batch_scaling.units[1] == 2 && L->batch_scaling.fixed_fraction[0] == 0.25);
    hps_profile_free(p);
}

/* A layer's spread: the interquartile range over the median, the quartiles
 * Tukey's hinges; a slow outlier moves it less than it moves the mean. */
static void test_spread(void **state)
{
    (void)state;
    double even[8] = {8, 1, 7, 2, 6, 3, 5, 4}; /* hinges 2.5 and 6.5, median 4.5 */
    assert_true(fabs(hps_profile_spread(even, 8) - 4.0 / 4.5) < 1e-12);
    double odd[5] = {10, 10, 11, 12, 100}; /* hinges 10 (of 10 10 11) and 12 (of 11 12 100) */
    assert_true(fabs(hps_profile_spread(odd, 5) - 2.0 / 11) < 1e-12);
    double flat[4] = {3, 3, 3, 3};
    assert_true(hps_profile_spread(flat, 4) == 0);
    assert_true(hps_profile_spread(odd, 3) == 0); /* too few to say */
}

/* device_rows_ms is a paired difference: the median of the pairs' b - a,
 * not the difference of the two medians, its spread the differences'
 * interquartile range over b's median, wide past the layers' bound. */
static void test_paired_difference(void **state)
{
    (void)state;
    /* a busy spell (the 3rd and 6th pairs) slows both of a pair: b - a is
     * 1 ms throughout, while the medians of a and b apart differ by 2 */
    double a[6] = {0.010, 0.010, 0.030, 0.010, 0.010, 0.030}, b[6] = {0.011, 0.011, 0.031, 0.011, 0.031, 0.031};
    hps_profile_paired p = hps_profile_paired_of(a, b, 6);
    assert_int_equal(p.pairs, 6);
    assert_true(fabs(p.ms - 1) < 1e-9);
    /* differences 1 1 1 1 21 1 ms: hinges 1 and 1: no spread */
    assert_true(fabs(p.spread) < 1e-9);
    assert_false(p.wide);
    /* differences that swing: 0, 4, 0, 4, 0, 4 ms on steps of about 10 ms */
    double c[6] = {0.010, 0.010, 0.010, 0.010, 0.010, 0.010}, d[6] = {0.010, 0.014, 0.010, 0.014, 0.010, 0.014};
    p = hps_profile_paired_of(c, d, 6);
    assert_true(fabs(p.ms - 2) < 1e-9);                 /* median of 0 0 0 4 4 4 */
    assert_true(fabs(p.spread - 0.004 / 0.012) < 1e-9); /* (4 - 0) ms over b's median 12 ms */
    assert_true(p.wide && hps_profile_spread_wide(p.spread));
    /* the same swing on steps of microseconds: the clock's noise, not wide */
    for (int i = 0; i < 6; i++) c[i] *= 1e-3, d[i] *= 1e-3;
    p = hps_profile_paired_of(c, d, 6);
    assert_true(fabs(p.spread - 0.004 / 0.012) < 1e-9 && !p.wide);
    /* a faster b is noise the caller clamps; too few pairs to say a spread */
    p = hps_profile_paired_of(b, a, 3);
    assert_true(p.ms < 0 && p.spread == 0 && !p.wide);
    assert_false(hps_profile_spread_wide(HPS_PROFILE_SPREAD_BOUND));
    assert_true(hps_profile_spread_wide(HPS_PROFILE_SPREAD_BOUND + 1e-9));
}

/* device_row_miss_us: the paired difference of a cache's step over rows
 * hbm's (its median, not the medians' difference), shared among the misses
 * a step it has beyond hbm's; its spread the difference's. */
static void test_paired_per_miss(void **state)
{
    (void)state;
    /* hbm's steps, and the cache's 2 ms longer but for one pair's 6 ms; a
     * busy spell (the 3rd pair) slows both of it */
    double hbm[5] = {0.010, 0.010, 0.030, 0.010, 0.010}, cache[5] = {0.012, 0.012, 0.032, 0.016, 0.012};
    hps_profile_paired p = hps_profile_paired_per(hbm, cache, 5, 500); /* 500 misses a step */
    assert_int_equal(p.pairs, 5);
    assert_true(fabs(p.ms - 2.0 / 500) < 1e-12); /* 4 us a miss */
    hps_profile_paired step = hps_profile_paired_of(hbm, cache, 5);
    assert_true(p.spread == step.spread && p.wide == step.wide);
    /* no misses beyond hbm's: no figure, whatever the difference */
    assert_true(hps_profile_paired_per(hbm, cache, 5, 0).ms == 0);
    assert_true(hps_profile_paired_per(hbm, cache, 5, -3).ms == 0);
}

/* --machine: the figures of the file's measured CPU device of the same
 * threads, recorded where they came from; a file without one, or without
 * a figure, is refused naming it. */
static void test_machine_figures_reused(void **state)
{
    (void)state;
    hps_error err;
    char dir[] = "/tmp/test_profile_XXXXXX", path[64];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/m.json", dir);
    json_t *doc;
    assert_int_equal(hps_json_load(TINY, &doc, &err), 0);
    json_t *d = hps_profile_doc_device(doc, 0);
    char here[256];
    hps_cpu_model_name(here, sizeof here);
    json_object_set_new(d, "name", json_string(here));
    json_object_set_new(d, "threads", json_integer(3));
    json_object_set_new(d, "sgemm_gflops", json_real(123.5));
    json_object_set_new(d, "triad_gbps", json_real(45.25));
    json_object_set_new(d, "gather_mrows_per_s", json_real(67.75));
    json_object_set_new(d, "handoff_us", json_real(8.5));
    assert_int_equal(json_dump_file(doc, path, 0), 0);
    hps_device_spec dev;
    int n;
    assert_int_equal(hps_device_parse("cpu:3", &dev, 1, &n, &err), 0);
    assert_int_equal(hps_profile_machine_load(path, &dev, 1, &err), 0);
    hps_profile_device_out out;
    char name[256], host[256];
    hps_profile_device_measured(&out, name, host, &dev, 3, 16);
    assert_true(out.sgemm_gflops == 123.5 && out.triad_gbps == 45.25 && out.gather_mrows_per_s == 67.75 &&
                out.handoff_us == 8.5);
    assert_string_equal(out.machine_from, path);
    /* another thread count: none in the file */
    assert_int_equal(hps_device_parse("cpu:5", &dev, 1, &n, &err), 0);
    assert_int_equal(hps_profile_machine_load(path, &dev, 1, &err), -1);
    assert_int_equal(err.code, HPS_EXIT_USAGE);
    assert_non_null(strstr(err.msg, "no measured CPU device of 5 threads"));
    /* a figure missing */
    json_object_set_new(d, "handoff_us", json_null());
    assert_int_equal(json_dump_file(doc, path, 0), 0);
    assert_int_equal(hps_device_parse("cpu:3", &dev, 1, &n, &err), 0);
    assert_int_equal(hps_profile_machine_load(path, &dev, 1, &err), -1);
    assert_non_null(strstr(err.msg, "device 'cpu': handoff_us is missing"));
    json_decref(doc);
    unlink(path);
    rmdir(dir);
}

/* A measured profile carries every layer's spread, and reads it back. */
static void test_measured_spread(void **state)
{
    (void)state;
    hps_error err;
    hps_model *m = hps_model_load(HPS_TESTDATA "/models/tiny.json", &err);
    if (!m) fail_msg("%s", err.msg);
    hps_device_spec dev;
    int n;
    assert_int_equal(hps_device_parse("cpu:1", &dev, 1, &n, &err), 0);
    hps_profile_opts o = hps_profile_opts_default();
    o.reps = 8, o.min_seconds = 0, o.scaling = 0;
    json_t *d = hps_profile_measure(m, &dev, &o, &err);
    if (!d) fail_msg("%s", err.msg);
    json_t *doc;
    assert_int_equal(hps_json_load(TINY, &doc, &err), 0);
    json_object_set_new(doc, "devices", json_pack("[o]", d));
    hps_profile *p = hps_profile_read(doc, "m.json", &err);
    json_decref(doc);
    if (!p) fail_msg("%s", err.msg);
    for (int l = 0; l < p->devices[0].n_layers; l++) assert_true(p->devices[0].layers[l].spread >= 0);
    hps_profile_free(p);
    hps_model_free(m);
}

/* The scaling and the half batch are each layer's own times when
 * --min-time takes more repetitions than were asked for: mlp-784's fc1
 * (38 MFLOP a step at 32 samples) against its concat (a copy of the batch).  Read with the
 * stride of the repetitions asked for, every layer took the first layer's
 * samples (bench-fidelity: a 1-thread unit of demo-ctr predicted at 11.2 ms
 * a step where it ran 36.6). */
static void test_scaling_times_each_layer(void **state)
{
    (void)state;
    hps_error err;
    hps_model *m = hps_model_load(HPS_TESTDATA "/models/mlp-784.json", &err);
    if (!m) fail_msg("%s", err.msg);
    assert_string_equal(m->layers[0].name, "concat");
    assert_string_equal(m->layers[1].name, "fc1");
    hps_device_spec dev;
    int n;
    assert_int_equal(hps_device_parse("cpu:2", &dev, 1, &n, &err), 0);
    hps_profile_opts o = hps_profile_opts_default();
    o.batch = 32, o.reps = 3, o.min_seconds = 0.3; /* a step takes ms: many more than 3 */
    json_t *d = hps_profile_measure(m, &dev, &o, &err);
    if (!d) fail_msg("%s", err.msg);
    json_t *layers = json_object_get(d, "layers");
    json_t *cat = json_array_get(layers, 0), *fc1 = json_array_get(layers, 1);
    assert_true(json_integer_value(json_object_get(d, "repetitions")) > 2 * o.reps);
    for (int k = 0; k < 2; k++) {
        double c = json_real_value(json_array_get(json_object_get(json_object_get(cat, "scaling"), "ms"), k));
        double f = json_real_value(json_array_get(json_object_get(json_object_get(fc1, "scaling"), "ms"), k));
        assert_true(c > 0 && f > 4 * c);
        json_t *ch = json_array_get(json_object_get(json_object_get(cat, "batch_scaling"), "ms"), k);
        json_t *fh = json_array_get(json_object_get(json_object_get(fc1, "batch_scaling"), "ms"), k);
        double c2 = json_real_value(json_array_get(ch, 1)), f2 = json_real_value(json_array_get(fh, 1));
        assert_true(c2 > 0 && f2 > 4 * c2);
        /* the half batch's own times, not the whole's: fc1 on 16 samples
         * takes less than on 32 (the two swapped would read it more) */
        assert_true(f2 < json_real_value(json_array_get(fh, 0)));
    }
    json_decref(d);
    hps_model_free(m);
}

/* A pace that drifts from 1 to 1.6 over a measurement: each turn of a
 * setting records `per` samples of its base time at the pace of that
 * moment (the call's place in the measurement). */
#define DRIFT_PER 5
typedef struct {
    double base[2], got[2][64];
    int n_got[2], calls, total, order[16];
} drift;
_Static_assert(2 * HPS_PROFILE_ROUNDS <= 16 && HPS_PROFILE_ROUNDS * DRIFT_PER <= 64, "drift holds a measurement");

static void drift_turn(void *ctx, int k, int round)
{
    drift *d = ctx;
    (void)round;
    d->order[d->calls] = k;
    for (int i = 0; i < DRIFT_PER; i++) {
        double at = (d->calls * DRIFT_PER + i + 0.5) / (d->total * DRIFT_PER);
        d->got[k][d->n_got[k]++] = d->base[k] * (1 + 0.6 * at);
    }
    d->calls++;
}

/* The error of the ratio of setting 1's median to setting 0's, measured in
 * `rounds` rounds, against their true ratio. */
static double drift_ratio_error(int rounds)
{
    drift d = {.base = {2.0, 1.2}, .total = 2 * rounds};
    hps_profile_take_turns(2, rounds, drift_turn, &d);
    assert_int_equal(d.calls, 2 * rounds);
    for (int i = 0; i < d.calls; i++) assert_int_equal(d.order[i], i % 2); /* turn by turn */
    double r = hps_median(d.got[1], d.n_got[1]) / hps_median(d.got[0], d.n_got[0]);
    return fabs(r / (d.base[1] / d.base[0]) - 1);
}

/* The scaling's thread counts take turns, so a drift of the machine's pace
 * over the profile falls on each alike: their ratio, which sizes a 1-thread
 * unit against a 2-thread one, holds within 8% under a drift of 60%, where
 * one count after the other read 20% and more of it as a difference
 * (bench-fidelity: the 1-thread pace moved +38% across mlp-784's profile,
 * the 2-thread one -4.5%). */
static void test_settings_take_turns(void **state)
{
    (void)state;
    assert_int_equal(hps_profile_rounds(4, 0.5), HPS_PROFILE_ROUNDS);
    assert_int_equal(hps_profile_rounds(4, 0), 1); /* --min-time 0: the repetitions as asked */
    assert_int_equal(hps_profile_rounds(1, 0.5), 1); /* one setting: nothing to take turns with */
    assert_true(drift_ratio_error(1) > 0.20);
    assert_true(drift_ratio_error(HPS_PROFILE_ROUNDS) < 0.08);
}

/* ---- the CPU device model (hps-profile(1), ESTIMATES) ---- */

/* A sheet's text in a temporary file named *.json (the caller unlinks it). */
static void write_sheet(char *path, const char *text)
{
    strcpy(path, "/tmp/hps-sheet-XXXXXX.json");
    int fd = mkstemps(path, 5);
    assert_true(fd >= 0);
    FILE *f = fdopen(fd, "w");
    fputs(text, f);
    fclose(f);
}

/* A machine's own rates predict its measured times exactly: every layer of
 * the tiny fixture, both passes. */
static void test_cpu_model_same_machine_is_exact(void **state)
{
    (void)state;
    hps_error err;
    hps_profile *p = hps_profile_load(TINY, &err);
    if (!p) fail_msg("%s", err.msg);
    const hps_profile_device *d = &p->devices[0];
    hps_cpu_rates r = {d->sgemm_gflops, d->triad_gbps, 2.5};
    for (int l = 0; l < d->n_layers; l++) {
        assert_true(fabs(hps_cpu_pass_ms(&d->layers[l], 0, &r, &r) - d->layers[l].forward_ms) < 1e-12);
        assert_true(fabs(hps_cpu_pass_ms(&d->layers[l], 1, &r, &r) - d->layers[l].backward_ms) < 1e-12);
    }
    hps_profile_free(p);
}

/* The bound scales by its rate alone, the latency by the clock alone. */
static void test_cpu_model_ratios(void **state)
{
    (void)state;
    /* an embedding moving 20 MB forward: 2 ms at 10 GB/s, measured at its bound */
    hps_profile_layer emb = {.name = "emb", .type = "embedding", .forward_ms = 2, .backward_ms = 4,
                             .bytes_in = 5e6, .bytes_out = 5e6, .sparse_bytes = 10e6};
    /* an fc of 1 GFLOP forward: 10 ms at 100 GFLOP/s, measured 3 ms above its bound */
    hps_profile_layer fc = {.name = "fc", .type = "fc", .forward_ms = 13, .backward_ms = 20,
                            .flops_forward = 1e9, .flops_backward = 2e9, .bytes_in = 1e3, .bytes_out = 1e3};
    hps_cpu_rates here = {100, 10, 2}, more_bw = {100, 20, 2}, more_flops = {200, 10, 2}, faster = {100, 10, 4};
    assert_true(fabs(hps_cpu_pass_ms(&emb, 0, &here, &more_bw) - 1) < 1e-12);    /* twice the bandwidth: half */
    assert_true(fabs(hps_cpu_pass_ms(&emb, 1, &here, &more_bw) - 2) < 1e-12);
    assert_true(fabs(hps_cpu_pass_ms(&emb, 0, &here, &more_flops) - 2) < 1e-12); /* FLOPs do not help it */
    assert_true(fabs(hps_cpu_pass_ms(&fc, 0, &here, &more_flops) - 8) < 1e-12);  /* 10 / 2 + 3 */
    assert_true(fabs(hps_cpu_pass_ms(&fc, 0, &here, &more_bw) - 13) < 1e-12);    /* bandwidth does not */
    assert_true(fabs(hps_cpu_pass_ms(&fc, 0, &here, &faster) - 11.5) < 1e-12);   /* 10 + 3 / 2 */
    assert_true(fabs(hps_cpu_pass_ms(&fc, 1, &here, &more_flops) - 10) < 1e-12); /* all bound: halved */
    /* faster than its bound (cached): all of it scales by the rate */
    hps_profile_layer cached = emb;
    cached.forward_ms = 1;
    assert_true(fabs(hps_cpu_pass_ms(&cached, 0, &here, &more_bw) - 0.5) < 1e-12);
    assert_string_equal(hps_cpu_layer_bound(&fc), "gemm");
    assert_string_equal(hps_cpu_layer_bound(&emb), "bandwidth");
}

/* --estimate with a sheet of the measured device's own rates gives back its
 * measured times, on its threads. */
static void test_estimate_from_own_sheet(void **state)
{
    (void)state;
    char sheet[64];
    write_sheet(sheet, "{\"name\": \"cpu-self\", \"kind\": \"cpu\", \"cores\": 2, \"threads\": 2, "
                       "\"peak_gflops\": 50, \"mem_gbps\": 15, \"attainable\": 1}");
    hps_error err;
    json_t *doc;
    assert_int_equal(hps_json_load(TINY, &doc, &err), 0);
    int rc = hps_profile_estimate(doc, sheet, &err);
    unlink(sheet);
    if (rc) fail_msg("%s", err.msg);
    hps_profile *p = hps_profile_read(doc, "tiny", &err);
    if (!p) fail_msg("%s", err.msg);
    const hps_profile_device *d = &p->devices[0], *e = hps_profile_device_find(p, "cpu-self");
    assert_non_null(e);
    assert_true(e->estimated && !e->is_gpu);
    assert_int_equal(e->threads, 2);
    assert_true(d->sgemm_gflops == 50 && d->triad_gbps == 15); /* the sheet's rates are the fixture's */
    for (int l = 0; l < d->n_layers; l++) {
        assert_true(fabs(e->layers[l].forward_ms - d->layers[l].forward_ms) < 1e-9);
        assert_true(fabs(e->layers[l].backward_ms - d->layers[l].backward_ms) < 1e-9);
    }
    hps_profile_free(p);
    json_decref(doc);
}

/* A published sheet: the peak from cores x clock x FLOPs a cycle, rated at
 * the default attainable share, on its threads, with its clock. */
static void test_estimate_published_sheet(void **state)
{
    (void)state;
    hps_error err;
    json_t *doc;
    assert_int_equal(hps_json_load(TINY, &doc, &err), 0);
    json_t *devices = hps_profile_doc_devices(doc); /* the fixture's own cpu-c5 out, the cpu first */
    for (size_t i = json_array_size(devices); i-- > 1;)
        if (strcmp(json_string_value(json_object_get(json_array_get(devices, i), "id")), "cpu-c5") == 0)
            json_array_remove(devices, i);
    if (hps_profile_estimate(doc, HPS_TESTDATA "/devices/cpu-c5.json", &err)) fail_msg("%s", err.msg);
    hps_profile *p = hps_profile_read(doc, "tiny", &err);
    const hps_profile_device *e = hps_profile_device_find(p, "cpu-c5");
    assert_non_null(e);
    assert_true(fabs(e->sgemm_gflops - 8 * 3.6 * 64 * 0.7) < 1e-6);
    assert_true(fabs(e->triad_gbps - 46.9 * 0.7) < 1e-6);
    assert_int_equal(e->threads, 16);
    assert_true(e->clock_ghz == 3.6);
    assert_int_equal(e->layers[0].scaling.n, 1);
    assert_int_equal(e->layers[0].scaling.units[0], 16);
    hps_profile_free(p);
    json_decref(doc);
}

static const char *sheet_refused(const char *text)
{
    static hps_error err;
    err.msg[0] = '\0';
    if (hps_spec_sheet_parse("s.json", text, strlen(text), &err) == 0) return "";
    return err.msg;
}

static void test_sheet_refuses(void **state)
{
    (void)state;
    assert_string_equal(sheet_refused("{\"name\": \"g\", \"kind\": \"gpu\", \"peak_gflops\": 1, \"mem_gbps\": 1, "
                                      "\"cores\": 4}"),
                        "s.json: cores is a CPU's field (this sheet's kind is gpu)");
    assert_string_equal(sheet_refused("{\"name\": \"c\", \"kind\": \"cpu\", \"cores\": 4, \"mem_gbps\": 1}"),
                        "s.json: peak_gflops is missing (give it, or clock_ghz and vector_width or "
                        "flops_per_cycle)");
    assert_string_equal(sheet_refused("{\"name\": \"c\", \"kind\": \"cpu\", \"cores\": 4.5, \"peak_gflops\": 1, "
                                      "\"mem_gbps\": 1}"),
                        "s.json: cores and threads must be whole numbers");
    assert_string_equal(sheet_refused("{\"name\": \"c\", \"kind\": \"cpu\", \"peak_gflops\": 1, \"mem_gbps\": 1}"),
                        "s.json: missing field 'cores'");
    assert_string_equal(sheet_refused("{\"name\": \"c\", \"kind\": \"cpu\", \"cores\": 4, \"clock_ghz\": 3, "
                                      "\"vector_width\": 8, \"mem_gbps\": 1}"),
                        "");
}

/* --check-estimate on one device: its own sheet's rates predict it at 0%
 * error; a sheet of other threads leaves nothing to check. */
static void test_check_estimate(void **state)
{
    (void)state;
    char sheet[64], *text = NULL;
    size_t len = 0;
    write_sheet(sheet, "{\"name\": \"cpu-self\", \"kind\": \"cpu\", \"cores\": 2, \"peak_gflops\": 50, "
                       "\"mem_gbps\": 15, \"attainable\": 1}");
    hps_error err;
    hps_profile *p = hps_profile_load(TINY, &err);
    FILE *out = open_memstream(&text, &len);
    int rc = hps_profile_check_estimate(p, sheet, out, &err);
    fclose(out);
    unlink(sheet);
    if (rc) fail_msg("%s", err.msg);
    assert_non_null(strstr(text, "cpu (2 threads) from cpu (2 threads) at the rates of cpu-self"));
    assert_non_null(strstr(text, "largest layer error 0.0%"));
    free(text);
    write_sheet(sheet, "{\"name\": \"c\", \"kind\": \"cpu\", \"cores\": 16, \"peak_gflops\": 50, \"mem_gbps\": 15}");
    out = open_memstream(&text, &len);
    rc = hps_profile_check_estimate(p, sheet, out, &err);
    fclose(out);
    unlink(sheet);
    free(text);
    assert_int_equal(rc, -1);
    assert_non_null(strstr(err.msg, "nothing to check"));
    hps_profile_free(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reads_testdata),
        cmocka_unit_test(test_host_link_of_the_cpu_backend),
        cmocka_unit_test(test_refuses_each_field_once),
        cmocka_unit_test(test_set_refuses_a_device_twice),
        cmocka_unit_test(test_reads_what_the_writer_writes),
        cmocka_unit_test(test_spread),
        cmocka_unit_test(test_measured_spread),
        cmocka_unit_test(test_paired_difference),
        cmocka_unit_test(test_paired_per_miss),
        cmocka_unit_test(test_machine_figures_reused),
        cmocka_unit_test(test_scaling_times_each_layer),
        cmocka_unit_test(test_settings_take_turns),
        cmocka_unit_test(test_cpu_model_same_machine_is_exact),
        cmocka_unit_test(test_cpu_model_ratios),
        cmocka_unit_test(test_estimate_from_own_sheet),
        cmocka_unit_test(test_estimate_published_sheet),
        cmocka_unit_test(test_sheet_refuses),
        cmocka_unit_test(test_check_estimate),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
