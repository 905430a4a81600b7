/* hps-train: train what a plan describes. */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/hps_cli.h"
#include "core/hps_blas.h"
#include "core/hps_io.h"
#include "core/hps_json.h"
#include "plan/hps_plan_file.h"
#include "dist/hps_dist.h"
#include "profile/hps_profile.h"
#include "train/hps_train.h"

static const char usage[] =
    "usage: hps-train --plan PLAN --data SHARDS [options]\n"
    "       hps-train --model MODEL --data SHARDS [options]   (one CPU stage, no plan)\n"
    "       hps-train show METRICS [-f svg] [-o FILE]       (training curves of a run)\n"
    "       hps-train export-apply BASE DELTA... -o FILE      (an export from a base and its deltas)\n"
    "\n"
    "Trains the model a plan was made for, on shards written by hps-shard: embedding\n"
    "tables on parameter-server tables, the plan's stages pipelined over micro-batches.\n"
    "\n"
    "  -P, --plan FILE             the plan (hps-plan(5))\n"
    "  -d, --data DIR              training shards (hps-shard(5))\n"
    "  -m, --model FILE            the model [the plan's inputs.model]\n"
    "  -e, --epochs N              passes over the data [1]\n"
    "      --steps N               stop after N steps in all\n"
    "      --eval DIR              evaluate after each epoch on DIR's holdout shards\n"
    "      --in-memory MB          read the training rows into memory first (up to MB MiB) and train\n"
    "                              every epoch from there, not from the shards [stream]\n"
    "      --checkpoint DIR        write checkpoints into DIR\n"
    "      --checkpoint-every N    every N steps (and at the end) [at the end]\n"
    "      --resume                continue from DIR's latest checkpoint\n"
    "      --continue-from CKPT    a new day on new data from CKPT (a file or DIR): same model and plan\n"
    "      --export FILE           write the weights as safetensors at the end\n"
    "      --delta FILE            also write what --export changed since --delta-since's export\n"
    "      --delta-since EXPORT    the earlier export (or export-apply's) --delta is against\n"
    "      --metrics FILE          NDJSON metrics (- for stdout)\n"
    "      --metrics-interval SEC  seconds between step records [10]\n"
    "      --seed S                initial weights and rows [1]\n"
    "      --threads N             kernel threads per stage [cores / stages]\n"
    "      --micro-batches N       micro-batches per batch [the plan's, else one per stage]\n"
    "      --optimizer NAME        adam or sgd for dense layers [adam]\n"
    "      --lr X                  dense learning rate [0.001]\n"
    "      --lr-sparse X           embedding (AdaGrad) learning rate [0.05]\n"
    "      --sparse-optimizer NAME adagrad or rowwise-adagrad (one accumulator a row) [the plan's, else adagrad]\n"
    "      --row-dtype TYPE        fp32, fp16 or bf16: how tables store rows (fp32 arithmetic) [the plan's, else fp32]\n"
    "      --max-table-mb N        memory cap of each embedding table [none]\n"
    "      --evict                 when a table is full, evict cold rows (else: error)\n"
    "      --admit-after N[,SLOT=N...] a key gets a row on its Nth lookup (before: zeros), per slot too\n"
    "                              [the plan's, else 1]\n"
    "      --expire-after-days D   a new day (--continue-from) removes rows untouched D days [never]\n"
    "      --cpu-fallback          run stages of GPU types on the CPU\n"
    "      --probe STEPS           time STEPS steps per thread count, print a profile, exit\n"
#ifdef HPS_TEST_HOOKS
    "      --slowdown RANK=FACTOR  test build: make rank RANK FACTOR times slower (mpirun)\n"
#endif
    "      --no-rebalance          keep the plan's worker shares (mpirun)\n"
    "      --log-dir DIR           each rank's messages into DIR/worker-R.log or DIR/server-R.log\n"
    "  -o, --output FILE           where --probe or show writes [stdout]\n"
    "  -f, --format FMT            show: svg (the only picture so far) [svg]\n"
    "  -q, --quiet                 errors only (no progress, summary or warnings)\n"
    "  -v, --verbose               more messages\n"
    "  -h, --help                  show this help, then exit\n"
    "  -V, --version               show the version, then exit\n";

