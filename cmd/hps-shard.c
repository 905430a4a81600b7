/* hps-shard: raw sparse data to compressed, checksummed shards, split by the
 * plan; and `cat`, `stats`, `synth` to look at shards and make data.
 * Options and I/O only: the work is in lib/data. */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/hps_blas.h"
#include "core/hps_core.h"
#include "core/hps_cli.h"
#include "core/hps_io.h"
#include "core/hps_json.h"
#include "data/hps_shard_job.h"
#include "model/hps_model.h"
#include "plan/hps_plan_file.h"

/* a plan's workers become shards: hps_plan_read bounds them by hps-shard's limit */
_Static_assert(PLAN_MAX_SHARDS == HPS_MAX_SHARDS, "a plan's workers are shards");

static void usage(FILE *f)
{
    fprintf(f,
"usage: hps-shard [OPTIONS] -o DIR INPUT...     shard text data (INPUT '-' = stdin; .zst is decoded)\n"
"       hps-shard cat [--as tsv|libsvm] [-o FILE] DIR|SHARD...\n"
"       hps-shard stats [--verify] DIR\n"
"       hps-shard synth ROWS [--seed S] [--zipf S] [--scale X] [--cardinality C] [--interactions N]\n"
"                       [--days N [--drift P]] [--meta FILE] [-o FILE|DIR]\n"
"\n"
"Input:\n"
"      --format FMT      criteo (default) or libsvm\n"
"  -m, --model FILE      check the data against this model's input; take its slot names\n"
"      --classes N       libsvm labels are classes 0..N-1 (default: binary 0/1 or -1/+1)\n"
"      --dense N         libsvm features 1..N become dense features instead of a weighted slot\n"
"      --transform T     dense transform: log (sign(x)*ln(1+|x|), criteo default) or none\n"
"      --hash H          criteo keys: mix64 (default) or none (the hex value itself)\n"
"      --hash-seed S     seed of the key hash (default 0)\n"
"      --buckets N       fold keys into N buckets (key mod N)\n"
"      --skip-bad        skip malformed lines, counting them, instead of failing\n"
"Split:\n"
"  -n, --shards N        N equal shards (default 1)\n"
"  -w, --weights A,B,..  one shard per weight, rows in proportion\n"
"  -P, --plan FILE       one shard per worker of an hps-plan plan, by its shares\n"
"      --holdout F       also write holdout.hps with the last fraction F of the rows\n"
"      --shuffle         shuffle the rows (two passes; memory bounded by --shuffle-mem)\n"
"  -s, --seed S          seed of --shuffle and of synth (default 0)\n"
"      --shuffle-mem MB  text held in memory at once while shuffling (default 64)\n"
"      --servers P       write keys/server-*.keys: the keys each of P servers owns\n"
"                        (default with --plan: its server count)\n"
"Output:\n"
"  -o, --output PATH     the shard directory (cat and synth: the file; default stdout)\n"
"      --force           replace an existing output directory\n"
"  -l, --level L         zstd level of the blocks (default 1)\n"
"      --block-rows N    rows per block (default 4096)\n"
"  -T, --threads N       threads (default: the CPUs online)\n"
"cat and stats:\n"
"      --as FMT          cat output: tsv or libsvm (default: as the input was)\n"
"      --verify          stats: read every block and check every checksum\n"
"synth:\n"
"      --zipf S          Zipf exponent of the categorical values (default 1.1)\n"
"      --scale X         vocabulary sizes are Criteo's times X (default 1)\n"
"      --cardinality C   zipf (default) or kaggle: a uniform tail, millions of ids a large slot\n"
"      --interactions N  plant N second-order interactions between slot pairs (0-8, default 0)\n"
"      --meta FILE       write rows, seed, planted AUC and log loss as JSON\n"
"      --days N          N days of ROWS rows each: -o DIR gets DIR/day-01 .. DIR/day-N\n"
"      --drift P         share of each slot's values replaced by new ones a day (default 0.1)\n"
"General:\n"
"  -q, --quiet           errors only\n"
"  -v, --verbose         more messages\n"
"      --progress        show progress even when stderr is not a terminal\n"
"      --no-progress     never show progress\n"
"  -h, --help            this help\n"
"  -V, --version         version\n");
}

