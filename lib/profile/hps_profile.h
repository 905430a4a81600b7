/* hps_profile: measures what each layer of a model costs on a device, and
 * reads, merges, estimates and prints profiles (format: hps-profile(5)).
 *
 * Profiles travel as jansson objects: the JSON is the data structure, so that
 * what a tool writes is exactly what the next one reads.
 */
#ifndef HPS_PROFILE_H
#define HPS_PROFILE_H

#include <jansson.h>

#include "model/hps_model.h"

#define HPS_PROFILE_VERSION 1

typedef enum { HPS_DEVICE_CPU, HPS_DEVICE_CUDA } hps_device_kind;

typedef struct hps_profile hps_profile;

typedef struct {
    char id[32];          /* "cpu", "cpu:4", "cuda:0" */
    hps_device_kind kind;
    int threads;          /* CPU threads (0: all) */
    int ordinal;          /* CUDA device */
} hps_device_spec;

typedef struct {
    int batch;            /* samples per batch (default: the model's) */
    int reps, warmup;     /* at least; warm-up goes on until steps agree */
    double min_seconds;   /* the timed steps span at least this (0: reps alone) */
    int64_t table_rows_cap;
    int energy;           /* read RAPL / NVML counters */
    int scaling;          /* time every thread count 1..N */
    uint64_t seed;
    int progress;         /* a progress line on stderr */
} hps_profile_opts;

hps_profile_opts hps_profile_opts_default(void);

/* The threads a CPU device runs on: its count, else all the machine's. */
int hps_device_threads(const hps_device_spec *dev);

/* "cpu,cpu:1,cuda:0" -> specs (at most max); errors name the bad item. */
int hps_device_parse(const char *list, hps_device_spec *specs, int max, int *n, hps_error *err);

/* One line per available device ("cpu  AMD EPYC  2 threads"), to out. */
void hps_device_list(FILE *out);

/* The relative interquartile range (q3 - q1) / median of n values, a
 * layer's "spread" in hps-profile(5); above the bound hps-profile warns
 * that the times are too wide to plan on. */
#define HPS_PROFILE_SPREAD_BOUND 0.25
/* Times that spread by less than this (ms) are the clock's and the call's
 * noise, not work: never too wide to plan on. */
#define HPS_PROFILE_SPREAD_MIN_MS 0.05
double hps_profile_spread(const double *v, int n);
/* Whether a spread is too wide to plan on (over HPS_PROFILE_SPREAD_BOUND). */
int hps_profile_spread_wide(double spread);
/* The one warning line of a figure too wide to plan on: "ID: WHAT spread
 * N% (interquartile range over OVER, RUNS runs MORE): too wide to plan on"
 * (more: "" or "; ..."). */
void hps_profile_warn_spread(const char *id, const char *what, double spread, const char *over, int runs,
                             const char *more);

/* A paired difference: probes A and B run alternately on the same batches
 * (a busy spell of the machine falls on both of a pair), ms the median of
 * the pairs' b - a (may be below 0: noise), spread the interquartile range
 * of those differences over the median of b (how far the figure may move
 * the step it is added to; 0 for fewer than 4 pairs), wide: too wide to
 * plan on (and a range of HPS_PROFILE_SPREAD_MIN_MS at least). */
typedef struct {
    double ms, spread;
    int pairs, wide;
} hps_profile_paired;
hps_profile_paired hps_profile_paired_of(const double *a_sec, const double *b_sec, int n);
/* The same difference shared among `events` a step that B does and A does
 * not (a cache's misses beyond what rows hbm fetch): ms is the median
 * difference over events, ms an event (0 where events is not above 0);
 * spread and wide as the step's difference's, which it scales. */
hps_profile_paired hps_profile_paired_per(const double *a_sec, const double *b_sec, int n, double events);

/* Measures the model on one device: a device object of hps-profile(5). */
json_t *hps_profile_measure(const hps_model *m, const hps_device_spec *dev,
                            const hps_profile_opts *o, hps_error *err);

/* ---- the reader: a profile file as structs, every field checked once ---- */

/* A layer's thread scaling: forward+backward ms at each thread count timed
 * (n 0: none timed) and the fitted parallel fraction. */
typedef struct {
    int n;
    int *units;
    double *ms;
    double parallel_fraction;
} hps_profile_scaling;

