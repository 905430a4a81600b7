/* Memory (hps-plan(1), MEMORY): what one unit of a stage holds, where the
 * embedding rows live (servers, HBM, or a GPU cache of the hot rows in front
 * of the host tables or the servers), what a cache of C rows serves, and how
 * many parameter servers the rows need. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "plan/hps_plan.h"
#include "plan/plan_internal.h"

const char *const plan_rows_names[] = {"none", "servers", "hbm", "cache", NULL};
const char *const plan_sparse_optimizer_names[] = {"adagrad", "rowwise-adagrad", NULL};

/* Share of lookups by the hottest r rows, from measured points: linear below
 * the first point, log-log between points and past the last, at most 1. */
static double share_at(double r, int n, const double *x, const double *y)
{
    if (r <= x[0]) return y[0] * r / x[0];
    int i = 1;
    while (i < n - 1 && x[i] < r) i++;
    if (n == 1 || y[i - 1] <= 0 || y[i] <= y[i - 1] || x[i] <= x[i - 1])
        return fmin(1, y[n - 1] * (r >= x[n - 1] ? r / x[n - 1] : 1));
    double slope = log(y[i] / y[i - 1]) / log(x[i] / x[i - 1]);
    return fmin(1, y[i - 1] * pow(r / x[i - 1], slope));
}

/* Share of a slot's lookups by its hottest r of `rows` rows: its key
 * statistics, else the default skew. */
static double slot_share(const plan_key_stats *k, double rows, double r)
{
    if (r >= rows) return 1;
    if (!k || !k->n_points || rows <= 0) return pow(r / rows, PLAN_DEFAULT_SKEW);
    return share_at(r, k->n_points, k->n, k->share);
}

/* Rows of one slot that are looked up equally often: `rows` rows take
 * `lookups` a batch, each per_epoch an epoch of the data, which is `epoch`
 * batches (0: not known, without --data-stats); weight: the model's
 * lookups a batch over the data's. */
typedef struct {
    double rows, lookups, bytes, table, freq, per_epoch, epoch, weight;
} row_block;

typedef struct {
    row_block *b;
    int n, cap;
} block_list;

static void push_block(block_list *l, row_block b)
{
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 256;
        l->b = hps_realloc(l->b, (size_t)l->cap * sizeof *l->b);
    }
    l->b[l->n++] = b;
}

/* One slot's rows as blocks of falling frequency: its share curve at
 * PLAN_CACHE_POINTS_PER_DECADE points a decade of rows and at its
 * statistics' points, each block a chord between two of them; the curve's
 * upper concave hull, so that no row is hotter than one before it (the
 * order LFU keeps them in). */
static void slot_blocks(const plan_key_stats *k, double rows, double lookups, double bytes_per_lookup,
                        double table_per_row, double batch, block_list *out)
{
    int max = (int)(log10(fmax(rows, 1)) * PLAN_CACHE_POINTS_PER_DECADE) + 16, n = 0, j = 0;
    double *x = hps_malloc((size_t)max * 2 * sizeof *x), *y = x + max;
    x[n] = y[n] = 0, n++;
    for (int i = 0;; i++) { /* the grid and the statistics' points, merged, below rows */
        double g = pow(10.0, (double)i / PLAN_CACHE_POINTS_PER_DECADE);
        for (; k && j < k->n_points && k->n[j] <= g && k->n[j] < rows; j++)
            if (k->n[j] > x[n - 1]) x[n++] = k->n[j];
        if (g >= rows || n >= max - 2) break;
        if (g > x[n - 1]) x[n++] = g;
    }
    x[n++] = rows;
    int h = 0; /* the hull, in place: x[0..h], y[0..h] */
    for (int i = 1; i < n; i++) {
        double xi = x[i], yi = slot_share(k, rows, xi);
        while (h >= 1 && (y[h] - y[h - 1]) * (xi - x[h - 1]) <= (yi - y[h - 1]) * (x[h] - x[h - 1])) h--;
        h++;
        x[h] = xi, y[h] = yi;
    }
    /* an epoch of the data in batches, and its lookups over the model's a batch */
    int known = k && k->lookups > 0 && k->rows > 0 && lookups > 0 && batch > 0;
    double epoch = known ? k->rows / batch : 0, ratio = known ? k->lookups / lookups : 0;
    for (int i = 1; i <= h; i++) {
        double dr = x[i] - x[i - 1], dl = (y[i] - y[i - 1]) * lookups;
        if (dr > 0 && dl > 0)
            push_block(out, (row_block){dr, dl, dl * bytes_per_lookup, dl * table_per_row, dl / dr, dl / dr * ratio,
                                        epoch, known ? epoch / ratio : 0});
    }
    free(x);
}

