/* hps-profile: measure what each layer of a model costs on each device. */
#include <getopt.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/hps_cli.h"
#include "core/hps_blas.h"
#include "core/hps_io.h"
#include "core/hps_json.h"
#include "dist/hps_dist.h"
#include "plan/hps_plan_file.h"
#include "profile/hps_profile.h"
#include "train/hps_train.h"

#define MAX_DEVICES 32
#define MAX_ESTIMATES 32

static const char usage[] =
    "usage: hps-profile -m MODEL [options]\n"
    "       hps-profile --merge PROFILE... [-o FILE]\n"
    "       hps-profile --list-devices\n"
    "       hps-profile --describe-cpu [-D cpu:N] [-o FILE]\n"
    "       hps-profile show PROFILE [-f json|table] [-o FILE]\n"
    "\n"
    "Measures what every layer of MODEL costs on each device and prints a profile\n"
    "(JSON, hps-profile(5)) for hps-plan.\n"
    "\n"
    "  -m, --model FILE        the model (hps-model(5)); - reads stdin\n"
    "  -D, --devices LIST      cpu, cpu:N (N threads), cuda:K, comma-separated [cpu]\n"
    "  -b, --batch N           samples per batch [the model's batch]\n"
    "  -r, --reps N            timed repetitions, at least [10]\n"
    "      --warmup N          untimed repetitions first, at least [2]\n"
    "      --min-time SEC      time steps for at least SEC seconds a device [0.5]\n"
    "      --table-rows N      most rows per embedding slot while profiling [1048576]\n"
    "      --no-scaling        skip timing every thread count from 1 to N\n"
    "      --seed S            seed of the synthetic batch and weights [1]\n"
    "      --data DIR          time the engine and the read on these shards, as\n"
    "                          hps-train runs them [synthetic batches, no read]\n"
    "      --machine FILE      take the machine's figures (sgemm, triad, gather,\n"
    "                          handoff) from FILE, an earlier profile of this\n"
    "                          machine, instead of measuring them [measured]\n"
    "      --energy            read energy counters (RAPL, NVML) where readable\n"
    "      --estimate SPEC     add a device estimated from a spec sheet (repeatable)\n"
    "      --check-estimate SPEC  print how the CPU model predicts the measured CPU\n"
    "                          devices from SPEC (this machine's sheet) instead\n"
    "      --describe-cpu      write this machine's CPU spec sheet, then exit\n"
    "      --merge             combine the profiles given as arguments\n"
    "      --list-devices      list the devices this machine has, then exit\n"
    "  -f, --format FMT        json or table [json]\n"
    "  -o, --output FILE       write to FILE (atomically) instead of stdout\n"
    "  -q, --quiet             errors only (no progress or warnings)\n"
    "  -v, --verbose           more progress\n"
    "  -h, --help              show this help, then exit\n"
    "  -V, --version           show the version, then exit\n";

enum { OPT_TABLE_ROWS = 256, OPT_WARMUP, OPT_NO_SCALING, OPT_SEED, OPT_ENERGY, OPT_ESTIMATE, OPT_MERGE,
       OPT_LIST_DEVICES, OPT_DATA, OPT_MIN_TIME, OPT_CHECK_ESTIMATE, OPT_DESCRIBE_CPU, OPT_MACHINE };

