/* Memory (hps-plan(1), MEMORY): what one unit of a stage holds, where the
 * embedding rows live (servers, HBM, or a GPU cache of the hot rows in front
 * of the servers), and how many parameter servers the rows need. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "plan/hps_plan.h"
#include "plan/plan_internal.h"

const char *const plan_rows_names[] = {"none", "servers", "hbm", "cache", NULL};

/* Curve point k is the cache of the hottest 10^(k - last) of the rows. */
static double point_fraction(int k) { return pow(10.0, k - (PLAN_HIT_POINTS - 1)); }

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

/* Share of a slot's lookups by its hottest fraction f of rows. */
static double slot_share(const plan_key_stats *k, double rows, double f)
{
    if (f >= 1) return 1;
    if (!k || !k->n_points || rows <= 0) return pow(f, PLAN_DEFAULT_SKEW);
    return share_at(f * rows, k->n_points, k->n, k->share);
}

/* Rows per slot when a cache of `cache` rows gives every slot the same
 * number of rows, a small table whole: c with sum min(rows_j, c) = cache. */
static double rows_per_slot(const hps_model *m, const hps_layer *L, double cache)
{
    double lo = 0, hi = 0;
    for (int i = 0; i < L->n_slots; i++) hi = fmax(hi, (double)m->slots[L->slots[i]].rows);
    for (int it = 0; it < 100; it++) { /* bisection: the sum grows with c */
        double c = (lo + hi) / 2, sum = 0;
        for (int i = 0; i < L->n_slots; i++) sum += fmin((double)m->slots[L->slots[i]].rows, c);
        if (sum < cache) lo = c;
        else hi = c;
    }
    return hi;
}

/* A cache of fraction f of a layer's rows holds the same number of hot rows
 * of each slot (small tables whole); the slots' hit rates weigh by their
 * keys per sample. */
void plan_problem_key_stats(plan_problem *p, const hps_model *m, const plan_key_stats *slots)
{
    for (int l = 0; l < p->n_layers; l++) {
        const hps_layer *L = &m->layers[l];
        double *h = p->hit + (size_t)l * PLAN_HIT_POINTS, total = 0;
        if (L->kind != HPS_LAYER_EMBEDDING) continue;
        double weight = 0;
        p->hot[l] = 0;
        for (int i = 0; i < L->n_slots; i++) {
            total += (double)m->slots[L->slots[i]].rows;
            weight += m->slots[L->slots[i]].keys_per_row;
        }
        for (int i = 0; i < L->n_slots && weight > 0; i++) { /* the hottest key of the hottest slot */
            const hps_slot *sl = &m->slots[L->slots[i]];
            double one = slot_share(slots ? &slots[L->slots[i]] : NULL, (double)sl->rows, 1 / (double)sl->rows);
            p->hot[l] = fmax(p->hot[l], sl->keys_per_row / weight * one);
        }
        for (int k = 0; k < PLAN_HIT_POINTS; k++) {
            double hit = 0, c = rows_per_slot(m, L, point_fraction(k) * total);
            for (int i = 0; i < L->n_slots; i++) {
                const hps_slot *sl = &m->slots[L->slots[i]];
                double rows = (double)sl->rows;
                hit += sl->keys_per_row * slot_share(slots ? &slots[L->slots[i]] : NULL, rows, fmin(1, c / rows));
            }
            h[k] = weight > 0 ? fmin(1, hit / weight) : 0;
            if (k > 0 && h[k] < h[k - 1]) h[k] = h[k - 1];
        }
        h[PLAN_HIT_POINTS - 1] = 1;
    }
}

double plan_hit_rate(const plan_problem *p, int l, double f)
{
    const double *h = p->hit + (size_t)l * PLAN_HIT_POINTS;
    if (f >= 1) return 1;
    if (f <= 0) return 0;
    double x = log10(f) + (PLAN_HIT_POINTS - 1);
    if (x <= 0) return h[0] * f / point_fraction(0);
    int k = (int)x;
    double a = h[k], b = h[k + 1], w = x - k;
    if (a <= 0) return b * w;
    return fmin(1, a * pow(b / a, w));
}

/* The rows' traffic a cache of fraction f of every table of the stage leaves
 * for the servers, weighted by each layer's rows per batch. */