static int hotter_first(const void *a, const void *b)
{
    double fa = ((const row_block *)a)->freq, fb = ((const row_block *)b)->freq;
    return fa > fb ? -1 : fa < fb;
}

static int has_table(const plan_problem *p, int l) { return p->table_bytes[l] > 0 && p->rows[l] > 0; }

static double row_of(const plan_problem *p, int l)
{
    return p->row_bytes[l] > 0 ? p->row_bytes[l] : p->table_bytes[l] / p->rows[l];
}

/* Layer l's slots' blocks: those plan_problem_key_stats gave, else one slot
 * of the layer's rows with the default skew. */
static void layer_blocks(const plan_problem *p, int l, block_list *out)
{
    double per_row = row_of(p, l);
    /* a hand-made problem may give bytes alone: a lookup reads a row's weights, half its table bytes */
    double lookups = p->sparse_rows[l] > 0 ? p->sparse_rows[l] : p->sparse_bytes[l] > 0 ? p->sparse_bytes[l] / (per_row / 2) : 1;
    double per_lookup = p->sparse_bytes[l] / lookups;
    int any = 0;
    for (int i = 0; i < p->n_slots; i++)
        if (p->slots[i].layer == l) {
            const plan_slot *s = &p->slots[i];
            slot_blocks(&s->keys, s->rows, lookups * s->share, per_lookup, per_row, p->batch, out);
            any = 1;
        }
    if (!any) slot_blocks(NULL, p->rows[l], lookups, per_lookup, per_row, p->batch, out);
}

void plan_problem_free_curves(plan_problem *p)
{
    for (int i = 0; i < p->n_tabled * p->n_tabled && p->curves; i++) free(p->curves[i].rows);
    free(p->curves);
    p->curves = NULL;
    p->n_tabled = 0;
}

/* Every run of layers with tables gets its rows merged hottest first: the
 * rows a cache of C rows keeps are the curve's first C, whichever table
 * and slot they are in. */
void plan_problem_cache_curves(plan_problem *p)
{
    plan_problem_free_curves(p);
    int E = 0, *tabled = hps_malloc((size_t)p->n_layers * sizeof *tabled);
    for (int l = 0; l < p->n_layers; l++)
        if (has_table(p, l)) tabled[E++] = l;
    p->n_tabled = E;
    p->curves = E ? hps_calloc((size_t)E * E, sizeof *p->curves) : NULL;
    block_list all = {0};
    for (int a = 0; a < E; a++) {
        all.n = 0;
        for (int b = a; b < E; b++) {
            layer_blocks(p, tabled[b], &all);
            row_block *sorted = hps_malloc((size_t)all.n * sizeof *sorted + 1);
            memcpy(sorted, all.b, (size_t)all.n * sizeof *sorted);
            qsort(sorted, (size_t)all.n, sizeof *sorted, hotter_first);
            plan_cache_curve *c = &p->curves[a * E + b];
            c->n = all.n;
            c->rows = hps_malloc(7 * ((size_t)all.n + 1) * sizeof(double));
            c->lookups = c->rows + all.n + 1, c->bytes = c->lookups + all.n + 1, c->table = c->bytes + all.n + 1;
            c->per_epoch = c->table + all.n + 1, c->epoch = c->per_epoch + all.n + 1, c->weight = c->epoch + all.n + 1;
            c->rows[0] = c->lookups[0] = c->bytes[0] = c->table[0] = 0;
            for (int i = 0; i < all.n; i++) {
                c->rows[i + 1] = c->rows[i] + sorted[i].rows;
                c->lookups[i + 1] = c->lookups[i] + sorted[i].lookups;
                c->bytes[i + 1] = c->bytes[i] + sorted[i].bytes;
                c->table[i + 1] = c->table[i] + sorted[i].table;
                c->per_epoch[i] = sorted[i].per_epoch;
                c->epoch[i] = sorted[i].epoch;
                c->weight[i] = sorted[i].weight;
            }
            free(sorted);
        }
    }
    free(all.b);
    free(tabled);
}