enum {
    OPT_CLASSES = 256, OPT_FORMAT, OPT_DENSE, OPT_TRANSFORM, OPT_HASH, OPT_HASH_SEED, OPT_BUCKETS, OPT_SKIP_BAD,
    OPT_HOLDOUT, OPT_SHUFFLE, OPT_SHUFFLE_MEM, OPT_SERVERS, OPT_FORCE, OPT_BLOCK_ROWS, OPT_AS,
    OPT_VERIFY, OPT_ZIPF, OPT_SCALE, OPT_META, OPT_PROGRESS, OPT_NO_PROGRESS, OPT_CARDINALITY,
    OPT_INTERACTIONS, OPT_DAYS, OPT_DRIFT
};

static const struct option long_opts[] = {
    {"format", required_argument, 0, OPT_FORMAT},     {"model", required_argument, 0, 'm'},
    {"classes", required_argument, 0, OPT_CLASSES}, {"dense", required_argument, 0, OPT_DENSE},
    {"transform", required_argument, 0, OPT_TRANSFORM}, {"hash", required_argument, 0, OPT_HASH},
    {"hash-seed", required_argument, 0, OPT_HASH_SEED}, {"buckets", required_argument, 0, OPT_BUCKETS},
    {"skip-bad", no_argument, 0, OPT_SKIP_BAD}, {"shards", required_argument, 0, 'n'},
    {"weights", required_argument, 0, 'w'},    {"plan", required_argument, 0, 'P'},
    {"holdout", required_argument, 0, OPT_HOLDOUT}, {"shuffle", no_argument, 0, OPT_SHUFFLE},
    {"seed", required_argument, 0, 's'},       {"shuffle-mem", required_argument, 0, OPT_SHUFFLE_MEM},
    {"servers", required_argument, 0, OPT_SERVERS}, {"output", required_argument, 0, 'o'},
    {"force", no_argument, 0, OPT_FORCE},      {"level", required_argument, 0, 'l'},
    {"block-rows", required_argument, 0, OPT_BLOCK_ROWS}, {"threads", required_argument, 0, 'T'},
    {"as", required_argument, 0, OPT_AS},      {"verify", no_argument, 0, OPT_VERIFY},
    {"zipf", required_argument, 0, OPT_ZIPF},  {"scale", required_argument, 0, OPT_SCALE},
    {"meta", required_argument, 0, OPT_META},  {"quiet", no_argument, 0, 'q'},
    {"cardinality", required_argument, 0, OPT_CARDINALITY},
    {"interactions", required_argument, 0, OPT_INTERACTIONS},
    {"days", required_argument, 0, OPT_DAYS}, {"drift", required_argument, 0, OPT_DRIFT},
    {"verbose", no_argument, 0, 'v'},          {"progress", no_argument, 0, OPT_PROGRESS},
    {"no-progress", no_argument, 0, OPT_NO_PROGRESS}, {"help", no_argument, 0, 'h'},
    {"version", no_argument, 0, 'V'},          {0, 0, 0, 0}};

typedef struct {
    const char *format, *model, *transform, *hash, *weights, *plan, *output, *as, *meta;
    long classes, dense, shards, servers, level, block_rows, threads, shuffle_mem, interactions, days;
    int kaggle;
    long long hash_seed, seed, buckets;
    double holdout, zipf, scale, drift;
    int skip_bad, shuffle, force, verify, progress;
    int shards_given, seed_given, servers_given;
} options;

static _Noreturn void die_usage(const char *fmt, const char *arg)
{
    char msg[512];
    snprintf(msg, sizeof msg, fmt, arg);
    hps_usage_error("%s", msg);
}

static long opt_long(const char *name, const char *arg, long min, long max)
{
    char opt[64];
    snprintf(opt, sizeof opt, "--%s", name);
    return hps_cli_long(opt, arg, min, max);
}

static long opt_count(const char *name, const char *arg, long min, long max) /* 500k, 2e5, 1.5M */
{
    char opt[64];
    snprintf(opt, sizeof opt, "--%s", name);
    return hps_cli_count(opt, arg, min, max);
}

static double opt_double(const char *name, const char *arg, double min, double max)
{
    char opt[64];
    snprintf(opt, sizeof opt, "--%s", name);
    return hps_cli_double(opt, arg, min, max);
}