/* A layer's batch_scaling: the fixed fraction at each thread count (n 0:
 * the profile has none). */
typedef struct {
    int n;
    int *units;
    double *fixed_fraction;
} hps_profile_batch_scaling;

typedef struct {
    const char *name, *type; /* type NULL when absent */
    double forward_ms, backward_ms; /* medians */
    double flops_forward, flops_backward, bytes_in, bytes_out, param_bytes, sparse_bytes;
    double calibrated; /* the factor of all calibrations so far, 1 for none */
    double spread;     /* relative IQR of forward+backward over the runs; NAN: not recorded */
    hps_profile_scaling scaling;
    hps_profile_batch_scaling batch_scaling;
    json_t *json; /* the object read (borrowed from the document) */
} hps_profile_layer;

/* The step's exchange with a server (present 0: absent or null). */
typedef struct {
    int present;
    double rows, bytes, worker_ms, server_ms;
} hps_profile_exchange;

typedef struct {
    const char *id, *name, *source; /* name NULL when absent */
    int is_gpu, estimated, threads;
    /* 0 when absent or null */
    double sgemm_gflops, triad_gbps, gather_mrows_per_s, pcie_gbps, handoff_us;
    double clock_ghz; /* a CPU's clock (/proc/cpuinfo or its sheet); 0 when absent */
    double overhead_ms, step_ms, layers_sum_ms, read_ms;
    /* the engine's extra work a step with the model's rows in the backend's
     * memory (device_rows_ms; 0 when absent) */
    double device_rows_ms;
    double device_rows_spread; /* its spread (hps_profile_paired); NAN: not recorded */
    /* the host work of one miss of a cache beyond rows hbm (device_row_miss_us;
     * 0 when absent) and its spread (NAN: not recorded) */
    double device_row_miss_us, device_row_miss_spread;
    /* the shard reader's background thread's CPU a batch, beside the step
     * (read_cpu_ms; 0 when absent) */
    double read_cpu_ms;
    const char *machine_from;  /* the file its machine figures came from; NULL: measured */
    int has_read, has_step_j;
    double step_j;
    hps_profile_exchange exchange;
    int n_layers;
    hps_profile_layer *layers;
    json_t *json;
} hps_profile_device;

struct hps_profile {
    const char *name;              /* the file, for messages */
    const char *model_name, *digest;
    int batch, n_layers;
    int n_devices;
    hps_profile_device *devices;
    json_t *doc;                   /* the document read (a reference held) */
};

/* Reads a profile document (a new reference to doc is kept); errors name
 * the file, device, layer and field.  NULL on error. */
hps_profile *hps_profile_read(json_t *doc, const char *name, hps_error *err);
/* The same from text (stdin, fuzzing) or a file ("-" = stdin). */
hps_profile *hps_profile_parse(const char *name, const char *text, size_t len, hps_error *err);
hps_profile *hps_profile_load(const char *path, hps_error *err);
void hps_profile_free(hps_profile *p);
/* The device of that id, or NULL. */
const hps_profile_device *hps_profile_device_find(const hps_profile *p, const char *id);
/* GB/s between a gpu device and its host (hps-profile(5), pcie_gbps): the
 * profile's pcie_gbps; for a gpu device measured on CPU threads (threads,
 * triad_gbps: a CPU run as a gpu type, hps-train --cpu-fallback), whose
 * memory is the CPU backend's arena in host memory, a copy's rate:
 * triad_gbps / 2 (a copy reads and writes each byte once); 0 (not charged)
 * otherwise. */
double hps_profile_host_link_gbps(const hps_profile_device *d);

/* The profiles hps-plan reads, one per device id, each file with the
 * SHA-256 of its text (which plans record). */
typedef struct hps_profiles hps_profiles;
hps_profiles *hps_profiles_new(void);
/* Adds the devices of one profile file (its text, for the digest); a device
 * id already added from another file is an error. */
int hps_profiles_add(hps_profiles *ps, const char *name, const char *text, size_t len,
                     hps_error *err);
int hps_profiles_count(const hps_profiles *ps);
const char *hps_profiles_digest(const hps_profiles *ps, int i);
const char *hps_profiles_name(const hps_profiles *ps, int i);
/* The device of that id and the profile it is in, or NULL. */
const hps_profile_device *hps_profiles_find(const hps_profiles *ps, const char *id,
                                            const hps_profile **in);