static const struct option long_options[] = {
    {"model", required_argument, NULL, 'm'},
    {"devices", required_argument, NULL, 'D'},
    {"batch", required_argument, NULL, 'b'},
    {"reps", required_argument, NULL, 'r'},
    {"warmup", required_argument, NULL, OPT_WARMUP},
    {"min-time", required_argument, NULL, OPT_MIN_TIME},
    {"table-rows", required_argument, NULL, OPT_TABLE_ROWS},
    {"no-scaling", no_argument, NULL, OPT_NO_SCALING},
    {"seed", required_argument, NULL, OPT_SEED},
    {"data", required_argument, NULL, OPT_DATA},
    {"machine", required_argument, NULL, OPT_MACHINE},
    {"energy", no_argument, NULL, OPT_ENERGY},
    {"estimate", required_argument, NULL, OPT_ESTIMATE},
    {"check-estimate", required_argument, NULL, OPT_CHECK_ESTIMATE},
    {"describe-cpu", no_argument, NULL, OPT_DESCRIBE_CPU},
    {"merge", no_argument, NULL, OPT_MERGE},
    {"list-devices", no_argument, NULL, OPT_LIST_DEVICES},
    {"format", required_argument, NULL, 'f'},
    {"output", required_argument, NULL, 'o'},
    {"quiet", no_argument, NULL, 'q'},
    {"verbose", no_argument, NULL, 'v'},
    {"help", no_argument, NULL, 'h'},
    {"version", no_argument, NULL, 'V'},
    {NULL, 0, NULL, 0},
};

typedef struct {
    const char *model, *devices, *output, *data, *check, *machine;
    hps_profile_opts opts;
    const char *estimates[MAX_ESTIMATES];
    int n_estimates, merge, list_devices, table, show, describe_cpu;
} args;

static int parse_count(const char *opt, const char *s, long min, long max, long *out)
{
    *out = hps_cli_count(opt, s, min, max);
    return 0;
}

/* Returns -1 to go on, or the exit code. */
static int parse_args(int argc, char **argv, args *a)
{
    static const char *const formats[] = {"json", "table", NULL};
    long v;
    int c;
    while ((c = hps_cli_getopt(argc, argv, "m:D:d:b:r:w:f:o:qvhV", long_options)) != -1) {
        switch (c) {
        case 'm': a->model = optarg; break;
        case 'd': hps_cli_deprecated_letter('d', "devices", 'D'); /* fallthrough */
        case 'D': a->devices = optarg; break;
        case 'b':
            if (parse_count("--batch", optarg, 1, HPS_MAX_BATCH, &v)) return HPS_EXIT_USAGE;
            a->opts.batch = (int)v;
            break;
        case 'r':
            if (parse_count("--reps", optarg, 1, 100000, &v)) return HPS_EXIT_USAGE;
            a->opts.reps = (int)v;
            break;
        case 'w': hps_cli_deprecated_letter('w', "warmup", 0); /* fallthrough */
        case OPT_WARMUP:
            if (parse_count("--warmup", optarg, 0, 100000, &v)) return HPS_EXIT_USAGE;
            a->opts.warmup = (int)v;
            break;
        case OPT_MIN_TIME: a->opts.min_seconds = hps_cli_double("--min-time", optarg, 0, 3600); break;
        case OPT_TABLE_ROWS:
            if (parse_count("--table-rows", optarg, 1, 1L << 40, &v)) return HPS_EXIT_USAGE;
            a->opts.table_rows_cap = v;
            break;
        case OPT_NO_SCALING: a->opts.scaling = 0; break;
        case OPT_SEED:
            if (parse_count("--seed", optarg, 0, LONG_MAX, &v)) return HPS_EXIT_USAGE;
            a->opts.seed = (uint64_t)v;
            break;
        case OPT_ENERGY: a->opts.energy = 1; break;
        case OPT_ESTIMATE:
            if (a->n_estimates == MAX_ESTIMATES) hps_usage_error("--estimate: at most %d", MAX_ESTIMATES);
            a->estimates[a->n_estimates++] = optarg;
            break;
        case OPT_CHECK_ESTIMATE: a->check = optarg; break;
        case OPT_DESCRIBE_CPU: a->describe_cpu = 1; break;
        case OPT_MERGE: a->merge = 1; break;
        case OPT_LIST_DEVICES: a->list_devices = 1; break;
        case 'f': a->table = hps_cli_choice("--format", optarg, formats) == 1; break;
        case 'o': a->output = optarg; break;
        case OPT_DATA: a->data = optarg; break;
        case OPT_MACHINE: a->machine = optarg; break;
        case 'q': hps_cli_quiet(); break;
        case 'v': hps_cli_verbose(); break;
        case 'h': fputs(usage, stdout); return HPS_EXIT_OK;
        case 'V': hps_cli_version(stdout); return HPS_EXIT_OK;
        }
    }
    if (a->check && a->table) hps_usage_error("--check-estimate prints a table already: drop --format");
    if (a->show) {
        if (optind >= argc) hps_usage_error("show: missing PROFILE");
        if (optind + 1 < argc) hps_usage_error("show: unexpected argument '%s'", argv[optind + 1]);
        return -1;
    }
    if (!a->merge && optind < argc) hps_usage_error("unexpected argument '%s'", argv[optind]);
    if (a->merge && optind == argc) hps_usage_error("--merge needs profiles");
    if (a->machine && !a->model) hps_usage_error("--machine takes the figures of a profile that measures a model (-m MODEL)");
    if (a->describe_cpu && (a->model || a->merge || a->check || a->n_estimates))
        hps_usage_error("--describe-cpu takes no model, profile or spec (it describes this machine)");
    if (!a->merge && !a->list_devices && !a->describe_cpu && !a->model)
        hps_usage_error("no model given (use -m MODEL)");
    return -1;
}

