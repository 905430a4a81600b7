/* Synthetic Criteo-format data with a planted model (hps-shard synth).
 *
 * Each row: 13 count-like integers (log-normal, I2 sometimes negative) and
 * 26 categoricals drawn from Zipf laws over vocabularies the size of the
 * Criteo Kaggle set's, both missing at Criteo's rates.  With --cardinality
 * kaggle a share of each slot's values is drawn uniformly over its whole
 * vocabulary instead (the long tail of rare ids that gives the Kaggle set
 * its millions of distinct values: tail_share below).  The label is drawn
 * from a planted logistic model:
 *
 *   logit = BIAS + sum_d DENSE_W[d] * ln(1 + max(x_d, 0))
 *                + sum_s STRENGTH * g(seed, s, rank_s)   when rank_s <= HEAD
 *                + sum_p INTER * g(seed', a_p, rank_a) * g(seed', b_p, rank_b)
 *                                          when both ranks <= HEAD
 *
 * over the first --interactions pairs (a_p, b_p) of INTERACTION_PAIRS: a
 * product of two zero-mean effects, which a linear model cannot see (each
 * value alone carries none of it on average) and a factorization machine
 * or an MLP can learn, so that the model families separate on the data.
 *
 * where g is a standard normal derived from a hash, so every one of the
 * HEAD most frequent values of a slot carries a fixed effect and rarer
 * values carry none (a model can learn what it sees often; the rest is
 * noise it must learn to ignore).  The AUC and log loss of the planted
 * probabilities on the rows written are what a perfect model would score.
 *
 * Days (--days, --drift P): on day d the value at popularity rank r is
 * generation gen = floor(d * P + u_r) of that rank, u_r uniform in [0, 1)
 * by hash, so a share P of each slot's ranks gets a new value each day,
 * spread evenly over the days.  The value a rank leaves fades rather than
 * vanishing: on the k-th day of a generation a draw of the rank still
 * gives the previous value with probability FADE^k.  A value's planted
 * effect and its key follow the value (rank and generation), never the day,
 * so one planted model labels every day and the next day's data evaluates
 * what was learned today.  Generation 0 is the value of a run without days. */
#include "data/hps_shard_job.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/hps_rng.h"

#define HEAD 200
#define STRENGTH 0.35
#define BIAS (-1.7)
#define AUC_BINS (1 << 16)
#define INTER 0.6
#define FADE 0.5
/* The Criteo Kaggle set's rows: --cardinality kaggle's tail is sized so that
 * a set this large sees about 95% of every slot's vocabulary. */
#define KAGGLE_ROWS 45840617.0
#define TAIL_SEEN 3.0  /* draws from the tail per vocabulary entry: 1 - e^-3 = 95% seen */
#define TAIL_MAX 0.5

/* Slot pairs of the planted interactions: slots never missing, of a few to
 * ten thousands of values, so that a pair's head values meet often. */
static const int INTERACTION_PAIRS[HPS_SYNTH_MAX_INTERACTIONS][2] = {
    {0, 1}, {4, 6}, {7, 10}, {12, 13}, {14, 17}, {0, 9}, {1, 16}, {6, 12}};

static const double vocab[HPS_CRITEO_SLOTS] = {
    1460, 583, 10131227, 2202608, 305, 24, 12517, 633, 3, 93145, 5683, 8351593, 3194,
    27, 14992, 5461306, 10, 5652, 2173, 4, 7046547, 18, 15, 286181, 105, 142572};
static const double cat_missing[HPS_CRITEO_SLOTS] = {
    0, 0, .034, .034, 0, .12, 0, 0, 0, 0, 0, .034, 0, 0, 0, .034, 0, 0, .44, .44, .034, .76, 0, .034, .44, .44};
static const double dense_missing[HPS_CRITEO_DENSE] = {
    .45, 0, .21, .22, .026, .22, .043, .0005, .043, .45, .043, .77, .22};
static const double dense_mu[HPS_CRITEO_DENSE] = {0.8, 1.5, 2.2, 1.6, 7.5, 3.5, 1.5, 2.3, 3.8, 0.3, 1.0, 0.5, 1.9};
static const double dense_w[HPS_CRITEO_DENSE] = {
    0.12, -0.05, -0.04, 0.03, -0.03, -0.06, 0.10, 0.02, 0.05, 0.20, 0.15, 0.05, -0.04};

typedef struct {
    const hps_synth_opts *o;
    hps_zipf zipf[HPS_CRITEO_SLOTS];
    uint64_t vocab[HPS_CRITEO_SLOTS];
    double tail[HPS_CRITEO_SLOTS]; /* share of values drawn uniformly over the vocabulary */
} synth;

/* --cardinality kaggle: the share of a slot's values drawn from the
 * uniform tail, so that KAGGLE_ROWS rows draw TAIL_SEEN per vocabulary
 * entry (at most TAIL_MAX: the head stays a power law). */
static double tail_share(double vocab_size, double missing)
{
    double share = TAIL_SEEN * vocab_size / (KAGGLE_ROWS * (1 - missing));
    return share < TAIL_MAX ? share : TAIL_MAX;
}