/* The share of a block's rows a run of n batches looks up at least once:
 * each row is looked up m times an epoch of E batches, in no order, so a
 * run of a part x of an epoch misses it with (1 - x)^m; a whole epoch sees
 * every row.  0 where the epoch is not known. */
static double block_seen(double m, double epoch, double n)
{
    if (!(epoch > 0) || !(n > 0)) return 0;
    return 1 - pow(1 - fmin(1, n / epoch), m);
}

/* The lookups a batch, averaged over the run, that are a cached row's
 * first (compulsory misses: the cache starts empty), and their bytes: the
 * curve's first lo blocks and w of the next. */
static void first_sights(const plan_problem *p, const plan_cache_curve *c, int lo, double w, double *lookups,
                         double *bytes)
{
    double n = p->batch > 0 ? p->samples * p->epochs / p->batch : 0;
    *lookups = *bytes = 0;
    if (!(n > 0)) return;
    for (int i = 0; i <= lo && i < c->n; i++) {
        double dl = c->lookups[i + 1] - c->lookups[i], part = i < lo ? 1 : w;
        double seen = part * (c->rows[i + 1] - c->rows[i]) * block_seen(c->per_epoch[i], c->epoch[i], n) *
                      c->weight[i] / n;
        *lookups += seen;
        if (dl > 0) *bytes += seen * (c->bytes[i + 1] - c->bytes[i]) / dl;
    }
}

void plan_cache_at(const plan_problem *p, int first, int end, double rows, plan_cache_hits *h)
{
    int a = -1, b = -1, rank = 0;
    for (int l = 0; l < end; l++)
        if (has_table(p, l)) {
            if (l >= first) b = rank, a = a < 0 ? rank : a;
            rank++;
        }
    h->hit = h->bytes_hit = h->miss_table_bytes = 0;
    if (a < 0 || !p->curves) return;
    const plan_cache_curve *c = &p->curves[a * p->n_tabled + b];
    int n = c->n, lo = 0, hi = n; /* the last point at or below `rows` */
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (c->rows[mid] <= rows) lo = mid;
        else hi = mid - 1;
    }
    double w = lo < n ? (rows - c->rows[lo]) / (c->rows[lo + 1] - c->rows[lo]) : 0;
#define AT(v) (v[lo] + (lo < n ? w * (v[lo + 1] - v[lo]) : 0))
    double once, once_bytes; /* each cached row's first lookup misses */
    first_sights(p, c, lo, w, &once, &once_bytes);
    if (c->lookups[n] > 0) h->hit = fmin(1, fmax(0, AT(c->lookups) - once) / c->lookups[n]);
    if (c->bytes[n] > 0) h->bytes_hit = fmin(1, fmax(0, AT(c->bytes) - once_bytes) / c->bytes[n]);
    h->miss_table_bytes = fmax(0, c->table[n] - AT(c->table));
#undef AT
}

/* The slots of the embedding layers, with their statistics, and the share
 * of each layer's lookups its hottest key takes. */
void plan_problem_key_stats(plan_problem *p, const hps_model *m, const plan_key_stats *slots)
{
    free(p->slots);
    p->n_slots = 0;
    p->slots = hps_calloc((size_t)m->n_slots * (size_t)p->n_layers + 1, sizeof *p->slots);
    for (int l = 0; l < p->n_layers; l++) {
        const hps_layer *L = &m->layers[l];
        if (L->kind != HPS_LAYER_EMBEDDING) continue;
        double weight = 0;
        p->hot[l] = 0;
        for (int i = 0; i < L->n_slots; i++) weight += m->slots[L->slots[i]].keys_per_row;
        for (int i = 0; i < L->n_slots && weight > 0; i++) {
            const hps_slot *sl = &m->slots[L->slots[i]];
            plan_slot *s = &p->slots[p->n_slots++];
            s->layer = l;
            s->rows = (double)sl->rows;
            s->share = sl->keys_per_row / weight;
            if (slots) s->keys = slots[L->slots[i]];
            /* the hottest key of the hottest slot */
            p->hot[l] = fmax(p->hot[l], s->share * slot_share(&s->keys, s->rows, 1));
        }
    }
    plan_problem_cache_curves(p);
}