static int emit(json_t *doc, const args *a, hps_error *err)
{
    if (!a->table) return hps_json_write(a->output, doc, err);
    hps_profile *p = hps_profile_read(doc, hps_path_name(a->output), err);
    hps_out *o = p ? hps_out_open(a->output, err) : NULL;
    if (o) hps_profile_print_table(p, hps_out_file(o));
    hps_profile_free(p);
    return o ? hps_out_commit(o, err) : -1;
}

/* Steps of n trainers on one batch, in turn from trainer `first` (mod n:
 * the order turns from one batch to the next, so that none always runs on
 * caches another warmed): seconds each. */
static int steps_in_turn(hps_trainer *const *t, int n, const hps_batch *batch, int first, double *sec,
                         hps_error *err)
{
    double loss;
    for (int k = 0; k < n; k++) {
        int j = ((first + k) % n + n) % n;
        double t0 = hps_now();
        if (hps_trainer_step(t[j], batch, &loss, err)) return -1;
        sec[j] = hps_now() - t0;
    }
    return 0;
}

/* The next batch of src, from its start again at its end. */
static int next_batch(hps_source *src, hps_batch *b, int B, hps_error *err)
{
    int got = src->read(src, b, B, err);
    if (got == 0 && (src->seek(src, 0, err) || (got = src->read(src, b, B, err)) == 0))
        return hps_fail(err, HPS_EXIT_RUNTIME, "%s: no rows", src->name);
    return got < 0 ? -1 : 0;
}

/* A trainer of m with plan's stage keeping its rows `rows` ("hbm", or
 * "cache" of capacity rows). */
static hps_trainer *rows_trainer(const hps_model *m, const plan_file *host_plan, const char *rows, long long capacity,
                                 const hps_train_opts *to, hps_error *err)
{
    plan_file plan = *host_plan;
    snprintf(plan.stages[0].rows, sizeof plan.stages[0].rows, "%s", rows);
    plan.stages[0].cache_rows = capacity;
    return hps_trainer_create(m, &plan, to, err);
}

static void warn_wide(json_t *dev, const char *what, const hps_profile_paired *p, const char *more)
{
    if (p->wide)
        hps_profile_warn_spread(json_string_value(json_object_get(dev, "id")), what, p->spread, "the step's median",
                                p->pairs, more);
}