enum { OPT_STEPS = 256, OPT_EVAL, OPT_CKPT, OPT_CKPT_EVERY, OPT_RESUME, OPT_EXPORT, OPT_METRICS,
       OPT_METRICS_INTERVAL, OPT_SEED, OPT_THREADS, OPT_MICRO, OPT_OPTIMIZER, OPT_LR, OPT_LR_SPARSE,
       OPT_MAX_TABLE, OPT_EVICT, OPT_CPU_FALLBACK, OPT_PROBE, OPT_SLOWDOWN, OPT_NO_REBALANCE, OPT_LOG_DIR,
       OPT_CONTINUE, OPT_DELTA, OPT_DELTA_SINCE, OPT_ADMIT_AFTER, OPT_EXPIRE_AFTER, OPT_SPARSE_OPTIMIZER, OPT_ROW_DTYPE,
       OPT_IN_MEMORY };

static const struct option long_options[] = {
    {"plan", required_argument, NULL, 'P'},
    {"data", required_argument, NULL, 'd'},
    {"model", required_argument, NULL, 'm'},
    {"epochs", required_argument, NULL, 'e'},
    {"steps", required_argument, NULL, OPT_STEPS},
    {"eval", required_argument, NULL, OPT_EVAL},
    {"checkpoint", required_argument, NULL, OPT_CKPT},
    {"checkpoint-every", required_argument, NULL, OPT_CKPT_EVERY},
    {"resume", no_argument, NULL, OPT_RESUME},
    {"continue-from", required_argument, NULL, OPT_CONTINUE},
    {"export", required_argument, NULL, OPT_EXPORT},
    {"delta", required_argument, NULL, OPT_DELTA},
    {"delta-since", required_argument, NULL, OPT_DELTA_SINCE},
    {"metrics", required_argument, NULL, OPT_METRICS},
    {"metrics-interval", required_argument, NULL, OPT_METRICS_INTERVAL},
    {"seed", required_argument, NULL, OPT_SEED},
    {"threads", required_argument, NULL, OPT_THREADS},
    {"micro-batches", required_argument, NULL, OPT_MICRO},
    {"optimizer", required_argument, NULL, OPT_OPTIMIZER},
    {"lr", required_argument, NULL, OPT_LR},
    {"lr-sparse", required_argument, NULL, OPT_LR_SPARSE},
    {"sparse-optimizer", required_argument, NULL, OPT_SPARSE_OPTIMIZER},
    {"row-dtype", required_argument, NULL, OPT_ROW_DTYPE},
    {"max-table-mb", required_argument, NULL, OPT_MAX_TABLE},
    {"in-memory", required_argument, NULL, OPT_IN_MEMORY},
    {"evict", no_argument, NULL, OPT_EVICT},
    {"admit-after", required_argument, NULL, OPT_ADMIT_AFTER},
    {"expire-after-days", required_argument, NULL, OPT_EXPIRE_AFTER},
    {"cpu-fallback", no_argument, NULL, OPT_CPU_FALLBACK},
    {"probe", required_argument, NULL, OPT_PROBE},
#ifdef HPS_TEST_HOOKS
    {"slowdown", required_argument, NULL, OPT_SLOWDOWN},
#endif
    {"no-rebalance", no_argument, NULL, OPT_NO_REBALANCE},
    {"log-dir", required_argument, NULL, OPT_LOG_DIR},
    {"output", required_argument, NULL, 'o'},
    {"format", required_argument, NULL, 'f'},
    {"quiet", no_argument, NULL, 'q'},
    {"verbose", no_argument, NULL, 'v'},
    {"help", no_argument, NULL, 'h'},
    {"version", no_argument, NULL, 'V'},
    {NULL, 0, NULL, 0},
};

typedef struct {
    const char *plan, *data, *model, *eval, *export_path, *output, *log_dir, *delta, *delta_since;
    long probe;
    size_t in_memory; /* --in-memory's bytes, 0: the shards stream */
    hps_train_opts o;
    unsigned tables_given;  /* HPS_TRAIN_GIVEN_*: the table options on the command line */
    hps_dist_opts dist;
} args;

static int bad_value(const char *opt, const char *value, const char *expected)
{
    hps_usage_error("%s: '%s' is not %s", opt, value, expected);
}

static int count_arg(const char *opt, long min, long max, long *out)
{
    *out = hps_cli_count(opt, optarg, min, max);
    return 0;
}

static int rate_arg(const char *opt, float *out)
{
    *out = (float)hps_cli_double(opt, optarg, 1e-12, 1e6);
    return 0;
}