void hps_profiles_free(hps_profiles *ps);

/* ---- the writer: structs into hps-profile(5), every field named once ---- */

/* A timing object, in ms; point: one figure, not samples (an estimate),
 * its mad written as the integer 0. */
typedef struct {
    double median, min, max, mad;
    int point;
} hps_profile_timing;
/* The timing of n samples in seconds. */
hps_profile_timing hps_profile_timing_of(const double *sec, int n);
hps_profile_timing hps_profile_timing_point(double ms);
json_t *hps_profile_timing_json(const hps_profile_timing *t);

/* A layer's batch_scaling as written: measured (samples, the batch), the
 * times on it and its half (full_ms, half_ms) at each of units; estimated
 * (samples 0), the fractions alone.  n 0: none. */
typedef struct {
    int n, samples;
    const int *units;
    const double *full_ms, *half_ms, *fixed_fraction;
} hps_profile_batch_out;

/* A layer as written; energy_j NAN: not read (null). */
typedef struct {
    int index;
    const char *name, *type, *source;
    hps_profile_timing forward_ms, backward_ms;
    hps_layer_cost cost;
    hps_profile_scaling scaling;
    hps_profile_batch_out batch_scaling;
    double energy_j;
} hps_profile_layer_out;

/* A device as written, its layers apart.  calibrated_on NULL: measured,
 * with blas_core and handoff_us; rates NAN: not benchmarked (null);
 * pcie_gbps written when > 0, read_ms with has_read; the energy's source,
 * step_j and reason NULL / NAN for null. */
typedef struct {
    const char *id, *name, *host, *source, *calibrated_on, *blas_core;
    const char *machine_from; /* written when set: the machine's figures came from that file */
    int is_gpu, threads, probe, has_read;
    double memory_bytes, sgemm_gflops, triad_gbps, pcie_gbps, gather_mrows_per_s, handoff_us;
    double clock_ghz; /* written when > 0 */
    hps_profile_timing overhead_ms, read_ms, step_ms;
    double layers_sum_ms;
    const char *energy_source, *energy_reason;
    double step_j;
} hps_profile_device_out;

/* The step's exchange with a server, as hps_dist_probe_exchange times it. */
typedef struct {
    double rows, bytes;
    hps_profile_timing worker_ms, server_ms;
} hps_profile_exchange_out;

json_t *hps_profile_scaling_json(const hps_profile_scaling *s);
json_t *hps_profile_batch_scaling_json(const hps_profile_batch_out *b);
/* A layer object's batch_scaling fractions as they are written there (an
 * estimate keeps its reference's, so odd inputs stay byte-identical);
 * {units: [1], fixed_fraction: [0]} when it has none. */
json_t *hps_profile_batch_scaling_copy(json_t *layer);
json_t *hps_profile_layer_json(const hps_profile_layer_out *L);
/* Sets an estimate's figures over a copy of its reference's layer object
 * (batch_scaling stolen). */
void hps_profile_layer_set_estimate(json_t *layer, const hps_profile_layer_out *L, json_t *batch_scaling);
/* A device object around layers (stolen). */
json_t *hps_profile_device_json(const hps_profile_device_out *d, json_t *layers);
json_t *hps_profile_exchange_json(const hps_profile_exchange_out *x);

/* The top-level document around a devices array (stolen). */
json_t *hps_profile_doc(const hps_model *m, const hps_profile_opts *o, json_t *devices);
/* A document's devices array; its device i (one a tool just made). */
json_t *hps_profile_doc_devices(json_t *doc);
json_t *hps_profile_doc_device(json_t *doc, int i);
/* Records the files a merged document came from. */
void hps_profile_doc_set_merged_from(json_t *doc, const char **names, int n);

/* Adds to a measured CPU device of a profile what hps-train's engine timed
 * (hps_trainer_probe's document): its overhead_ms, where it came from, and
 * with data its read_ms. */
void hps_profile_device_set_engine(json_t *device, json_t *probe_doc, int on_data);
/* Sets a device's device_rows_ms and device_rows_spread from the paired
 * steps with host tables (a) and with the rows in the backend's memory
 * (b, rows hbm) on the same batches; device_rows_ms never below 0. */