/* What the rows in the backend's memory (rows hbm, as hps-train keeps them
 * on a GPU or, --cpu-fallback, in the CPU backend's arena) add to a step:
 * the host trainer's step and the same step of one with rows hbm, on the same
 * batches, in turn (a paired difference: a busy spell of the machine
 * falls on both of a pair, where two probes run apart read 0 to 1.6 ms for
 * one model), at least DEVICE_ROWS_PAIRS pairs: the device's device_rows_ms
 * and its spread.  A third trainer keeps a cache of CACHE_SHARE of the rows
 * the first batch touched, filled on that batch, so that it misses and
 * evicts on every step after it, in turn with the other two on the same
 * batches: its step less hbm's, over the misses it has beyond hbm's new
 * rows, is what a miss costs the host (device_row_miss_us).  Its warm-up is
 * that one step: the probe runs in every CPU profile of a model with
 * tables.  The cost a miss is taken with the order's upkeep of the step's
 * hits, which grows with the rows cached: half the batch's rows read 0.2 to
 * 0.4 us a miss on dlrm-criteo, as many 0.6 to 0.8, twice as many 1.4, and
 * its cache in bench-fidelity (15k rows, hit 0.85) ran about 0.9 us a miss
 * slower than rows hbm (loaded, 2 vCPUs).  A model without tables has none. */
#define DEVICE_ROWS_PAIRS 8
#define CACHE_SHARE 1.0
static int device_rows_overhead(const hps_model *m, hps_trainer *host, const plan_file *host_plan,
                                const hps_train_opts *to, hps_source *src, json_t *dev, const hps_profile_opts *o,
                                hps_error *err)
{
    int tables = 0;
    for (int l = 0; l < m->n_layers; l++) tables |= hps_layer_has_table(&m->layers[l]);
    if (!tables) return 0;
    hps_trainer *t[3] = {host, rows_trainer(m, host_plan, "hbm", 0, to, err), NULL};
    if (!t[1]) return -1;
    const int B = host_plan->batch, pairs = o->reps > DEVICE_ROWS_PAIRS ? o->reps : DEVICE_ROWS_PAIRS;
    const int warm = o->warmup > 0 ? o->warmup : 1; /* hbm is a new trainer */
    hps_batch *batch = hps_batch_create(B, m->n_dense, m->n_slots, (int64_t)B * (m->n_slots + 1), 1);
    double *sec = hps_calloc(3 * (size_t)pairs, sizeof *sec), step[3];
    uint64_t hbm0 = 0, cache0 = 0; /* rows fetched when the timing starts */
    long long cap = 0;
    int rc = 0;
    for (int i = -warm; i < pairs && rc == 0; i++) {
        if (i == 0) hbm0 = hps_trainer_row_misses(t[1]), cache0 = hps_trainer_row_misses(t[2]);
        rc = next_batch(src, batch, B, err) || steps_in_turn(t, t[2] ? 3 : 2, batch, i, step, err) ? -1 : 0;
        if (rc == 0 && !t[2]) { /* the cache, filled on the first batch: it evicts from the next */
            cap = (long long)(CACHE_SHARE * (double)hps_trainer_row_misses(t[1]));
            cap = cap > 0 ? cap : 1;
            t[2] = rows_trainer(m, host_plan, "cache", cap, to, err);
            rc = t[2] && steps_in_turn(t + 2, 1, batch, 0, step, err) == 0 ? 0 : -1;
        }
        for (int k = 0; k < 3 && rc == 0 && i >= 0; k++) sec[k * pairs + i] = step[k];
    }
    if (rc == 0) {
        hps_profile_paired p = hps_profile_paired_of(sec, sec + pairs, pairs);
        double misses = (double)(hps_trainer_row_misses(t[2]) - cache0) -
                        (double)(hps_trainer_row_misses(t[1]) - hbm0);
        hps_profile_paired q = hps_profile_paired_per(sec + pairs, sec + 2 * pairs, pairs, misses / pairs);
        char what[64];
        snprintf(what, sizeof what, "device_rows_ms %.3g ms", p.ms > 0 ? p.ms : 0);
        warn_wide(dev, what, &p, ", host and device rows in turn");
        snprintf(what, sizeof what, "device_row_miss_us %.3g us", q.ms > 0 ? q.ms * 1e3 : 0);
        warn_wide(dev, what, &q, ", device rows and a cache in turn");
        hps_profile_device_set_device_rows(dev, &p);
        hps_profile_device_set_row_miss(dev, &q);
        hps_log(3, "%s: %s: a cache of %lld rows: %.0f misses a step beyond rows hbm's new rows, %.3g ms\n",
                hps_progname(), json_string_value(json_object_get(dev, "id")), cap, misses / pairs,
                q.ms * misses / pairs);
    }
    free(sec);
    hps_batch_free(batch);
    hps_trainer_free(t[1]);
    hps_trainer_free(t[2]);
    return rc;
}