/* The keys of a stretch of the slot's share curve between two of its
 * points (slot_blocks' blocks over the data's lookups) are taken as seen
 * equally often: the statistics hold the top 1, 10, 100 and 1000 keys'
 * shares and the distinct keys, not each key's count. */
double plan_slot_admitted(const plan_slot *s, int n)
{
    if (n <= 1 || !s->keys.n_points || s->keys.lookups <= 0) return s->rows;
    block_list b = {0};
    slot_blocks(&s->keys, s->rows, s->keys.lookups, 0, 0, 0, &b);
    double rows = 0;
    for (int i = 0; i < b.n; i++)
        if (b.b[i].freq >= n) rows += b.b[i].rows;
    free(b.b);
    return rows;
}

int plan_problem_tables(plan_problem *p, const hps_model *m)
{
    int unknown = 0;
    for (int l = 0; l < p->n_layers; l++) {
        const hps_layer *L = &m->layers[l];
        if (L->kind != HPS_LAYER_EMBEDDING && L->kind != HPS_LAYER_LINEAR) continue;
        p->row_bytes[l] = (double)hps_row_state_bytes(L->kind == HPS_LAYER_EMBEDDING ? L->dim : 1, p->rowwise,
                                                      (hps_row_dtype)p->row_dtype);
        double rows = p->rows[l];
        if (p->admit_after > 1 && L->kind == HPS_LAYER_EMBEDDING) {
            rows = 0;
            for (int i = 0; i < p->n_slots; i++)
                if (p->slots[i].layer == l) {
                    rows += plan_slot_admitted(&p->slots[i], p->admit_after);
                    unknown += !p->slots[i].keys.n_points || p->slots[i].keys.lookups <= 0;
                }
        }
        p->table_bytes[l] = rows * p->row_bytes[l];
    }
    plan_problem_prepare(p);
    return unknown;
}

/* The first layer at or after `from` that reads tensor q (the loss, last,
 * reads the labels); n_layers when none does. */
static int next_reader(const hps_model *m, int q, int from)
{
    if (q == HPS_TENSOR_LABELS) return m->n_layers - 1;
    for (int l = from; l < m->n_layers; l++)
        for (int i = 0; i < m->layers[l].n_inputs; i++)
            if (m->layers[l].inputs[i] == q) return l;
    return m->n_layers;
}

/* A layer's working set counts the tensors it reads and writes; a stage of
 * a graph also receives and sends, unread, each tensor of the live set at
 * its first cut that no layer of it reads before its last cut (deepfm's
 * wide and FM logits through the deep part's stages), and its gradient. */
void plan_problem_model_passes(plan_problem *p, const hps_model *m)
{
    int L = m->n_layers;
    free(p->pass_bytes);
    p->pass_bytes = NULL;
    if (!m->graph) return; /* a chain's layers read what its cuts carry */
    p->pass_bytes = hps_calloc((size_t)(L + 1) * (L + 1), sizeof(double));
    int *live = hps_malloc(((size_t)L + 2) * sizeof *live);
    for (int first = 1; first < L; first++) {
        int n = hps_model_cut_live(m, first, live, first + 2);
        for (int i = 0; i < n; i++) {
            int q = live[i], last = next_reader(m, q, first);
            double w = hps_model_tensor_width(m, q) * (1.0 + (hps_model_tensor_grad(m, q) != 0));
            for (int end = first + 1; end <= last && end < L; end++)
                p->pass_bytes[(size_t)first * (L + 1) + end] += p->batch * w * sizeof(float);
        }
    }
    free(live);
}

/* The largest table bytes of one row (weights and accumulators) of the
 * stage's tables: a cache slot of that size holds a row of any of them. */
static double biggest_row(const plan_problem *p, int first, int end)
{
    double row = 0;
    for (int l = first; l < end; l++)
        if (has_table(p, l)) row = fmax(row, row_of(p, l));
    return row;
}

/* hps-train keeps device rows (hbm, cache) as fp32 rows with per-element
 * AdaGrad and no admission (hps-train(1) ROWS): tables of another format
 * stay on the servers, so that the plan is one hps-train runs. */