void hps_profile_device_set_device_rows(json_t *device, const hps_profile_paired *p);
/* Sets a device's device_row_miss_us and device_row_miss_spread from
 * hps_profile_paired_per over the steps with rows hbm (a) and with a cache
 * (b) on the same batches; never below 0. */
void hps_profile_device_set_row_miss(json_t *device, const hps_profile_paired *p);
/* Sets a device's read_cpu_ms (hps_profile_read_cpu_ms). */
void hps_profile_device_set_read_cpu(json_t *device, double ms);
/* The CPU milliseconds the shard reader's background thread spends a batch
 * of B samples (decoding and checking blocks) on the shard directory data,
 * timed as the caller's CPU with the blocks decoded in it less its CPU
 * with them decoded beside it, over at least min_batches batches and 8 of the
 * first training shard's blocks (profile_decode.c). */
int hps_profile_read_cpu_ms(const char *data, int B, int min_batches, double *ms, hps_error *err);
/* Sets a device's exchange record (stolen; hps_dist_probe_exchange). */
void hps_profile_device_set_exchange(json_t *device, json_t *exchange);
/* Multiplies a layer's timings and scaling curve by factor in its object,
 * recording "calibrated" (hps_profile_scale_layers). */
void hps_profile_layer_set_calibrated(const hps_profile_layer *L, double factor, const char *run);

/* Adds an estimated device from a spec sheet (hps-profile(1), ESTIMATES),
 * calibrated against the first measured device of doc. */
int hps_profile_estimate(json_t *doc, const char *spec_path, hps_error *err);

/* Checks a spec sheet's text as --estimate reads it (the fuzz target). */
int hps_spec_sheet_parse(const char *name, const char *text, size_t len, hps_error *err);

/* The CPU device model (hps-profile(1), ESTIMATES): a CPU's rates, its
 * measured or attainable GEMM rate, bandwidth and clock (0: unknown). */
typedef struct {
    double gflops, gbps, clock_ghz;
} hps_cpu_rates;
/* A layer's pass (backward 0/1) measured on a CPU of rates from, on one of
 * rates to: the measured time times the ratio of the two modelled times,
 * its bound (GEMM: FLOPs / gflops; else bytes / gbps) by the rates, the
 * rest (latency) by the clocks. */
double hps_cpu_pass_ms(const hps_profile_layer *L, int backward, const hps_cpu_rates *from, const hps_cpu_rates *to);
/* "gemm" or "bandwidth": which rate bounds a layer in that model. */
const char *hps_cpu_layer_bound(const hps_profile_layer *L);
/* --check-estimate: the model predicts the measured CPU devices of p, from
 * the one with the fewest threads, to the sheet's rates (the device of the
 * sheet's threads) or their own measured rates (another thread count); a
 * table of each layer's error to out. */
int hps_profile_check_estimate(const hps_profile *p, const char *sheet_path, FILE *out, hps_error *err);
/* --describe-cpu: this machine's spec sheet, from /proc/cpuinfo, sysconf
 * and its measured sgemm and triad at threads; the sheet's name is name. */
json_t *hps_cpu_describe(const char *name, int threads);
/* The CPU's clock in GHz from /proc/cpuinfo (the fastest core), 0 unknown. */
double hps_cpu_clock_ghz(void);

/* The spec sheet whose "name" is device, for the hint of a device no profile
 * has: searched in devices/ beside the directory of near (a cluster file:
 * testdata/clusters/x.json -> testdata/devices/), devices/ in near's own
 * directory, then ./devices and ./testdata/devices.  A malloc'd path, or
 * NULL when none names it. */
char *hps_spec_sheet_find(const char *device, const char *near);

/* Combines profiles of the same model and batch; a device id present in two
 * inputs is a conflict.  Returns a new document. */
json_t *hps_profile_merge(json_t **docs, const char **names, int n, hps_error *err);

/* --calibrate (hps-plan(1)): multiplies layers [first, end) of device_id,
 * their forward and backward timings and their thread-scaling curve, by
 * factor; each records "calibrated": {"factor" (all calibrations so far
 * multiplied), "run"}.  -1 when doc has no such device or layers. */
int hps_profile_scale_layers(json_t *doc, const char *device_id, int first, int end, double factor,
                             const char *run);
/* The profile for people: one table per device. */
void hps_profile_print_table(const hps_profile *p, FILE *out);