static double stage_hit(const plan_problem *p, int first, int end, double f)
{
    double hit = 0, total = 0;
    for (int l = first; l < end; l++) {
        hit += p->sparse_bytes[l] * plan_hit_rate(p, l, f);
        total += p->sparse_bytes[l];
    }
    return total > 0 ? hit / total : 0;
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

/* A unit holds its layers' working sets (parameters with Adam's state, one
 * batch of activations and their gradients, the rows a batch touches), what
 * crosses the stage unread, a reserve for the runtime, and on a GPU the
 * tables when they fit, else as many hot rows as the rest of its memory
 * holds. */
void plan_stage_memory(const plan_problem *p, int first, int end, int t, plan_law *law)
{
    double work = PLAN_UNIT_RESERVE + p->pre_work[end] - p->pre_work[first];
    if (p->pass_bytes) work += p->pass_bytes[(size_t)first * (p->n_layers + 1) + end];
    double tables = p->pre_table[end] - p->pre_table[first], touched = p->pre_sparse[end] - p->pre_sparse[first];
    double cap = p->mem_bytes[t];
    law->fits = cap <= 0 || work <= cap;
    law->mem_bytes = work;
    law->hit_rate = 0;
    law->rows = tables > 0 || touched > 0 ? PLAN_ROWS_SERVERS : PLAN_ROWS_NONE;
    if (tables > 0 && p->is_gpu[t] && cap > 0 && law->fits && !p->rows_on_servers) {
        if (work + tables <= cap) {
            law->rows = PLAN_ROWS_HBM;
            law->hit_rate = 1;
            law->mem_bytes = work + tables;
        } else {
            double f = (cap - work) / tables, hit = stage_hit(p, first, end, f);
            if (hit > 0) {
                law->rows = PLAN_ROWS_CACHE;
                law->hit_rate = hit;
                law->mem_bytes = cap;
            }
        }
    }
    law->server_table_bytes = law->rows == PLAN_ROWS_HBM ? 0 : tables;
    /* what the exchange sends: each distinct row a batch misses, both ways */
    law->server_bytes = 2 * touched * (1 - law->hit_rate) * p->exchange_bytes_share;
    law->server_rows = (p->pre_rows[end] - p->pre_rows[first]) * (1 - law->hit_rate) * p->exchange_rows_share;
    /* the hottest key's share of what reaches the servers; a cache keeps it */
    law->server_hot = 0;
    if (law->rows == PLAN_ROWS_SERVERS && tables > 0)
        for (int l = first; l < end; l++)
            law->server_hot = fmax(law->server_hot, p->sparse_bytes[l] / touched * p->hot[l]);
}

/* Bytes per ms one server carries for the stage: through its NIC, and its
 * CPU applying the rows they hold, one after the other. */
static double server_rate(const plan_problem *p, const plan_law *law)
{
    if (p->server_rows_per_ms <= 0 || law->server_bytes <= 0) return p->server_bpms;
    return 1 / (1 / p->server_bpms + law->server_rows / law->server_bytes / p->server_rows_per_ms);
}

int plan_stage_servers(const plan_problem *p, const plan_law *law, double throughput)
{
    if (law->server_table_bytes <= 0 && law->server_bytes <= 0) return 0;
    double need = 1;
    if (p->server_mem > 0) need = fmax(need, ceil(law->server_table_bytes * PLAN_SERVER_HEADROOM / p->server_mem));
    /* per second through the busiest of S servers: X ((1 - h) / S + h) */
    double x = law->server_bytes * throughput / p->batch / 1000.0, h = law->server_hot;
    if (x > 0 && isfinite(x)) {
        double room = server_rate(p, law) - x * h;
        if (room <= 0) return -1;
        need = fmax(need, ceil(x * (1 - h) / room - 1e-9));
    }
    return need <= p->max_servers ? (int)need : -1;
}

double plan_servers_throughput(const plan_problem *p, const plan_law *law, int n)
{
    if (law->server_bytes <= 0 || n <= 0) return law->server_bytes <= 0 ? HUGE_VAL : 0;
    double busiest = (1 - law->server_hot) / n + law->server_hot;
    return server_rate(p, law) * 1000.0 * p->batch / (law->server_bytes * busiest);
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
            plan_stage_memory(p, l, l + 1, t, &law);
            p->fits[l * T + t] = (unsigned char)law.fits;
            any |= law.fits;
        }
        if (!any)
            return hps_fail(err, HPS_EXIT_RUNTIME,
                            "layer '%s': a working set of %.1f GiB (parameters, optimizer state, "
                            "activations) fits no unit; the largest holds %.1f GiB",
                            p->layer_names[l], (p->work_bytes[l] + PLAN_UNIT_RESERVE) / PLAN_GIB, biggest / PLAN_GIB);
        double servers_hold = p->server_mem * p->max_servers / PLAN_SERVER_HEADROOM;
        if (p->table_bytes[l] > 0 && p->server_mem > 0 && p->table_bytes[l] > servers_hold &&
            p->table_bytes[l] + p->work_bytes[l] + PLAN_UNIT_RESERVE > gpu_biggest)
            return hps_fail(err, HPS_EXIT_RUNTIME,
                            "layer '%s': %.1f GiB of tables and optimizer state do not fit %d servers "
                            "of %.1f GiB (with %.0f%% headroom) nor one GPU (largest %.1f GiB)",
                            p->layer_names[l], p->table_bytes[l] / PLAN_GIB, p->max_servers,
                            p->server_mem / PLAN_GIB, 100 * (PLAN_SERVER_HEADROOM - 1), gpu_biggest / PLAN_GIB);
    }
    return 0;
}