static int device_rows_run(const plan_problem *p)
{
    return p->row_dtype == HPS_ROW_FP32 && !p->rowwise && p->admit_after <= 1;
}

/* A plan of several stages runs under mpirun, where hps-train keeps device
 * rows only in the lead's stage (its eval and export read them), and only
 * when no later stage keeps table rows on the servers (hps-train(1) ROWS):
 * so a stage [first, end) may hold its tables in HBM or a cache only when
 * it starts the model and no layer after it has a table.  The whole model
 * in one stage always may. */
static int stage_keeps_device_rows(const plan_problem *p, int first, int end)
{
    return first == 0 && !(p->pre_table[p->n_layers] > p->pre_table[end]);
}

/* Rows in HBM sharded over k units: each holds 1.25 x tables / k beside its
 * working set (the servers' headroom: keys, hash slots, and a routing rule
 * that spreads keys, not bytes, evenly), so k is at least the least count
 * that fits; none where the tables fit one unit whole (hbm replicas) or no
 * count within max_units holds them. */
static void shard_memory(const plan_problem *p, int t, double work, double tables, plan_law *law)
{
    double room = p->mem_bytes[t] - work, shard = tables * PLAN_SERVER_HEADROOM;
    double least = room > 0 ? ceil(shard / room) : HUGE_VAL;
    law->least_units = 0;
    if (work + tables <= p->mem_bytes[t] || !(least <= p->max_units[t]) || least < 2) return;
    law->rows = PLAN_ROWS_HBM;
    law->shards = 1;
    law->least_units = (int)least;
    law->shard_bytes = shard;
    law->hit_rate = 1;
    law->mem_bytes = work + shard / least;
}

double plan_law_mem_bytes(const plan_law *law, int units)
{
    if (!law->shards || units <= 0) return law->mem_bytes;
    return law->mem_bytes - law->shard_bytes / law->least_units + law->shard_bytes / units;
}

/* The model's misses scaled to a measured hit rate m: the rows fetched and
 * written back, and the bytes, in the share the model's own misses have. */
static void at_hit_rate(double m, plan_cache_hits *h)
{
    double miss = 1 - h->hit, f = miss > 0 ? (1 - m) / miss : 0;
    if (miss > 0) {
        h->bytes_hit = 1 - fmin(1, (1 - h->bytes_hit) * f);
        h->miss_table_bytes *= f;
    } else h->bytes_hit = m;
    h->hit = m;
}

/* A cache of c rows of the stage's tables in front of them, hitting as the
 * key statistics say (plan_cache_at), or at a measured rate (>= 0); 0 when
 * the model's would hit nothing (the rows stay where they were). */
static int cache_memory(const plan_problem *p, int first, int end, double c, double measured, double work,
                        plan_law *law, plan_cache_hits *h)
{
    plan_cache_at(p, first, end, c, h);
    if (measured >= 0) at_hit_rate(measured, h);
    else if (!(h->hit > 0)) {
        h->hit = h->bytes_hit = 0;
        return 0;
    }
    law->rows = PLAN_ROWS_CACHE;
    law->hit_rate = h->hit;
    law->cache_rows = c;
    law->mem_bytes = work + c * biggest_row(p, first, end);
    /* each distinct row a batch misses is fetched, and as many rows
     * (evicted, or the missed one's update) written back */
    law->host_bytes = 2 * h->miss_table_bytes * p->exchange_rows_share;
    return 1;
}

/* The rows where a run kept them (plan_stage_law_kept), whether or not the
 * model finds them room there. */
static void kept_memory(const plan_problem *p, int first, int end, const plan_kept *k, double work, double tables,
                        plan_law *law, plan_cache_hits *h)
{
    if (k->rows == PLAN_ROWS_CACHE) {
        cache_memory(p, first, end, k->cache_rows, k->hit_rate, work, law, h);
        return;
    }
    if (k->rows != PLAN_ROWS_HBM) return; /* on the servers */
    law->rows = PLAN_ROWS_HBM;
    law->hit_rate = h->hit = h->bytes_hit = 1;
    law->mem_bytes = work + tables;
    if (k->shards < 2) return;
    law->shards = 1;
    law->least_units = k->shards;
    law->shard_bytes = tables * PLAN_SERVER_HEADROOM;
    law->mem_bytes = work + law->shard_bytes / k->shards;
}