/* Device micro-benchmarks, shared with the estimate's calibration. */
double hps_bench_sgemm_gflops(int n, int reps);
double hps_bench_triad_gbps(size_t n, int reps);
double hps_bench_gather_mrows(int dim, int64_t rows, int reps);
/* Microseconds for one thread to wake another and hand it work (median of
 * reps runs of `rounds` round trips). */
double hps_bench_handoff_us(int rounds, int reps);
/* The CPU's model name from /proc/cpuinfo ("unknown CPU" otherwise). */
void hps_cpu_model_name(char *out, size_t n);
double hps_host_memory_bytes(void);

/* Energy counters: a reader for the CPU package (RAPL via powercap) or an
 * NVIDIA GPU (NVML, loaded at run time); NULL with a reason when unreadable. */
typedef struct hps_energy hps_energy;
hps_energy *hps_energy_open(const hps_device_spec *dev, char *reason, size_t reason_len);
double hps_energy_joules(hps_energy *e); /* monotonic total since open */
const char *hps_energy_source(const hps_energy *e);
void hps_energy_close(hps_energy *e);

/* The machine's figures (sgemm_gflops, triad_gbps, gather_mrows_per_s,
 * handoff_us) of a CPU device of `threads` threads from the measured CPU
 * device d of a profile (named from, recorded as machine_from) instead of
 * measuring them in this process (hps-profile --machine). */
void hps_profile_machine_use(const hps_profile_device *d, const char *from);
/* --machine FILE: the machine's figures for each CPU device of devs from
 * the profile at path (its measured CPU device of the same threads; errors
 * name the file, the device and the field; exit 2); one warning when its
 * CPU is not this machine's. */
int hps_profile_machine_load(const char *path, const hps_device_spec *devs, int n, hps_error *err);

/* A measured device's figures besides its timings: its name and host (into
 * name and host, 256 bytes each), memory and (a CPU) the micro-benchmarks;
 * shared with hps-train's probe. */
void hps_profile_device_measured(hps_profile_device_out *d, char *name, char *host, const hps_device_spec *dev,
                                 int threads, int embed_dim);
/* A measured layer l: its timings from its forward and backward samples
 * (seconds, reps of them) and its costs at batch; no scaling, no energy. */
void hps_profile_layer_measured(hps_profile_layer_out *L, const hps_model *m, int l, int batch,
                                const double *fwd_sec, const double *bwd_sec, int reps);

/* Settings measured in turns (hps-profile(1), --min-time): rounds in which
 * each of n settings (the scaling's thread counts, on the whole batch and
 * on half of it) takes one turn in order, so that a drift of the machine's
 * pace over the seconds they take falls on every setting alike and their
 * ratios, which size units of other thread counts and batches, are the
 * machine's rather than its minute's.  hps_profile_rounds: how many rounds
 * (1 without --min-time: the repetitions alone, as they were asked for);
 * hps_profile_take_turns calls turn(ctx, k, round) for each round, k = 0..n-1. */
#define HPS_PROFILE_ROUNDS 4
int hps_profile_rounds(int n, double min_seconds);
void hps_profile_take_turns(int n, int rounds, void (*turn)(void *ctx, int k, int round), void *ctx);

/* The share f of a layer's time on B samples that fewer samples do not
 * shorten, from its times on B and B / 2 through t(b) = t(B) (f + (1 - f)
 * b / B), clamped to [0, 1] (hps-profile(5), batch_scaling). */
double hps_fixed_fraction(double full_ms, double half_ms);
/* Fits a in t(k) = t1 ((1 - a) + a / k) by least squares, clamped to [0, 1]. */
double hps_fit_parallel_fraction(const int *units, const double *ms, int n);

/* Whether a matrix-product layer's thread scaling looks like noise from a busy
 * machine: *no_gain when its times at 1..units threads (ms) fit a fraction of
 * 0, *spread when its forward times (seconds, reps of them) have a MAD above
 * HPS_SCALING_SPREAD_BOUND of their median.  Such a product always gains
 * from a second thread on an idle machine. */
#define HPS_SCALING_SPREAD_BOUND 0.2
void hps_scaling_suspect(const double *ms, int units, const double *fwd_sec, int reps,
                         int *no_gain, int *spread);

#endif