static void parse_options(int argc, char **argv, options *o)
{
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    *o = (options){.format = "criteo", .shards = 1, .level = 1, .block_rows = 4096,
                   .threads = cpus > 0 ? cpus : 1, .shuffle_mem = 64, .zipf = 1.1, .scale = 1, .drift = 0.1,
                   .progress = hps_stderr_is_tty()};
    int c;
    while ((c = hps_cli_getopt(argc, argv, "f:m:n:w:P:p:s:o:l:T:qvhV", long_opts)) != -1) {
        switch (c) {
        case 'f': hps_cli_deprecated_letter('f', "format", 0); /* fallthrough */
        case OPT_FORMAT: o->format = optarg; break;
        case 'm': o->model = optarg; break;
        case OPT_CLASSES: o->classes = opt_long("classes", optarg, 2, HPS_DATA_MAX_CLASSES); break;
        case OPT_DENSE: o->dense = opt_long("dense", optarg, 1, HPS_DATA_MAX_DENSE); break;
        case OPT_TRANSFORM: o->transform = optarg; break;
        case OPT_HASH: o->hash = optarg; break;
        case OPT_HASH_SEED: o->hash_seed = opt_long("hash-seed", optarg, 0, LONG_MAX); break;
        case OPT_BUCKETS: o->buckets = opt_count("buckets", optarg, 1, LONG_MAX); break;
        case OPT_SKIP_BAD: o->skip_bad = 1; break;
        case 'n': o->shards = opt_count("shards", optarg, 1, HPS_MAX_SHARDS), o->shards_given = 1; break;
        case 'w': o->weights = optarg; break;
        case 'p': hps_cli_deprecated_letter('p', "plan", 'P'); /* fallthrough */
        case 'P': o->plan = optarg; break;
        case OPT_HOLDOUT: o->holdout = opt_double("holdout", optarg, 0, 0.999999); break;
        case OPT_SHUFFLE: o->shuffle = 1; break;
        case 's': o->seed = opt_long("seed", optarg, 0, LONG_MAX), o->seed_given = 1; break;
        case OPT_SHUFFLE_MEM: o->shuffle_mem = opt_long("shuffle-mem", optarg, 1, 1 << 20); break;
        case OPT_SERVERS: o->servers = opt_long("servers", optarg, 1, HPS_MAX_SERVERS), o->servers_given = 1; break;
        case 'o': o->output = optarg; break;
        case OPT_FORCE: o->force = 1; break;
        case 'l': o->level = opt_long("level", optarg, -7, 19); break;
        case OPT_BLOCK_ROWS: o->block_rows = opt_count("block-rows", optarg, 1, HPS_SHARD_MAX_BLOCK_ROWS); break;
        case 'T': o->threads = opt_long("threads", optarg, 1, 1024); break;
        case OPT_AS: o->as = optarg; break;
        case OPT_VERIFY: o->verify = 1; break;
        case OPT_ZIPF: o->zipf = opt_double("zipf", optarg, 0.01, 10); break;
        case OPT_SCALE: o->scale = opt_double("scale", optarg, 1e-9, 1000); break;
        case OPT_META: o->meta = optarg; break;
        case OPT_CARDINALITY: {
            static const char *const names[] = {"zipf", "kaggle", NULL};
            o->kaggle = hps_cli_choice("--cardinality", optarg, names) == 1;
            break;
        }
        case OPT_INTERACTIONS: o->interactions = opt_long("interactions", optarg, 0, HPS_SYNTH_MAX_INTERACTIONS); break;
        case OPT_DAYS: o->days = opt_long("days", optarg, 1, 999); break;
        case OPT_DRIFT: o->drift = opt_double("drift", optarg, 0, 1); break;
        case 'q': hps_cli_quiet(); break;
        case 'v': hps_cli_verbose(); break;
        case OPT_PROGRESS: o->progress = 1; break;
        case OPT_NO_PROGRESS: o->progress = 0; break;
        case 'h': usage(stdout); exit(0);
        case 'V': hps_cli_version(stdout); exit(0);
        }
    }
    if (hps_display_level < 2) o->progress = 0;
}

static int choice(const char *name, const char *arg, const char *const *names)
{
    char opt[64];
    snprintf(opt, sizeof opt, "--%s", name);
    return hps_cli_choice(opt, arg, names);
}

/* ---- shard ------------------------------------------------------------------- */

/* |dense value| beyond which raw values look unscaled (a count, a pixel 0..255) */
#define HPS_DENSE_UNSCALED 100.0

static double *parse_weights(const char *s, int *n)
{
    double *w = hps_malloc((strlen(s) / 2 + 1) * sizeof *w), sum = 0;
    *n = 0;
    const char *p = s;
    for (;;) {
        char *end;
        double v = strtod(p, &end);
        if (end == p || !(v >= 0) || isinf(v) || (*end && *end != ',')) die_usage("--weights: expected non-negative numbers separated by commas, got '%s'", s);
        w[(*n)++] = v, sum += v;
        if (!*end) break;
        p = end + 1;
    }
    if (sum <= 0) die_usage("--weights: '%s' sums to zero", s);
    return w;
}