/* A unit holds its layers' working sets (parameters with Adam's state, one
 * batch of activations and their gradients, the rows a batch touches), what
 * crosses the stage unread, a reserve for the runtime, and on a GPU the
 * tables when they fit, else a cache of as many rows as the rest of its
 * memory holds: the rows with the most lookups of all the stage's tables
 * together (plan_cache_at); or, asked for shards, a shard of them
 * (shard_memory); or where a run kept them (kept_memory).  Device rows only
 * where hps-train runs them (device_rows_run, and stage_keeps_device_rows
 * unless any_stage: plan_problem_check_memory asks whether some stage could). */
static void stage_memory(const plan_problem *p, int first, int end, int t, int way, const plan_kept *kept,
                         int any_stage, plan_law *law)
{
    double work = PLAN_UNIT_RESERVE + p->pre_work[end] - p->pre_work[first];
    if (p->pass_bytes) work += p->pass_bytes[(size_t)first * (p->n_layers + 1) + end];
    double tables = p->pre_table[end] - p->pre_table[first], touched = p->pre_sparse[end] - p->pre_sparse[first];
    double cap = p->mem_bytes[t];
    plan_cache_hits h = {0, 0, 0};
    law->fits = cap <= 0 || work <= cap;
    law->mem_bytes = work;
    law->hit_rate = law->cache_rows = law->host_bytes = law->host_ms = 0;
    law->coloc = law->pick = 0;
    law->coloc_fixed_ms = law->coloc_scaled_ms = 0;
    law->shards = law->least_units = 0;
    law->shard_bytes = 0;
    law->first = first, law->end = end, law->type = t;
    law->rows = tables > 0 || touched > 0 ? PLAN_ROWS_SERVERS : PLAN_ROWS_NONE;
    int device = tables > 0 && p->is_gpu[t] && cap > 0 && law->fits && !p->rows_on_servers && device_rows_run(p) &&
                 (any_stage || stage_keeps_device_rows(p, first, end));
    if (way == PLAN_WAY_KEPT) {
        if (tables > 0) kept_memory(p, first, end, kept, work, tables, law, &h);
    } else if (way == PLAN_WAY_SHARDS) {
        if (device) shard_memory(p, t, work, tables, law);
        if (!law->shards) return; /* the caller drops the law */
        h.hit = h.bytes_hit = 1;
    } else if (way == PLAN_WAY_AUTO && device) {
        if (work + tables <= cap) {
            law->rows = PLAN_ROWS_HBM;
            law->hit_rate = h.hit = h.bytes_hit = 1;
            law->mem_bytes = work + tables;
        } else {
            double row = biggest_row(p, first, end), c = row > 0 ? floor((cap - work) / row) : 0;
            cache_memory(p, first, end, c, -1, work, law, &h);
        }
    }
    law->server_table_bytes = law->rows == PLAN_ROWS_HBM ? 0 : tables;
    /* what the exchange sends: each distinct row a batch misses, both ways */
    law->server_bytes = 2 * touched * (1 - h.bytes_hit) * p->exchange_bytes_share;
    law->server_rows = (p->pre_rows[end] - p->pre_rows[first]) * (1 - h.hit) * p->exchange_rows_share;
    /* the hottest key's share of what reaches the servers; a cache keeps it */
    law->server_hot = 0;
    if (law->rows == PLAN_ROWS_SERVERS && tables > 0)
        for (int l = first; l < end; l++)
            law->server_hot = fmax(law->server_hot, p->sparse_bytes[l] / touched * p->hot[l]);
}

void plan_stage_memory(const plan_problem *p, int first, int end, int t, int way, const plan_kept *kept,
                       plan_law *law)
{
    stage_memory(p, first, end, t, way, kept, 0, law);
}

/* Bytes per ms one server carries for the stage: through its NIC (bpms),
 * and its CPU applying the rows they hold, one after the other. */
static double server_rate(const plan_problem *p, const plan_law *law, double bpms)
{
    if (p->server_rows_per_ms <= 0 || law->server_bytes <= 0) return bpms;
    return 1 / (1 / bpms + law->server_rows / law->server_bytes / p->server_rows_per_ms);
}