#ifdef HPS_TEST_HOOKS
/* --slowdown RANK=FACTOR: the test build's slow rank (make test builds it;
 * what users run has no such option) */
static int slowdown_arg(hps_dist_opts *d)
{
    char *eq = strchr(optarg, '=');
    long rank;
    double f;
    if (!eq) return bad_value("--slowdown", optarg, "RANK=FACTOR");
    *eq = '\0';
    int bad = hps_parse_long(optarg, 0, HPS_DIST_MAX_RANKS - 1, &rank) || hps_parse_double(eq + 1, &f) ||
              !(f >= 1 && f <= 1000);
    *eq = '=';
    if (bad) return bad_value("--slowdown", optarg, "RANK=FACTOR (a rank, a factor from 1 to 1000)");
    d->slow_rank = (int)rank;
    d->slow_factor = f;
    return -1;
}
#endif

/* One option; returns -1 to go on, or an exit code. */
static int parse_one(int c, args *a)
{
    long v;
    double d;
    switch (c) {
    case 'p': hps_cli_deprecated_letter('p', "plan", 'P'); /* fallthrough */
    case 'P': a->plan = optarg; break;
    case 'd': a->data = optarg; break;
    case 'm': a->model = optarg; break;
    case 'e': if (count_arg("--epochs", 1, INT_MAX, &v)) return HPS_EXIT_USAGE; a->o.epochs = (int)v; break;
    case OPT_STEPS: if (count_arg("--steps", 1, LONG_MAX, &a->o.max_steps)) return HPS_EXIT_USAGE; break;
    case OPT_EVAL: a->eval = optarg; break;
    case OPT_CKPT: a->o.ckpt_dir = optarg; break;
    case OPT_CKPT_EVERY: if (count_arg("--checkpoint-every", 1, LONG_MAX, &a->o.ckpt_every)) return HPS_EXIT_USAGE; break;
    case OPT_RESUME: a->o.resume = 1; break;
    case OPT_CONTINUE: a->o.continue_from = optarg; break;
    case OPT_EXPORT: a->export_path = optarg; break;
    case OPT_DELTA: a->delta = optarg; break;
    case OPT_DELTA_SINCE: a->delta_since = optarg; break;
    case OPT_METRICS: a->o.metrics_path = optarg; break;
    case OPT_METRICS_INTERVAL:
        if (hps_parse_double(optarg, &d) || d < 0) return bad_value("--metrics-interval", optarg, "seconds >= 0");
        a->o.metrics_interval = d;
        break;
    case OPT_SEED: if (count_arg("--seed", 0, LONG_MAX, &v)) return HPS_EXIT_USAGE; a->o.seed = (uint64_t)v; break;
    case OPT_THREADS: if (count_arg("--threads", 1, 4096, &v)) return HPS_EXIT_USAGE; a->o.threads = (int)v; break;
    case OPT_MICRO: if (count_arg("--micro-batches", 1, HPS_MAX_MICRO_BATCHES, &v)) return HPS_EXIT_USAGE; a->o.micro_batches = (int)v; break;
    case OPT_OPTIMIZER:
        a->o.optim.dense = hps_cli_choice("--optimizer", optarg, (const char *const[]){"adam", "sgd", NULL})
                               ? HPS_OPTIM_SGD : HPS_OPTIM_ADAM;
        break;
    case OPT_LR: return rate_arg("--lr", &a->o.optim.lr_dense) ? HPS_EXIT_USAGE : -1;
    case OPT_LR_SPARSE: return rate_arg("--lr-sparse", &a->o.optim.lr_sparse) ? HPS_EXIT_USAGE : -1;
    case OPT_SPARSE_OPTIMIZER:
        a->o.rowwise_adagrad =
            hps_cli_choice("--sparse-optimizer", optarg, (const char *const[]){"adagrad", "rowwise-adagrad", NULL});
        a->tables_given |= HPS_TRAIN_GIVEN_SPARSE_OPTIMIZER;
        break;
    case OPT_ROW_DTYPE:
        a->o.row_dtype = (hps_row_dtype)hps_cli_choice("--row-dtype", optarg, hps_row_dtype_names);
        a->tables_given |= HPS_TRAIN_GIVEN_ROW_DTYPE;
        break;
    case OPT_MAX_TABLE:
        if (count_arg("--max-table-mb", 1, 1L << 40, &v)) return HPS_EXIT_USAGE;
        a->o.max_table_bytes = (size_t)v << 20;
        break;
    case OPT_IN_MEMORY:
        if (count_arg("--in-memory", 1, 1L << 40, &v)) return HPS_EXIT_USAGE;
        a->in_memory = (size_t)v << 20;
        break;
    case OPT_EVICT: a->o.table_policy = HPS_TABLE_FULL_EVICT; break;
    case OPT_ADMIT_AFTER:
        a->tables_given |= HPS_TRAIN_GIVEN_ADMIT_AFTER;
        if (strchr(optarg, '=') || strchr(optarg, ',')) { /* per slot: read once the model is */
            a->o.admit_spec = optarg;
            break;
        }
        if (count_arg("--admit-after", 1, 65535, &v)) return HPS_EXIT_USAGE;
        a->o.admit_after = (int)v;
        break;
    case OPT_EXPIRE_AFTER: if (count_arg("--expire-after-days", 1, 100000, &v)) return HPS_EXIT_USAGE; a->o.expire_after_days = (int)v; break;
    case OPT_CPU_FALLBACK: a->o.cpu_fallback = 1; break;
    case OPT_PROBE: if (count_arg("--probe", 1, 1000000, &a->probe)) return HPS_EXIT_USAGE; break;
#ifdef HPS_TEST_HOOKS
    case OPT_SLOWDOWN: return slowdown_arg(&a->dist);
#endif
    case OPT_NO_REBALANCE: a->dist.rebalance = 0; break;
    case OPT_LOG_DIR: a->log_dir = optarg; break;
    case 'o': a->output = optarg; break;
    case 'f': hps_cli_choice("--format", optarg, (const char *const[]){"svg", NULL}); break;
    case 'q': hps_cli_quiet(); break;
    case 'v': hps_cli_verbose(); break;
    case 'h': fputs(usage, stdout); return HPS_EXIT_OK;
    case 'V': hps_cli_version(stdout); return HPS_EXIT_OK;
    }
    return -1;
}