/* A standard normal that depends only on (seed, slot, rank). */
static double planted_effect(uint64_t seed, int slot, uint64_t rank)
{
    uint64_t h = hps_mix64(seed ^ hps_mix64(((uint64_t)slot << 40) ^ rank));
    double u1 = ((double)(h >> 11) + 0.5) * 0x1.0p-53, u2 = (double)(hps_mix64(h) >> 11) * 0x1.0p-53;
    return sqrt(-2 * log(u1)) * cos(2 * M_PI * u2);
}

/* The planted interactions of a row's ranks (0: missing): each pair's
 * effects drawn apart from the main ones (another seed). */
static double interactions(const hps_synth_opts *o, const uint64_t *ranks, const uint64_t *values)
{
    double sum = 0;
    uint64_t seed = hps_mix64(o->seed ^ 0x1a7e5ac7ULL);
    for (int k = 0; k < o->interactions; k++) {
        uint64_t ra = ranks[INTERACTION_PAIRS[k][0]], rb = ranks[INTERACTION_PAIRS[k][1]];
        if (ra && rb && ra <= HEAD && rb <= HEAD)
            sum += INTER * planted_effect(seed + (uint64_t)k, INTERACTION_PAIRS[k][0], values[INTERACTION_PAIRS[k][0]]) *
                   planted_effect(seed + (uint64_t)k, INTERACTION_PAIRS[k][1], values[INTERACTION_PAIRS[k][1]]);
    }
    return sum;
}

static char *put_int(char *p, long long v)
{
    char tmp[24];
    int n = 0;
    unsigned long long u = v < 0 ? (unsigned long long)(-v) : (unsigned long long)v;
    if (v < 0) *p++ = '-';
    do tmp[n++] = (char)('0' + u % 10), u /= 10;
    while (u);
    while (n) *p++ = tmp[--n];
    return p;
}

static char *put_hex8(char *p, uint32_t v)
{
    static const char digits[] = "0123456789abcdef";
    for (int i = 7; i >= 0; i--) *p++ = digits[(v >> (4 * i)) & 15];
    return p;
}

typedef struct {
    char *text;
    size_t len;
    uint32_t *pos, *neg; /* AUC histograms over the planted probability */
    double logloss;
    uint64_t positives;
} chunk;

/* The value a draw of `rank` in slot j gives on o->day: rank and generation
 * (above), as one number; the rank itself without days. */
static uint64_t day_value(const hps_synth_opts *o, int j, uint64_t rank, hps_rng *r)
{
    if (!o->day || o->drift <= 0) return rank;
    uint64_t h = hps_mix64(o->seed ^ 0xd41f7ULL ^ ((uint64_t)j << 48) ^ rank);
    double u = (double)(h >> 11) * 0x1.0p-53, at = o->day * o->drift + u;
    uint64_t gen = (uint64_t)floor(at);
    /* the first day of this generation, and how many days it has run */
    int first = (int)ceil(((double)gen - u) / o->drift), age = o->day - first + 1;
    if (gen > 0 && age >= 1 && hps_rng_uniform(r) < pow(FADE, age)) gen--;
    return rank ^ (gen << 36);
}

static void gen_chunk(const synth *s, uint64_t c, uint64_t rows, chunk *out)
{
    const hps_synth_opts *o = s->o;
    hps_rng r;
    hps_rng_seed(&r, o->seed ^ hps_mix64(c + 1) ^ (o->day ? hps_mix64(0xda7ULL + (uint64_t)o->day) : 0));
    char *p = out->text;
    for (uint64_t i = 0; i < rows; i++) {
        char *line = p;
        p += 2; /* label and tab, filled in at the end */
        double logit = BIAS;
        for (int d = 0; d < HPS_CRITEO_DENSE; d++) {
            if (hps_rng_uniform(&r) >= dense_missing[d]) {
                long long x = (long long)floor(exp(dense_mu[d] + 1.3 * hps_rng_normal(&r))) - 1;
                if (d == 1 && hps_rng_uniform(&r) < 0.05) x = -1 - (long long)hps_rng_below(&r, 3);
                p = put_int(p, x);
                logit += dense_w[d] * log1p(x > 0 ? (double)x : 0);
            }
            *p++ = '\t';
        }
        uint64_t ranks[HPS_CRITEO_SLOTS], values[HPS_CRITEO_SLOTS]; /* rank 0: missing */
        for (int j = 0; j < HPS_CRITEO_SLOTS; j++) {
            ranks[j] = values[j] = 0;
            if (hps_rng_uniform(&r) >= cat_missing[j]) {
                uint64_t rank = s->tail[j] > 0 && hps_rng_uniform(&r) < s->tail[j]
                                    ? 1 + hps_rng_below(&r, s->vocab[j])
                                    : hps_zipf_draw(&s->zipf[j], &r);
                ranks[j] = rank;
                uint64_t value = values[j] = day_value(o, j, rank, &r);
                p = put_hex8(p, (uint32_t)hps_mix64(o->seed ^ ((uint64_t)j << 48) ^ value));
                if (rank <= HEAD) logit += STRENGTH * planted_effect(o->seed, j, value);
            }
            *p++ = j + 1 < HPS_CRITEO_SLOTS ? '\t' : '\n';
        }
        logit += interactions(o, ranks, values);
        double prob = 1 / (1 + exp(-logit));
        int y = hps_rng_uniform(&r) < prob;
        line[0] = (char)('0' + y), line[1] = '\t';
        int bin = (int)(prob * AUC_BINS);
        if (bin >= AUC_BINS) bin = AUC_BINS - 1;
        (y ? out->pos : out->neg)[bin]++;
        out->positives += (uint64_t)y;
        out->logloss -= y ? log(prob) : log1p(-prob);
    }
    out->len = (size_t)(p - out->text);
}