/* The model's input must be what this data gives; its slot names are used. */
static int check_model(const options *op, hps_shard_opts *so, hps_model **mp, hps_error *err)
{
    hps_model *m = hps_model_load(op->model, err);
    if (!m) return -1;
    *mp = m;
    hps_schema *s = &so->parse.schema;
    if (m->label == HPS_LABEL_MULTICLASS && so->parse.format == HPS_FMT_LIBSVM && !op->classes)
        s->multiclass = 1, s->classes = m->classes;
    /* a dense-only model takes Criteo's 13 counts; its 26 categorical fields are dropped */
    if (so->parse.format == HPS_FMT_CRITEO && m->n_slots == 0 && m->n_dense == s->n_dense)
        s->n_slots = 0;
    if (m->n_dense != s->n_dense || m->n_slots != s->n_slots)
        return hps_fail(err, HPS_EXIT_USAGE, "%s: input has %d dense features and %d slots, %s data gives %d and %d",
                        op->model, m->n_dense, m->n_slots, hps_data_format_names[so->parse.format], s->n_dense, s->n_slots);
    if ((m->label == HPS_LABEL_MULTICLASS) != s->multiclass || m->classes != s->classes)
        return hps_fail(err, HPS_EXIT_USAGE, "%s: label has %d classes, the data %d", op->model, m->classes, s->classes);
    so->slot_names = hps_malloc((size_t)(m->n_slots ? m->n_slots : 1) * sizeof *so->slot_names);
    for (int j = 0; j < m->n_slots; j++) so->slot_names[j] = m->slots[j].name;
    so->model_name = m->name;
    so->model_digest = m->digest;
    return 0;
}

static int shard(const options *op, int n_inputs, char **inputs)
{
    if (!op->output) die_usage("%s", "-o DIR is required");
    if (n_inputs == 0) die_usage("%s", "no input (give files, or '-' for stdin)");
    if ((op->weights != NULL) + (op->plan != NULL) + op->shards_given > 1)
        die_usage("%s", "give one of --shards, --weights and --plan");
    hps_shard_opts so = {0};
    hps_parse_opts *po = &so.parse;
    po->format = (hps_data_format)choice("format", op->format, hps_data_format_names);
    if (po->format == HPS_FMT_CRITEO) {
        if (op->dense || op->classes) die_usage("%s", "--dense and --classes are for libsvm input");
        po->schema = (hps_schema){HPS_CRITEO_DENSE, HPS_CRITEO_SLOTS, 0, 0, 2};
        po->transform = HPS_TRANSFORM_LOG;
    } else {
        po->schema = (hps_schema){(int)op->dense, op->dense ? 0 : 1, !op->dense, op->classes > 2, op->classes ? (int)op->classes : 2};
        po->transform = HPS_TRANSFORM_NONE;
    }
    if (op->transform) po->transform = (hps_transform)choice("transform", op->transform, hps_transform_names);
    po->hash = op->hash ? (hps_hash_kind)choice("hash", op->hash, hps_hash_names) : HPS_HASH_MIX64;
    po->seed = (uint64_t)op->hash_seed;
    po->buckets = (uint64_t)op->buckets;
    hps_error err = {{0}, 0};
    hps_model *model = NULL;
    double *shares = NULL;
    char digest[72] = "";
    int servers = 0, rc = -1;
    so.inputs = (const char *const *)inputs;
    so.n_inputs = n_inputs;
    so.out_dir = op->output;
    so.force = op->force;
    so.n_shards = (int)op->shards;
    so.split_method = "shards";
    if (op->weights) {
        shares = parse_weights(op->weights, &so.n_shards);
        so.split_method = "weights";
    } else if (op->plan) {
        if (hps_plan_read(op->plan, &shares, &so.n_shards, &servers, digest, &err) != 0) goto out;
        so.split_method = "plan";
        so.plan_path = op->plan;
        so.plan_digest = digest;
    }
    so.shares = shares;
    if (op->model && check_model(op, &so, &model, &err) != 0) goto out;
    so.holdout = op->holdout;
    so.shuffle = op->shuffle;
    so.shuffle_seed = (uint64_t)op->seed;
    so.shuffle_mem = (size_t)op->shuffle_mem << 20;
    so.skip_bad = op->skip_bad;
    so.threads = (int)op->threads;
    so.level = (int)op->level;
    so.block_rows = (int)op->block_rows;
    so.servers = op->servers_given ? (int)op->servers : servers;
    so.progress = op->progress;
    hps_shard_result res;
    if (hps_shard_run(&so, &res, &err) != 0) goto out;
    /* compressed input: its decompressed size too, which is what was parsed */
    char in_size[64];
    if (res.text_bytes > res.bytes_in)
        snprintf(in_size, sizeof in_size, "%.1f MB (%.1f MB compressed)", (double)res.text_bytes / 1e6,
                 (double)res.bytes_in / 1e6);
    else snprintf(in_size, sizeof in_size, "%.1f MB", (double)res.bytes_in / 1e6);
    hps_log(2, "%s: %llu row%s in %d shard%s%s, %s -> %.1f MB in %.2f s (%.0f MB/s, %.0f rows/s)\n",
            op->output, (unsigned long long)res.rows, res.rows == 1 ? "" : "s", so.n_shards, so.n_shards == 1 ? "" : "s",
            so.holdout > 0 ? " + holdout" : "", in_size, (double)res.bytes_out / 1e6,
            res.seconds, (double)res.bytes_in / 1e6 / res.seconds, (double)res.rows / res.seconds);
    /* libsvm's default keeps raw values: a count column in the thousands
     * saturates the first layer and trains to nonsense without a word */
    if (!op->transform && po->transform == HPS_TRANSFORM_NONE && res.dense_max_abs > HPS_DENSE_UNSCALED)
        hps_warnf("dense feature %d reaches %g and the values are kept raw (--transform none, the libsvm "
                  "default): give --transform log, or scale the data",
                  res.dense_max_col + 1, res.dense_max_abs);
    if (res.skipped) hps_warnf("skipped %llu malformed line%s", (unsigned long long)res.skipped, res.skipped == 1 ? "" : "s");
    rc = 0;
out:
    if (rc) {
        hps_report(&err);
        rc = err.code ? err.code : HPS_EXIT_RUNTIME;
    }
    free(shares);
    free(so.slot_names);
    hps_model_free(model);
    return rc;
}