/* CKPT (a checkpoint file or its directory) lies in DIR. */
static int same_dir(const char *ckpt, const char *dir)
{
    struct stat a, b;
    char parent[4200];
    snprintf(parent, sizeof parent, "%s", ckpt);
    if (stat(ckpt, &a) == 0 && !S_ISDIR(a.st_mode)) {
        char *slash = strrchr(parent, '/');
        if (slash) *slash = '\0';
        else snprintf(parent, sizeof parent, ".");
    }
    return stat(parent, &a) == 0 && stat(dir, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

/* show (1): METRICS; export-apply (2): BASE DELTA...; else (0) none. */
static int parse_args(int argc, char **argv, args *a, int show)
{
    int c, rc;
    while ((c = hps_cli_getopt(argc, argv, "P:p:d:m:e:o:f:qvhV", long_options)) != -1)
        if ((rc = parse_one(c, a)) >= 0) return rc;
    if (show == 2) {
        if (argc - optind < 2) hps_usage_error("export-apply: give the base export and at least one delta");
        if (strcmp(a->output, "-") == 0) hps_usage_error("export-apply: give the output file (-o FILE)");
        return -1;
    }
    if (show) {
        if (optind >= argc) hps_usage_error("show: missing METRICS");
        if (optind + 1 < argc) hps_usage_error("show: unexpected argument '%s'", argv[optind + 1]);
        return -1;
    }
    if (!a->delta != !a->delta_since) hps_usage_error("--delta and --delta-since go together");
    if (a->delta && !a->export_path) hps_usage_error("--delta needs --export FILE (the export it is a delta of)");
    if (a->delta && strcmp(a->export_path, "-") == 0) hps_usage_error("--delta needs --export to name a file");
    if (optind < argc) hps_usage_error("unexpected argument '%s'", argv[optind]);
    if (!a->data) hps_usage_error("--data is required");
    if (!a->plan && !a->model) hps_usage_error("--plan or --model is required");
    if (a->o.resume && !a->o.ckpt_dir) hps_usage_error("--resume needs --checkpoint DIR");
    if (a->o.continue_from && a->o.ckpt_dir && same_dir(a->o.continue_from, a->o.ckpt_dir))
        hps_usage_error("--continue-from %s: --checkpoint must be another directory (a day's checkpoints "
                        "would replace the day's they continue)", a->o.continue_from);
    if (a->export_path && hps_out_is_tty(a->export_path))
        hps_usage_error("--export -: not writing safetensors to a terminal; redirect stdout or name a file");
    return -1;
}

/* Every output option's path, before any work: a run of hours must not
 * end in "cannot create" with nothing saved. */
static int check_outputs(const args *a, hps_error *err)
{
    /* the earlier export a delta is against: read at the end, so checked now */
    if (a->delta_since && access(a->delta_since, R_OK) != 0)
        return hps_fail(err, HPS_EXIT_USAGE, "--delta-since: %s: %s", a->delta_since, strerror(errno));
    return (a->export_path && hps_out_check("--export", a->export_path, 0, err)) ||
           (a->delta && hps_out_check("--delta", a->delta, 0, err)) ||
           (a->o.ckpt_dir && hps_out_check("--checkpoint", a->o.ckpt_dir, 1, err)) ||
           (a->o.metrics_path && hps_out_check("--metrics", a->o.metrics_path, 0, err)) ||
           (a->log_dir && hps_out_check("--log-dir", a->log_dir, 1, err)) ||
           (a->probe && hps_out_check("--output", a->output, 0, err))
               ? -1 : 0;
}

/* The model: --model, else the path the plan records (relative to the plan). */
static char *model_path(const args *a, hps_error *err)
{
    if (a->model) return hps_strdup(a->model);
    plan_file pf;
    if (plan_file_load(a->plan, &pf, err)) return NULL;
    char *path = pf.model_path;
    pf.model_path = NULL;
    if (!path) hps_fail(err, HPS_EXIT_USAGE, "%s: records no inputs.model; give --model", pf.name);
    plan_file_free(&pf);
    return path;
}

/* --log-dir: this rank's stderr into DIR/ROLE-RANK.log, as fleetrun users
 * expect one log per rank. */
static int open_log(const char *dir, const hps_dist *d, hps_error *err)
{
    if (mkdir(dir, 0777) != 0 && errno != EEXIST)
        return hps_fail(err, HPS_EXIT_RUNTIME, "--log-dir: %s: cannot create: %s", dir, strerror(errno));
    char path[4200];
    snprintf(path, sizeof path, "%s/%s-%d.log", dir, hps_dist_is_server(d) ? "server" : "worker",
             hps_dist_rank(d));
    if (!freopen(path, "w", stderr))
        return hps_fail(err, HPS_EXIT_RUNTIME, "--log-dir: %s: cannot write: %s", path, strerror(errno));
    setvbuf(stderr, NULL, _IOLBF, 0); /* whole lines, also when a rank dies */
    return 0;
}

/* "+4.2%", or "no prediction" when the plan gave none. */
static const char *vs_plan(char *buf, size_t n, double measured, double predicted)
{
    double e = hps_train_error(measured, predicted);
    if (isnan(e)) snprintf(buf, n, "no prediction");
    else snprintf(buf, n, "%+.1f%%", 100 * e);
    return buf;
}

/* The plan's prediction beside the run: samples/s, then per stage. */
static void print_fidelity(const hps_trainer *t)
{
    const hps_train_summary *s = hps_trainer_summary(t);
    char e[32];
    if (s->predicted_samples_per_s > 0 && s->gpu_on_cpu)
        hps_log(2, "%s: predicted %.0f samples/s for %s on the plan's GPUs; its GPU stages ran on the CPU "
                   "(--cpu-fallback): measured %.0f, no measure of the plan\n", hps_progname(),
                s->predicted_samples_per_s, s->predicted_for, s->samples_per_s);
    else if (s->predicted_samples_per_s > 0)
        hps_log(2, "%s: predicted %.0f samples/s for %s, measured %.0f (%s)\n", hps_progname(),
                s->predicted_samples_per_s, s->predicted_for, s->samples_per_s,
                vs_plan(e, sizeof e, s->samples_per_s, s->predicted_samples_per_s));
    hps_log(2, "%s:   a step: %.3f ms, of which %.3f reading the batch and %.3f in the engine around the "
               "stages\n", hps_progname(), s->step_ms, s->read_ms, s->engine_ms);
    for (int i = 0; i < s->n_stages; i++)
        if (s->stage_predicted_ms[i] > 0 && s->stage_on_cpu[i])
            hps_log(2, "%s:   stage %d: %.3f ms per batch computing on the CPU, predicted %.3f on its GPU\n",
                    hps_progname(), i, s->stage_ms[i], s->stage_predicted_ms[i]);
        else if (s->stage_predicted_ms[i] > 0)
            hps_log(2, "%s:   stage %d: %.3f ms per batch computing, predicted %.3f (%s)\n", hps_progname(), i,
                    s->stage_ms[i], s->stage_predicted_ms[i],
                    vs_plan(e, sizeof e, s->stage_ms[i], s->stage_predicted_ms[i]));
        else
            hps_log(2, "%s:   stage %d: %.3f ms per batch computing (no prediction)\n", hps_progname(), i,
                    s->stage_ms[i]);
}

static void print_summary(const hps_trainer *t)
{
    const hps_train_summary *s = hps_trainer_summary(t);
    hps_log(2, "%s: %llu step%s, %llu samples, loss %.4f, %.0f samples/s\n", hps_progname(),
            (unsigned long long)s->steps, s->steps == 1 ? "" : "s", (unsigned long long)s->samples, s->last_loss,
            s->samples_per_s);
    print_fidelity(t);
    if (s->have_eval)
        hps_log(2, "%s: eval on %llu rows: logloss %.4f, %s %.4f\n", hps_progname(),
                (unsigned long long)s->eval.rows, s->eval.loss,
                s->eval.auc == s->eval.auc ? "AUC" : "accuracy",
                s->eval.auc == s->eval.auc ? s->eval.auc : s->eval.accuracy);
}

/* --probe: the steps timed at each thread count, as one profile; exchange:
 * with, on a CPU, the step's exchange with a server as hps-profile --data
 * adds it (its probe runs both ends in one process, which a rank of a
 * started MPI job cannot). */
static int probe(const args *a, hps_trainer *t, const hps_model *m, hps_source *src, int exchange,
                 hps_error *err)
{
    json_t *doc = hps_trainer_probe(t, src, a->probe, err);
    hps_profile *read = doc ? hps_profile_read(doc, "probe", err) : NULL;
    int rc = read ? 0 : -1;
    if (exchange && read && !read->devices[0].is_gpu) {
        json_t *x = hps_dist_probe_exchange(m, src, hps_trainer_batch(t), a->o.threads, (int)a->probe, err);
        if (x) hps_profile_device_set_exchange(hps_profile_doc_device(doc, 0), x);
        else rc = -1;
    }
    if (rc == 0) rc = hps_json_write(a->output, doc, err);
    hps_profile_free(read);
    json_decref(doc);
    return rc;
}

/* A worker's work: one process's, or a rank's of an mpirun job (hps-train(1),
 * DISTRIBUTED), where the lead worker evaluates, exports and reports. */
static int train(const args *a, hps_dist *d, const hps_model *m, hps_trainer *t, hps_source *src,
                 hps_error *err)
{
    /* --probe times one host: the lead's; with, alone, the exchange with a
     * server (a rank of a started MPI job cannot run both ends); the other
     * ranks have nothing to do */
    if (a->probe) return hps_dist_is_lead(d) ? probe(a, t, m, src, !hps_dist_launched(), err) : 0;
    hps_dist_attach(d, t, m, &a->o);
    hps_source *eval = NULL;
    if (a->eval && hps_dist_is_lead(d) && !(eval = hps_source_shards(a->eval, 1, err))) return -1;
    int rc = hps_trainer_run(t, src, eval, err);
    if (eval) eval->close(eval);
    /* the lead holds the whole model once it has the other stages' weights
     * and the servers' rows */
    if (rc == 0 && a->export_path) rc = hps_dist_gather_model(d, t, err);
    if (rc == 0 && a->export_path && hps_dist_is_lead(d)) rc = hps_trainer_export(t, a->export_path, err);
    if (rc == 0 && a->delta && hps_dist_is_lead(d)) rc = hps_export_delta(a->delta_since, a->export_path, a->delta, err);
    if (rc == 0) rc = hps_dist_finish(d, t, err);
    if (rc == 0 && hps_dist_is_lead(d)) print_summary(t);
    return rc;
}

static args default_args(void)
{
    return (args){.output = "-", .o = hps_train_opts_default(), .dist = {.slow_rank = -1, .rebalance = 1}};
}

/* hps-train show METRICS: the training curves of a run. */
static int cmd_show(int argc, char **argv)
{
    args a = default_args();
    int rc = parse_args(argc, argv, &a, 1);
    if (rc >= 0) return rc;
    hps_error err;
    if (hps_train_curves_svg(argv[optind], a.output, &err) == 0) return HPS_EXIT_OK;
    hps_report(&err);
    return err.code;
}

/* hps-train export-apply BASE DELTA... -o FILE: a serving store's export
 * from its base and the deltas since (hps-train(1), DELTA EXPORTS). */
static int cmd_export_apply(int argc, char **argv)
{
    args a = default_args();
    int rc = parse_args(argc, argv, &a, 2);
    if (rc >= 0) return rc;
    hps_error err;
    if (hps_export_apply(argv[optind], argv + optind + 1, argc - optind - 1, a.output, &err) == 0) return HPS_EXIT_OK;
    hps_report(&err);
    return err.code;
}

/* hps-train [options]: one process, or one rank of an mpirun job. */
static int cmd_train(int argc, char **argv)
{
    args a = default_args();
    int rc = parse_args(argc, argv, &a, 0);
    if (rc >= 0) return rc;
    hps_error err = {.code = HPS_EXIT_RUNTIME};
    if (check_outputs(&a, &err)) {
        hps_report(&err);
        return err.code;
    }
    hps_model *m = NULL;
    hps_source *src = NULL;
    hps_trainer *t = NULL;
    plan_file plan = {0};
    char *path = NULL;
    hps_dist *d = hps_dist_start(a.plan, &a.dist, &err);
    /* every rank found the same mismatch: one says it, and none aborts */
    int everyone = !d;
    rc = d ? 0 : -1;
    if (rc == 0 && a.log_dir && open_log(a.log_dir, d, &err)) rc = -1;
    if (rc == 0 && !hps_dist_is_lead(d)) {
        /* only the lead worker writes metrics, and reports unless each rank has its log */
        if (!a.log_dir) hps_display_level = hps_display_level > 1 ? 1 : hps_display_level;
        a.o.metrics_path = NULL;
    }
    a.o.progress = hps_display_level >= 2 && hps_stderr_is_tty() && !a.probe;
    if (rc == 0) rc = (path = model_path(&a, &err)) && (m = hps_model_load(path, &err)) ? 0 : -1;
    if (rc == 0) rc = hps_train_admit_slots(m, &a.o, &err);
    if (rc == 0) {
        /* the tables as the plan priced them, unless an option says otherwise (an error) */
        if (a.plan) rc = hps_train_plan_load(a.plan, m, &plan, &err) || hps_train_plan_tables(&plan, &a.o, a.tables_given, &err);
        else hps_train_plan_single(m, &plan);
    }
    /* a server rank reads no data and builds only its tables: the workers
     * send it rows and gradients */
    int server = rc == 0 && hps_dist_is_server(d);
    if (rc == 0 && !server && !(src = hps_source_shards(a.data, 0, &err))) rc = -1;
    if (rc == 0 && !server && a.in_memory && !(src = hps_source_in_memory(src, a.in_memory, &err))) rc = -1;
    if (rc == 0 && !server && hps_source_check(src, m, &err)) rc = -1;
    if (rc == 0 && !server && !(t = hps_trainer_create(m, &plan, &a.o, &err))) rc = -1;
    if (rc == 0 && hps_dist_check_stages(d, m, &plan, a.eval != NULL, &err)) rc = -1, everyone = 1;
    else if (rc == 0 && server) rc = a.probe ? 0 : hps_dist_serve(d, m, &plan, &a.o, &err);
    else if (rc == 0) rc = train(&a, d, m, t, src, &err);
    if (rc != 0 && !everyone) hps_dist_abort(d, &err); /* no rank may wait for this one */
    if (rc != 0 && (!everyone || hps_dist_rank(d) == 0)) hps_report(&err);
    hps_trainer_free(t);
    if (src) src->close(src);
    hps_model_free(m);
    plan_file_free(&plan);
    free(path);
    hps_dist_end(d);
    return rc == 0 ? HPS_EXIT_OK : err.code;
}

int main(int argc, char **argv)
{
    static const hps_cli_command commands[] = {{"show", cmd_show}, {"export-apply", cmd_export_apply}, {NULL, NULL}};
    hps_set_progname(argv[0]);
    hps_blas_init(argv); /* may re-execute: before anything else happens */
    return hps_cli_dispatch(argc, argv, commands, cmd_train, HPS_CLI_OPTIONS);
}