/* AUC from histograms: pairs ordered right count 1, pairs in one bin 1/2. */
static double auc_of(const uint64_t *pos, const uint64_t *neg)
{
    double below = 0, pairs = 0, P = 0, N = 0;
    for (int b = 0; b < AUC_BINS; b++) {
        pairs += (double)pos[b] * (below + 0.5 * (double)neg[b]);
        below += (double)neg[b];
        P += (double)pos[b], N += (double)neg[b];
    }
    return P > 0 && N > 0 ? pairs / (P * N) : NAN;
}

int hps_synth(const hps_synth_opts *o, FILE *out, const char *out_name, hps_synth_result *res,
              hps_error *err)
{
    synth s = {.o = o};
    for (int j = 0; j < HPS_CRITEO_SLOTS; j++) {
        double n = floor(vocab[j] * o->scale);
        s.vocab[j] = n < 2 ? 2 : (uint64_t)n;
        hps_zipf_init(&s.zipf[j], s.vocab[j], o->zipf_s);
        s.tail[j] = o->kaggle ? tail_share(vocab[j], cat_missing[j]) : 0;
    }
    int batch = 4 * (o->threads > 0 ? o->threads : 1);
    chunk *ch = hps_calloc((size_t)batch, sizeof *ch);
    for (int i = 0; i < batch; i++) {
        ch[i].text = hps_malloc((size_t)HPS_SYNTH_CHUNK * 512);
        ch[i].pos = hps_calloc(AUC_BINS, sizeof *ch[i].pos);
        ch[i].neg = hps_calloc(AUC_BINS, sizeof *ch[i].neg);
    }
    uint64_t *pos = hps_calloc(AUC_BINS, sizeof *pos), *neg = hps_calloc(AUC_BINS, sizeof *neg);
    uint64_t n_chunks = (o->rows + HPS_SYNTH_CHUNK - 1) / HPS_SYNTH_CHUNK;
    memset(res, 0, sizeof *res);
    int rc = 0;
    double t0 = hps_now(), last = t0;
    for (uint64_t c0 = 0; c0 < n_chunks && rc == 0; c0 += (uint64_t)batch) {
        int k = (int)(n_chunks - c0 < (uint64_t)batch ? n_chunks - c0 : (uint64_t)batch);
#pragma omp parallel for num_threads(o->threads > 0 ? o->threads : 1) schedule(dynamic, 1)
        for (int i = 0; i < k; i++) {
            uint64_t c = c0 + (uint64_t)i, first = c * HPS_SYNTH_CHUNK;
            uint64_t rows = o->rows - first < HPS_SYNTH_CHUNK ? o->rows - first : HPS_SYNTH_CHUNK;
            ch[i].logloss = 0, ch[i].positives = 0;
            memset(ch[i].pos, 0, AUC_BINS * sizeof *ch[i].pos);
            memset(ch[i].neg, 0, AUC_BINS * sizeof *ch[i].neg);
            gen_chunk(&s, c, rows, &ch[i]);
        }
        for (int i = 0; i < k && rc == 0; i++) {
            if (fwrite(ch[i].text, 1, ch[i].len, out) != ch[i].len)
                rc = hps_fail(err, HPS_EXIT_RUNTIME, "%s: write failed: %s", out_name, strerror(errno));
            res->bytes += ch[i].len;
            res->logloss += ch[i].logloss;
            res->positives += ch[i].positives;
            for (int b = 0; b < AUC_BINS; b++) pos[b] += ch[i].pos[b], neg[b] += ch[i].neg[b];
        }
        res->rows = (c0 + (uint64_t)k) * HPS_SYNTH_CHUNK < o->rows ? (c0 + (uint64_t)k) * HPS_SYNTH_CHUNK : o->rows;
        if (o->progress && hps_now() - last > 0.25) {
            last = hps_now();
            fprintf(stderr, "\r%s: synth %5.1f%%  %llu rows ", hps_progname(),
                    100.0 * (double)res->rows / (double)o->rows, (unsigned long long)res->rows);
        }
    }
    if (o->progress) fputc('\n', stderr);
    res->auc = auc_of(pos, neg);
    res->logloss = res->rows ? res->logloss / (double)res->rows : NAN;
    for (int i = 0; i < batch; i++) free(ch[i].text), free(ch[i].pos), free(ch[i].neg);
    free(ch), free(pos), free(neg);
    return rc;
}