/* A run adds to the layers what hps-train's engine does around them in a
 * step: rows looked up in its tables (new ones created), sparse gradients
 * merged and applied, the dense optimizer, the pipeline's hand-offs.  Its
 * probe times these on synthetic batches, or with --data on the shards a run
 * reads (their keys, and the read of each batch), at the device's threads:
 * the CPU device's overhead_ms and read_ms (hps-profile(5)), with --data also
 * the CPU the reader's background thread takes a batch (read_cpu_ms); and again with
 * the rows in device memory (device_rows_overhead). */
static int engine_overhead(const hps_model *m, const hps_device_spec *spec, json_t *dev,
                           const hps_profile_opts *o, const char *data, hps_error *err)
{
    if (spec->kind != HPS_DEVICE_CPU) return 0;
    plan_file plan;
    hps_train_plan_single(m, &plan);
    plan.batch = o->batch ? o->batch : m->batch;
    hps_train_opts to = hps_train_opts_default();
    to.threads = hps_device_threads(spec);
    to.seed = o->seed;
    hps_trainer *t = hps_trainer_create(m, &plan, &to, err);
    if (!t) return -1;
    hps_source *src = data ? hps_source_shards(data, 0, err) : hps_source_profile_batches(m, o->seed);
    json_t *probe = src ? hps_trainer_probe(t, src, o->reps + o->warmup, err) : NULL;
    /* the worker's and the server's part of the exchanges under mpirun */
    json_t *exchange = probe ? hps_dist_probe_exchange(m, src, plan.batch, to.threads, o->reps, err) : NULL;
    if (exchange && device_rows_overhead(m, t, &plan, &to, src, dev, o, err))
        json_decref(exchange), exchange = NULL;
    hps_trainer_free(t);
    if (src) src->close(src);
    if (!exchange) json_decref(probe), probe = NULL;
    if (!probe) return -1;
    hps_profile_device_set_exchange(dev, exchange);
    hps_profile_device_set_engine(dev, probe, data != NULL);
    json_decref(probe);
    double read_cpu = 0;
    if (data && hps_profile_read_cpu_ms(data, plan.batch, o->reps, &read_cpu, err)) return -1;
    if (data) hps_profile_device_set_read_cpu(dev, read_cpu);
    return 0;
}

static json_t *measure_all(const args *a, hps_error *err)
{
    hps_model *m = hps_model_load(a->model, err);
    if (!m) return NULL;
    hps_device_spec devs[MAX_DEVICES];
    int n = 0;
    json_t *devices = NULL;
    if (hps_device_parse(a->devices, devs, MAX_DEVICES, &n, err) == 0 &&
        (!a->machine || hps_profile_machine_load(a->machine, devs, n, err) == 0)) {
        devices = json_array();
        for (int i = 0; i < n && devices; i++) {
            json_t *d = hps_profile_measure(m, &devs[i], &a->opts, err);
            if (d && engine_overhead(m, &devs[i], d, &a->opts, a->data, err)) json_decref(d), d = NULL;
            if (!d) json_decref(devices), devices = NULL;
            else json_array_append_new(devices, d);
        }
    }
    json_t *doc = devices ? hps_profile_doc(m, &a->opts, devices) : NULL;
    hps_model_free(m);
    return doc;
}