/* ---- cat ------------------------------------------------------------------------ */

static int is_dir(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

static int cat(const options *op, int n, char **paths)
{
    if (n == 0) die_usage("%s", "cat: give a shard directory or shard files");
    int as = op->as ? choice("as", op->as, (const char *const[]){"tsv", "libsvm", NULL}) : -1;
    hps_error err = {{0}, 0};
    hps_out *out = hps_out_open(op->output ? op->output : "-", &err);
    int rc = out ? 0 : -1;
    for (int i = 0; i < n && rc == 0; i++) {
        if (!is_dir(paths[i])) {
            rc = hps_shard_cat(paths[i], as == 1, hps_out_file(out), &err);
            continue;
        }
        hps_manifest *m = hps_manifest_load(paths[i], &err);
        if (!m) {
            rc = -1;
            break;
        }
        int libsvm = as >= 0 ? as == 1 : m->format == HPS_FMT_LIBSVM;
        for (int s = 0; s < m->n_shards && rc == 0; s++) {
            char *p = hps_manifest_shard_path(m, s);
            rc = hps_shard_cat(p, libsvm, hps_out_file(out), &err);
            free(p);
        }
        hps_manifest_free(m);
    }
    if (rc == 0) rc = hps_out_commit(out, &err);
    else if (out) hps_out_abort(out);
    if (rc == 0) return 0;
    hps_report(&err);
    return err.code ? err.code : HPS_EXIT_RUNTIME;
}

/* ---- stats ----------------------------------------------------------------------- */

static int stats(const options *op, int n, char **paths)
{
    if (n != 1) die_usage("%s", "stats: give one shard directory");
    hps_error err = {{0}, 0};
    hps_manifest *m = hps_manifest_load(paths[0], &err);
    int rc = m ? 0 : -1;
    if (rc == 0) hps_manifest_print_stats(stdout, m);
    if (rc == 0 && op->verify) {
        rc = hps_manifest_verify(m, &err);
        if (rc == 0) printf("\nverified: every block and checksum of %d shard%s\n", m->n_shards, m->n_shards == 1 ? "" : "s");
    }
    if (rc == 0 && (fflush(stdout) != 0 || ferror(stdout)))
        rc = hps_fail(&err, HPS_EXIT_RUNTIME, "<stdout>: write failed: %s", strerror(errno));
    hps_manifest_free(m);
    if (rc == 0) return 0;
    hps_report(&err);
    return err.code ? err.code : HPS_EXIT_RUNTIME;
}

/* ---- synth ------------------------------------------------------------------------ */

/* One synthetic file: path, or stdout for NULL. */
static int synth_one(const options *op, const hps_synth_opts *so, const char *path, hps_error *err)
{
    hps_synth_result res;
    hps_out *out = hps_out_open(path ? path : "-", err);
    int rc = out ? hps_synth(so, hps_out_file(out), hps_out_name(out), &res, err) : -1;
    if (rc == 0) rc = hps_out_commit(out, err);
    else if (out) hps_out_abort(out);
    if (rc != 0) return rc;
    char day[32] = "";
    if (so->day) snprintf(day, sizeof day, " day %d:", so->day);
    hps_log(2, "%s: synth:%s %llu rows, %.1f%% positive, planted model AUC %.4f, log loss %.4f\n", hps_progname(),
            day, (unsigned long long)res.rows, res.rows ? 100.0 * (double)res.positives / (double)res.rows : 0,
            res.auc, res.logloss);
    if (!op->meta || (so->day && so->day != op->days)) return 0;
    json_t *j = json_pack("{s:s, s:I, s:I, s:f, s:f, s:s, s:i, s:o, s:o, s:I}", "generator",
                          "hps-shard synth " HPS_VERSION, "rows", (json_int_t)res.rows, "seed",
                          (json_int_t)so->seed, "zipf", so->zipf_s, "scale", so->scale, "cardinality",
                          so->kaggle ? "kaggle" : "zipf", "interactions", so->interactions, "planted_auc",
                          hps_json_real(res.auc), "planted_logloss", hps_json_real(res.logloss), "positives",
                          (json_int_t)res.positives);
    if (so->day) /* --days: the figures are the last day's */
        json_object_set_new(j, "days", json_integer(op->days)), json_object_set_new(j, "drift", json_real(so->drift));
    rc = hps_json_write(op->meta, j, err);
    json_decref(j);
    return rc;
}

static int synth(const options *op, int n, char **args)
{
    if (n != 1) die_usage("%s", "synth: give the number of rows");
    long rows = opt_count("synth ROWS", args[0], 0, LONG_MAX);
    if (op->days && !op->output) die_usage("%s", "synth --days: give the output directory (-o DIR)");
    hps_synth_opts so = {.rows = (uint64_t)rows, .seed = (uint64_t)op->seed, .zipf_s = op->zipf, .scale = op->scale,
                         .kaggle = op->kaggle, .interactions = (int)op->interactions, .threads = (int)op->threads,
                         .progress = op->progress && op->output, .drift = op->drift};
    hps_error err = {{0}, 0};
    int rc = 0;
    if (!op->days) rc = synth_one(op, &so, op->output, &err);
    else if (mkdir(op->output, 0777) != 0 && errno != EEXIST)
        rc = hps_fail(&err, HPS_EXIT_RUNTIME, "%s: cannot create: %s", op->output, strerror(errno));
    for (int d = 1; rc == 0 && d <= op->days; d++) {
        char path[4200];
        snprintf(path, sizeof path, "%s/day-%02d", op->output, d);
        so.day = d;
        rc = synth_one(op, &so, path, &err);
    }
    if (rc == 0) return 0;
    hps_report(&err);
    return err.code ? err.code : HPS_EXIT_RUNTIME;
}

/* ---- commands -------------------------------------------------------------------- */

/* Each takes the options every command shares, and its operands. */
static int run(int argc, char **argv, int (*fn)(const options *, int, char **))
{
    options op;
    parse_options(argc, argv, &op);
    return fn(&op, argc - optind, argv + optind);
}

static int cmd_shard(int argc, char **argv) { return run(argc, argv, shard); }
static int cmd_cat(int argc, char **argv) { return run(argc, argv, cat); }
static int cmd_stats(int argc, char **argv) { return run(argc, argv, stats); }
static int cmd_synth(int argc, char **argv) { return run(argc, argv, synth); }

int main(int argc, char **argv)
{
    static const hps_cli_command commands[] = {
        {"cat", cmd_cat}, {"stats", cmd_stats}, {"synth", cmd_synth}, {NULL, NULL}};
    hps_set_progname(argv[0]);
    hps_blas_init(argv); /* may re-execute: before anything else happens */
    return hps_cli_dispatch(argc, argv, commands, cmd_shard, HPS_CLI_FILES);
}