/* The fewest servers of `mem` bytes each (0: not checked) and NIC `bpms`
 * that hold the stage's tables and carry its traffic at a throughput, or a
 * number past `max` when none do. */
static double servers_needed(const plan_problem *p, const plan_law *law, double throughput, double mem,
                             double bpms, int max)
{
    double need = 1;
    if (mem > 0) need = fmax(need, ceil(law->server_table_bytes * PLAN_SERVER_HEADROOM / mem));
    /* per second through the busiest of S servers: X ((1 - h) / S + h) */
    double x = law->server_bytes * throughput / p->batch / 1000.0, h = law->server_hot;
    if (x > 0 && isfinite(x)) {
        double room = server_rate(p, law, bpms) - x * h;
        if (room <= 0) return (double)max + 1;
        need = fmax(need, ceil(x * (1 - h) / room - 1e-9));
    }
    return need;
}

static int has_servers(const plan_law *law) { return law->server_table_bytes > 0 || law->server_bytes > 0; }

int plan_stage_servers(const plan_problem *p, const plan_law *law, double throughput)
{
    if (!has_servers(law) || law->coloc) return 0;
    double need = servers_needed(p, law, throughput, p->server_mem, p->server_bpms, p->max_servers);
    return need <= p->max_servers ? (int)need : -1;
}

static double servers_throughput(const plan_problem *p, const plan_law *law, int n, double bpms)
{
    if (law->server_bytes <= 0 || n <= 0) return law->server_bytes <= 0 ? HUGE_VAL : 0;
    double busiest = (1 - law->server_hot) / n + law->server_hot;
    return server_rate(p, law, bpms) * 1000.0 * p->batch / (law->server_bytes * busiest);
}

/* A server beside a unit shares that unit's NIC. */
double plan_servers_throughput(const plan_problem *p, const plan_law *law, int n)
{
    return servers_throughput(p, law, n, law->coloc ? law->coloc_bpms : p->server_bpms);
}

/* What a unit's host has left for a server beside it: its RAM less what
 * the unit itself keeps there (a CPU unit's working set; a GPU unit's
 * runtime reserve, its tables being on the servers). */
static double host_room(const plan_problem *p, const plan_law *law, int t)
{
    return p->host_mem[t] - (p->is_gpu[t] ? PLAN_UNIT_RESERVE : law->mem_bytes);
}

/* What a cpu unit's layers [first, end) of type t take more on n - 1 of
 * its n threads than on n: each layer's time there less its t1 (the
 * profile's figures at n - 1, else Amdahl's law with its parallel fraction
 * and the fixed share at n), in *fixed what of it each unit takes whole
 * (the fixed shares: plan_problem.fixed). */
static double layers_beside_ms(const plan_problem *p, int first, int end, int t, int n, double *fixed)
{
    int T = p->n_types;
    double more = 0;
    *fixed = 0;
    for (int l = first; l < end; l++) {
        size_t i = (size_t)l * T + t;
        int timed = p->beside_ratio[i] > 0;
        double t1 = p->t1_ms[i], less = t1 * (timed ? p->beside_ratio[i] : plan_amdahl_ratio(p->par[i], n - 1, n));
        more += less - t1;
        *fixed += less * (timed ? p->beside_fixed[i] : p->fixed[i]) - t1 * p->fixed[i];
    }
    return more;
}

/* A server beside a unit takes one of its n cores (the rankfile gives it
 * the last), so the unit's host work runs on n - 1.  A cpu unit's layers
 * take their time at n - 1 threads, read off each layer's scaling curve
 * (layers_beside_ms), not n / (n - 1) x their time at n: that charged a
 * 2-core unit twice its 2-thread time, more than its 1-thread time
 * wherever 2 threads gain less than 2x, and the plan picked a 1-thread unit
 * with its server apart over a 2-thread one beside that ran faster (issue
 * 30: on 2 cores both run a 1-thread worker beside a server).  Its other
 * host work (overhead, read, packing, device rows) has one figure whatever
 * the threads (plan_problem_build scales only the layers), so it stays.  A
 * gpu unit's host work is the host type's embedding layers, profiled at
 * that type's threads, with no curve at this host's cores: it takes
 * n / (n - 1) as long.  The server's own work is on its core, priced as
 * apart: its exchange (exchange_ms), its NIC (coloc_bpms, the unit's) and
 * its rows' apply (plan_servers_throughput). */