/* --describe-cpu: the sheet of this machine on -D cpu[:N]'s threads. */
static int describe_cpu(const args *a, hps_error *err)
{
    hps_device_spec dev;
    int n = 0;
    if (hps_device_parse(a->devices, &dev, 1, &n, err)) return -1;
    if (dev.kind != HPS_DEVICE_CPU)
        return hps_fail(err, HPS_EXIT_USAGE, "--describe-cpu: '%s' is not a CPU device (cpu or cpu:N)", dev.id);
    json_t *sheet = hps_cpu_describe(NULL, hps_device_threads(&dev));
    int rc = hps_json_write(a->output, sheet, err);
    json_decref(sheet);
    return rc;
}

/* --check-estimate: the model's predictions of doc's measured CPU devices. */
static int check_estimate(json_t *doc, const args *a, const char *name, hps_error *err)
{
    hps_profile *p = hps_profile_read(doc, name, err);
    hps_out *o = p ? hps_out_open(a->output, err) : NULL;
    int rc = o ? hps_profile_check_estimate(p, a->check, hps_out_file(o), err) : -1;
    hps_profile_free(p);
    if (o && rc) hps_out_abort(o);
    return o && rc == 0 ? hps_out_commit(o, err) : -1;
}

static json_t *merge_all(char **files, int n, hps_error *err)
{
    json_t **docs = hps_calloc((size_t)n, sizeof *docs), *out = NULL;
    const char **names = hps_calloc((size_t)n, sizeof *names);
    int ok = 1;
    for (int i = 0; i < n && ok; i++) {
        names[i] = hps_path_name(files[i]);
        ok = hps_json_load(files[i], &docs[i], err) == 0;
    }
    if (ok) out = hps_profile_merge(docs, names, n, err);
    for (int i = 0; i < n; i++) json_decref(docs[i]);
    free(docs);
    free(names);
    return out;
}

/* A profile measured (or merged, with --merge), or with show one read back:
 * a merge of one, checked, in the format asked. */
static int profile(int argc, char **argv, int show)
{
    args a = {.devices = "cpu", .output = "-", .opts = hps_profile_opts_default(), .show = show};
    int rc = parse_args(argc, argv, &a);
    if (rc >= 0) return rc;
    if (a.list_devices) {
        hps_device_list(stdout);
        return HPS_EXIT_OK;
    }
    a.opts.progress = hps_display_level >= 2 && hps_stderr_is_tty();
    if (hps_display_level >= 3) a.opts.progress = 1;
    hps_error err = {.code = HPS_EXIT_RUNTIME};
    if (hps_out_check("--output", a.output, 0, &err)) { /* before measuring for minutes */
        hps_report(&err);
        return err.code;
    }
    if (a.describe_cpu) {
        if (describe_cpu(&a, &err)) {
            hps_report(&err);
            return err.code;
        }
        return HPS_EXIT_OK;
    }
    json_t *doc = a.merge || a.show ? merge_all(argv + optind, argc - optind, &err) : measure_all(&a, &err);
    for (int i = 0; doc && i < a.n_estimates; i++)
        if (hps_profile_estimate(doc, a.estimates[i], &err)) json_decref(doc), doc = NULL;
    rc = HPS_EXIT_OK;
    if (!doc || (a.check ? check_estimate(doc, &a, a.show ? hps_path_name(argv[optind]) : "profile", &err) : emit(doc, &a, &err)) != 0) {
        hps_report(&err);
        rc = err.code;
    }
    json_decref(doc);
    return rc;
}

static int cmd_profile(int argc, char **argv) { return profile(argc, argv, 0); }
static int cmd_show(int argc, char **argv) { return profile(argc, argv, 1); }

int main(int argc, char **argv)
{
    static const hps_cli_command commands[] = {{"show", cmd_show}, {NULL, NULL}};
    hps_set_progname(argv[0]);
    hps_blas_init(argv); /* may re-execute: before anything else happens */
    return hps_cli_dispatch(argc, argv, commands, cmd_profile, HPS_CLI_OPTIONS);
}