int plan_law_colocate(const plan_problem *p, const plan_law *law, int t, plan_law *out)
{
    int n = p->cores[t];
    if (p->separate_servers || law->coloc || !has_servers(law) || n < 2 || host_room(p, law, t) <= 0) return 0;
    *out = *law;
    double fixed, scaled;
    if (p->is_gpu[t]) {
        double f = 1.0 / (n - 1);
        fixed = f * law->cpu_fixed_ms, scaled = f * law->cpu_scaled_ms;
    } else {
        scaled = layers_beside_ms(p, law->first, law->end, t, n, &fixed) - fixed;
    }
    out->coloc_fixed_ms = fixed;
    out->coloc_scaled_ms = scaled;
    out->fixed_ms += fixed;
    out->scaled_ms += scaled;
    out->compute_ms += fixed + scaled;
    out->cpu_fixed_ms += fixed;
    out->cpu_scaled_ms += scaled;
    out->coloc = 1;
    out->coloc_bpms = p->nic_bpms[t];
    return 1;
}

int plan_coloc_least_units(const plan_problem *p, const plan_law *law, int t)
{
    double need = servers_needed(p, law, 0, host_room(p, law, t), p->nic_bpms[t], p->max_units[t]);
    return need <= p->max_units[t] ? (int)need : 0;
}

int plan_problem_check_memory(plan_problem *p, hps_error *err)
{
    int L = p->n_layers, T = p->n_types;
    double biggest = 0, gpu_biggest = 0;
    for (int t = 0; t < T; t++) {
        biggest = fmax(biggest, p->mem_bytes[t]);
        if (p->is_gpu[t]) gpu_biggest = fmax(gpu_biggest, p->mem_bytes[t]);
    }
    for (int l = 0; l < L; l++) {
        int any = 0;
        for (int t = 0; t < T; t++) {
            plan_law law;
            plan_stage_memory(p, l, l + 1, t, PLAN_WAY_AUTO, NULL, &law);
            p->fits[l * T + t] = (unsigned char)law.fits;
            any |= law.fits;
        }
        if (!any)
            return hps_fail(err, HPS_EXIT_RUNTIME,
                            "layer '%s': a working set of %.1f GiB (parameters, optimizer state, "
                            "activations) fits no unit; the largest holds %.1f GiB",
                            p->layer_names[l], (p->work_bytes[l] + PLAN_UNIT_RESERVE) / PLAN_GIB, biggest / PLAN_GIB);
        /* or in shards over the units of a gpu type (plan_law_shard) */
        double servers_hold = p->server_mem * p->max_servers / PLAN_SERVER_HEADROOM, shards_hold = 0;
        int sharded = 0;
        for (int t = 0; t < T; t++) {
            plan_law law;
            stage_memory(p, l, l + 1, t, PLAN_WAY_SHARDS, NULL, 1, &law);
            sharded |= law.shards;
            if (p->is_gpu[t] && law.fits && p->max_units[t] > 1)
                shards_hold = fmax(shards_hold, p->max_units[t] * (p->mem_bytes[t] - law.mem_bytes) / PLAN_SERVER_HEADROOM);
        }
        if (p->table_bytes[l] > 0 && p->server_mem > 0 && p->table_bytes[l] > servers_hold && !sharded &&
            p->table_bytes[l] + p->work_bytes[l] + PLAN_UNIT_RESERVE > gpu_biggest)
            return hps_fail(err, HPS_EXIT_RUNTIME,
                            "layer '%s': %.1f GiB of tables and optimizer state do not fit %d servers "
                            "of %.1f GiB (with %.0f%% headroom) nor one GPU (largest %.1f GiB) nor a "
                            "GPU type's units in shards (at most %.1f GiB)",
                            p->layer_names[l], p->table_bytes[l] / PLAN_GIB, p->max_servers,
                            p->server_mem / PLAN_GIB, 100 * (PLAN_SERVER_HEADROOM - 1), gpu_biggest / PLAN_GIB,
                            shards_hold / PLAN_GIB);
    }
    return 0;
}
