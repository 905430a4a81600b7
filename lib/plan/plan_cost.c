/* The cost model of hps-plan(1), section COST MODEL: every formula there is
 * one line here.
 *
 * A stage runs layers [first, end) data-parallel on k units of one type.  Its
 * time per batch is fixed_ms + scaled_ms / k: each unit reads and computes
 * B / k samples, so the read and the layers' t1 divide by k, the per-step
 * overhead and the layers' fixed share (what fewer samples do not shorten)
 * do not;
 * the bytes sent at its cuts (activations and
 * labels forward, gradients back) and the embedding traffic are split over
 * the k units' NICs; the ring allreduce of the dense gradients sends
 * 2 (k - 1) / k P bytes through each NIC.  The pipeline reaches M / (M + S - 1)
 * of its slowest stage's rate (the bubble of a synchronous step of M
 * micro-batches), and each plan is provisioned at the bottleneck level that
 * scores best. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "plan/hps_plan.h"
#include "plan/plan_internal.h"

/* hps-train's worker waits, every step, for its rows (the request, the
 * server's gather, the answer) and for its gradients' apply (the push, the
 * server's update, the ack): 4 messages and the server's compute in series
 * with the step, priced for the share of the model's lookups that reach the
 * servers, as one server's (with more, each serves a part: a bound).  The
 * worker packs only its slice: that part divides by the units.  Its
 * embedding layers run on the host CPU on a GPU type (see below). */
static void stage_exchange(const plan_problem *p, int t, plan_law *law)
{
    double all = p->pre_rows[p->n_layers] * p->exchange_rows_share, share = all > 0 ? law->server_rows / all : 0;
    int w = p->is_gpu[t] && p->host_type >= 0 ? p->host_type : t;
    double server = p->server_type >= 0 ? p->exchange_server_ms[p->server_type] : 0;
    law->exchange_ms = law->exchange_worker_ms = 0;
    if (!(share > 0)) return;
    law->exchange_ms = share * server + 4 * p->nic_ms[t];
    law->exchange_worker_ms = share * p->exchange_worker_ms[w];
}

/* The bytes the replicas of an hbm stage exchange a step, all units
 * together: each distinct row a batch touches, its key and gradient. */
static double replica_bytes(const plan_problem *p, int first, int end)
{
    double rows = (p->pre_rows[end] - p->pre_rows[first]) * p->exchange_rows_share;
    double grads = (p->pre_sparse[end] - p->pre_sparse[first]) * p->exchange_bytes_share;
    return rows * (sizeof(uint64_t) * 2) + grads;
}

/* The bytes the shards of an hbm stage exchange a step, each unit's: the
 * keys of the distinct rows its slice touches to their owners, the rows
 * back, the rows' gradients to the owners again (an all-to-all each), the
 * content of a step's exchange with servers (2 E x, its keys included), of
 * which (k - 1) / k is owned by the others; a slice touches at most the
 * batch's distinct rows, so this is at most what each unit sends. */
static double shard_bytes(const plan_problem *p, int first, int end)
{
    return 2 * (p->pre_sparse[end] - p->pre_sparse[first]) * p->exchange_bytes_share;
}

static void stage_law(const plan_problem *p, int first, int end, int t, int way, const plan_kept *kept,
                      plan_law *law);

/* The reader's thread decodes and checks the blocks beside the step (the
 * profile's read_cpu_ms; read_ms is only the step's wait for a batch).  A
 * cpu unit of n threads has n cores (hps-cluster(5)), which the step's n
 * threads fill, so the reader's CPU displaces the step's: 1 / n of it on
 * each core, a longer step by read_cpu_ms / n.  Each unit pays it whole:
 * it decodes every block of the batch and cuts its slice from them (a
 * block is one zstd frame; under mpirun each rank's reader took the CPU of
 * the one process's, issue 30).  A gpu unit's host cores are not counted
 * (its host work has no core count: n / (n - 1) in plan_law_colocate). */
static double reader_ms(const plan_problem *p, int first, int t)
{
    if (first > 0 || p->is_gpu[t]) return 0;
    return p->read_cpu_ms[t] / (p->cores[t] > 0 ? p->cores[t] : 1);
}

/* Rows in device memory cost hps-train host work a step besides the layers
 * (each lookup's slot, the eviction order of the rows a step touched, rows
 * moved into the backend's memory): the profile's device_rows_ms, for all
 * of the model's lookups, priced for the stage's share of them; the type's
 * own figure (a CPU run as a gpu type measures its backend), else that of
 * the cpu type whose host runs a GPU's (its own device measures none). */
static double device_rows_ms(const plan_problem *p, int first, int end, int t, const plan_law *law)
{
    if (law->rows != PLAN_ROWS_HBM && law->rows != PLAN_ROWS_CACHE) return 0;
    int h = p->host_type;
    double ms = p->device_rows_ms[t] > 0 ? p->device_rows_ms[t] : h >= 0 ? p->device_rows_ms[h] : 0;
    double all = p->pre_rows[p->n_layers];
    return all > 0 ? ms * (p->pre_rows[end] - p->pre_rows[first]) / all : 0;
}

/* A cache's misses cost the host more than their bytes: each takes a slot,
 * fetches a row (weights and accumulators) and evicts one (the order's
 * upkeep, a write-back): the profile's device_row_miss_us, a miss beyond
 * the new rows rows hbm fetch too (device_rows_ms), for the distinct rows
 * the stage's batch misses (server_rows, as host_bytes counts them); the
 * type's own figure, else that of the cpu type whose host runs a GPU's. */
static double miss_ms(const plan_problem *p, int t, const plan_law *law)
{
    if (law->rows != PLAN_ROWS_CACHE) return 0;
    int h = p->host_type;
    return (p->row_miss_ms[t] > 0 ? p->row_miss_ms[t] : h >= 0 ? p->row_miss_ms[h] : 0) * law->server_rows;
}

void plan_stage_law(const plan_problem *p, int first, int end, int t, plan_law *law)
{
    stage_law(p, first, end, t, PLAN_WAY_AUTO, NULL, law);
}

void plan_stage_law_kept(const plan_problem *p, int first, int end, int t, const plan_kept *kept, plan_law *law)
{
    plan_law beside;
    stage_law(p, first, end, t, PLAN_WAY_KEPT, kept, law);
    if (kept->beside && plan_law_colocate(p, law, t, &beside)) *law = beside;
}

int plan_law_servers(const plan_problem *p, const plan_law *law, plan_law *out)
{
    if (law->rows != PLAN_ROWS_HBM || law->shards || law->coloc || law->end <= law->first) return 0;
    int pick = law->pick;
    stage_law(p, law->first, law->end, law->type, PLAN_WAY_SERVERS, NULL, out);
    out->pick = pick;
    return 1;
}

int plan_law_shard(const plan_problem *p, const plan_law *law, plan_law *out)
{
    if (law->shards || law->coloc || law->rows == PLAN_ROWS_HBM || law->rows == PLAN_ROWS_NONE ||
        law->end <= law->first)
        return 0;
    plan_law s;
    stage_law(p, law->first, law->end, law->type, PLAN_WAY_SHARDS, NULL, &s);
    if (!s.shards) return 0;
    s.pick = law->pick;
    *out = s;
    return 1;
}

static void stage_law(const plan_problem *p, int first, int end, int t, int way, const plan_kept *kept,
                      plan_law *law)
{
    int L = p->n_layers;
    const double *s = p->pre_serial + (size_t)t * (L + 1), *q = p->pre_parallel + (size_t)t * (L + 1);
    /* k data-parallel units each take B / k samples, so the layers' time
     * divides by k but for its fixed share (calls, launches, a matrix
     * product's ramp-up: what fewer samples do not shorten), which each
     * unit takes whole; the parallel fraction a is for threads within one
     * unit (scale_to_threads), not for units.  The engine's per-step work
     * (the optimizers over every parameter, the step's hand-offs) runs on
     * each unit whole. */
    double layers = s[end] - s[first] + q[end] - q[first];
    /* what of them each unit takes whole, on however few samples */
    const double *f = p->pre_fixed + (size_t)t * (L + 1);
    double fixed = f[end] - f[first];
    double cuts = (first > 0 ? p->cut_bytes[first] : 0) + (end < L ? p->cut_bytes[end] : 0);
    double nic = p->nic_bpms[t];
    plan_stage_memory(p, first, end, t, way, kept, law);
    if (way == PLAN_WAY_SHARDS && !law->shards) return;
    int h = p->host_type;
    double host_layers = 0, host_fixed = 0; /* a GPU unit's work on its host's cores */
    if (law->rows == PLAN_ROWS_SERVERS && p->is_gpu[t] && h >= 0) { /* embeddings on the host CPU */
        const double *es = p->pre_emb_serial, *eq = p->pre_emb_parallel;
        size_t g = (size_t)t * (L + 1), c = (size_t)h * (L + 1);
        host_layers = es[c + end] - es[c + first] + eq[c + end] - eq[c + first];
        layers += host_layers;
        layers -= es[g + end] - es[g + first] + eq[g + end] - eq[g + first];
        const double *ef = p->pre_emb_fixed;
        host_fixed = ef[c + end] - ef[c + first];
        fixed += host_fixed - (ef[g + end] - ef[g + first]);
        /* their pooled outputs over PCIe to the GPU, the gradients back */
        if (p->pcie_bpms[t] > 0) layers += 2 * (p->pre_emb_out[end] - p->pre_emb_out[first]) / p->pcie_bpms[t];
    }
    /* a cache's misses: the host's work for them, and the rows fetched from
     * the host and written back over PCIe, each unit its slice's; on the
     * CPU backend that copy is in host memory, where the miss's measured
     * cost holds it already */
    law->miss_ms = miss_ms(p, t, law);
    if (law->rows == PLAN_ROWS_CACHE && p->pcie_bpms[t] > 0 && !(law->miss_ms > 0 && p->link_in_memory[t]))
        law->host_ms = law->host_bytes / p->pcie_bpms[t];
    law->rows_host_ms = device_rows_ms(p, first, end, t, law);
    /* the first stage reads each batch in series with the step, each of
     * its units decoding only its slice (hps-train(1)): the read divides by
     * k as the layers do */
    double o = p->overhead_ms[t], read = first == 0 ? p->read_ms[t] : 0;
    o += reader_ms(p, first, t);
    law->compute_ms = o + read + layers;
    law->layers_ms = layers;
    law->layers_fixed_ms = fixed;
    law->layers_fwd_ms = p->pre_fwd[(size_t)t * (L + 1) + end] - p->pre_fwd[(size_t)t * (L + 1) + first];
    law->boundary_ms = cuts / nic;
    law->ps_ms = law->server_bytes / nic; /* what a cache or HBM does not serve */
    stage_exchange(p, t, law);
    /* the ring allreduce: each unit sends and receives 2 (k - 1) / k of P,
     * and adds the (k - 1) / k it receives into its own, reading both and
     * writing one */
    double P = p->pre_param[end] - p->pre_param[first];
    law->sync_ms = 2 * P / nic + (p->reduce_bpms[t] > 0 ? 3 * P / p->reduce_bpms[t] : 0);
    /* hbm on k units runs k replicas (hps-train(1)): each sends its slice's
     * distinct touched rows, a 16-byte key and the row's gradient each, to
     * the k - 1 others, and merges the (k - 1) / k it receives into its own,
     * reading both and writing one, as the allreduce does: (k - 1) / k of it */
    double R = law->replica_bytes = law->rows == PLAN_ROWS_HBM && !law->shards ? replica_bytes(p, first, end) : 0;
    law->sync_ms += R / nic + (p->reduce_bpms[t] > 0 ? 3 * R / p->reduce_bpms[t] : 0);
    law->hop_ms = P > 0 || R > 0 ? 2 * p->nic_ms[t] : 0;
    /* hbm in shards: each unit sends (k - 1) / k of shard_bytes and gets as
     * much, its three all-to-alls k - 1 messages each, one after another,
     * and each owner adds the others' gradients of its rows into its own
     * (half the bytes), reading both and writing one, as the replicas do;
     * the sparse optimizer on its rows is in the layers' time, which
     * divides by k as its share of the rows does */
    if (law->shards) {
        double A = law->replica_bytes = shard_bytes(p, first, end);
        law->sync_ms += A / nic + (p->reduce_bpms[t] > 0 ? 3 * (A / 2) / p->reduce_bpms[t] : 0);
        law->hop_ms += 3 * p->nic_ms[t];
    }
    law->fixed_ms = o + fixed + law->sync_ms + law->exchange_ms;
    law->compute_ms += law->rows_host_ms + law->miss_ms;
    law->scaled_ms = read + layers - fixed + law->boundary_ms + law->ps_ms - law->sync_ms + law->exchange_worker_ms +
                     law->host_ms + law->rows_host_ms + law->miss_ms;
    law->cpu_fixed_ms = p->is_gpu[t] ? host_fixed : o + fixed;
    law->cpu_scaled_ms = (p->is_gpu[t] ? host_layers - host_fixed : read + layers - fixed) + law->exchange_worker_ms +
                         law->rows_host_ms + law->miss_ms;
}

static double throughput_of(const plan_problem *p, double ms);

double plan_law_layers_ms(const plan_law *law, int units)
{
    return law->layers_fixed_ms + (law->layers_ms - law->layers_fixed_ms) / units;
}

double plan_law_servers_ms(const plan_law *law, int units)
{
    return law->exchange_ms + (law->exchange_worker_ms + law->ps_ms) / units;
}

double plan_law_beside_ms(const plan_law *law, int units)
{
    return law->coloc ? law->coloc_fixed_ms + law->coloc_scaled_ms / units : 0;
}

/* The tables live in the process and no server starts beside its unit: the
 * core a server beside would take (plan_law_colocate) is the stage's, so a
 * unit of n threads is priced at its n threads here, whatever the plan's
 * servers do under mpirun. */
double plan_law_in_process_ms(const plan_law *law, int units)
{
    return plan_law_ms(law, units) - plan_law_servers_ms(law, units) - law->boundary_ms / units -
           plan_law_beside_ms(law, units);
}

double plan_pipeline_ms(const double *f, const double *b, int S, int M)
{
    /* the ready times of each stage's forward and backward inbox, FIFO:
     * [s * M + i], items [head, tail) */
    double *fwd = hps_malloc(2 * (size_t)S * M * sizeof *fwd), *bwd = fwd + (size_t)S * M;
    double *free_at = hps_calloc((size_t)S, sizeof *free_at), end = 0;
    int *at = hps_calloc(4 * (size_t)S, sizeof *at), *fh = at, *ft = at + S, *bh = at + 2 * S, *bt = at + 3 * S;
    for (int i = 0; i < M; i++) fwd[i] = 0;
    ft[0] = M;
    for (int done = 0; done < M;) {
        /* the next pass to start anywhere: a stage takes its oldest
         * backward item when one is there once it is free, else its oldest
         * forward one, else waits for the first to arrive */
        int s = -1, back = 0;
        double start = HUGE_VAL;
        for (int x = 0; x < S; x++) {
            double tb = bh[x] < bt[x] ? bwd[(size_t)x * M + bh[x]] : HUGE_VAL;
            double tf = fh[x] < ft[x] ? fwd[(size_t)x * M + fh[x]] : HUGE_VAL;
            int kb = tb <= free_at[x] || (tf > free_at[x] && tb <= tf);
            double st = fmax(free_at[x], kb ? tb : tf);
            if (st < start) start = st, s = x, back = kb;
        }
        if (s < 0) { /* a pass that never ends (an infinite time) */
            end = HUGE_VAL;
            break;
        }
        double t;
        if (back || s == S - 1) { /* the last stage turns a forward item around at once */
            t = start + (back ? 0 : f[s]) + b[s];
            if (back) bh[s]++;
            else fh[s]++;
            if (s > 0) bwd[(size_t)(s - 1) * M + bt[s - 1]++] = t;
            else done++, end = fmax(end, t);
        } else {
            t = start + f[s];
            fh[s]++;
            fwd[(size_t)(s + 1) * M + ft[s + 1]++] = t;
        }
        free_at[s] = t;
    }
    free(fwd), free(free_at), free(at);
    return end;
}

double plan_in_process_throughput(const plan_problem *p, const plan_eval *e)
{
    int S = e->n_stages, M = e->micro_batches > 0 ? e->micro_batches : 1;
    if (p->micro_batches == PLAN_NO_BUBBLE) {
        double thr = HUGE_VAL;
        for (int i = 0; i < S; i++)
            thr = fmin(thr, throughput_of(p, plan_law_in_process_ms(&e->stages[i].law, e->stages[i].units)));
        return thr;
    }
    /* one unit a stage; the engine's work besides the layers (its per-step
     * overhead, the read) runs once a step, in series with the pipeline;
     * each micro-batch of B / M samples takes a stage's layers' fixed share
     * whole, and a stage hands each one on (none when it is alone) */
    double *f = hps_malloc(2 * (size_t)S * sizeof *f), *b = f + S, serial = 0;
    for (int i = 0; i < S; i++) {
        const plan_law *law = &e->stages[i].law;
        double layers = law->layers_ms, h = S > 1 ? p->handoff_ms[e->stages[i].type] : 0;
        double pass = plan_law_layers_ms(law, M); /* B / M samples, as on a unit of M */
        double fwd = layers > 0 ? law->layers_fwd_ms / layers : 0.5;
        serial = fmax(serial, plan_law_in_process_ms(law, 1) - layers);
        f[i] = pass * fwd + h;
        b[i] = pass * (1 - fwd) + h;
    }
    double ms = serial + plan_pipeline_ms(f, b, S, M);
    free(f);
    return throughput_of(p, ms);
}

double plan_law_ms(const plan_law *law, int units)
{
    return law->fixed_ms + law->scaled_ms / units + law->hop_ms * (units - 1);
}

/* Past sqrt(scaled / hop) units the latency grows faster than the work shrinks. */
int plan_law_best_units(const plan_law *law, int max)
{
    if (law->scaled_ms <= 0) return 1;
    if (law->hop_ms <= 0) return max;
    double k = floor(sqrt(law->scaled_ms / law->hop_ms));
    int u = k < 1 ? 1 : k >= max ? max : (int)k;
    return u < max && plan_law_ms(law, u + 1) < plan_law_ms(law, u) ? u + 1 : u;
}

/* ms per batch that carries a level of samples/s; the slack of 1e-12 keeps
 * a plan that meets the limit exactly (a limit set to a plan's own
 * throughput) from failing on the last bit of a division. */
static double budget_ms(const plan_problem *p, double level)
{
    return 1000.0 * p->batch / level * (1 + 1e-12);
}

static int fewest_units(const plan_problem *p, const plan_law *law, int max, double level)
{
    double tau = budget_ms(p, level);
    if (max < 1) return 0;
    if (plan_law_ms(law, 1) <= tau) return 1;
    /* More units only help when the scaled part is positive, and never below
     * fixed_ms; without latency the smallest k is the ceiling below, and the
     * latency only adds, so the search for it starts there and stops at the
     * fastest. */
    if (law->scaled_ms <= 0 || law->fixed_ms >= tau) return 0;
    double k = ceil(law->scaled_ms / (tau - law->fixed_ms));
    int best = plan_law_best_units(law, max);
    if (!(k <= best)) return 0;
    int u = (int)k;
    while (u > 1 && plan_law_ms(law, u - 1) <= tau) u--; /* rounding, both ways */
    while (u <= best && plan_law_ms(law, u) > tau) u++;
    return u <= best ? u : 0;
}

static double throughput_of(const plan_problem *p, double ms)
{
    return ms > 0 ? 1000.0 * p->batch / ms : HUGE_VAL;
}

/* Servers are sized at the limit, as units are: the fewest that carry it. */
int plan_provision(const plan_problem *p, const plan_law *law, int t)
{
    plan_option o;
    return plan_stage_at_level(p, law, t, p->min_throughput, &o) ? o.units : 0;
}

/* The servers beside the stage's units (plan_law_colocate): the fewest
 * units at or above those whose hosts hold the tables that carry the level,
 * the stage and its servers both. */
static int colocated_at_level(const plan_problem *p, const plan_law *law, int t, double level, plan_option *o)
{
    plan_law c;
    if (!plan_law_colocate(p, law, t, &c)) return 0;
    int least = plan_coloc_least_units(p, &c, t), k = fewest_units(p, &c, p->max_units[t], level);
    if (!least || !k) return 0;
    /* more units carry more servers; past its best units the stage slows */
    for (k = k > least ? k : least; k <= p->max_units[t] && plan_law_ms(&c, k) <= budget_ms(p, level); k++) {
        double thr = plan_stage_throughput(p, &c, k, 0);
        if (thr >= level * (1 - 1e-12)) {
            *o = (plan_option){k, 0, thr, 1, 0, 0};
            return 1;
        }
    }
    return 0;
}

/* What option o costs the objective an hour, its servers as exact prices
 * them (in the instances of their type, as its units). */
static double option_weight(const plan_problem *p, int t, const plan_option *o)
{
    int st = p->server_type;
    double sw = st >= 0 && p->units_per_instance[st] > 1 ? plan_unit_weight(p, st) : plan_server_weight(p);
    return o->units * plan_unit_weight(p, t) + o->servers * sw;
}

/* The fewest units, at least `least`, that carry the level. */
static int fewest_units_from(const plan_problem *p, const plan_law *law, int least, int max, double level)
{
    int k = least <= max ? fewest_units(p, law, max, level) : 0;
    if (!k || k >= least) return k;
    /* between k and the fastest count the time falls; past it, it rises */
    return plan_law_ms(law, least) <= budget_ms(p, level) ? least : 0;
}

/* The stage's rows in HBM shards over its units (plan_law_shard): the
 * fewest units that hold the shards and carry the level. */
static int sharded_at_level(const plan_problem *p, const plan_law *law, int t, double level, plan_option *o)
{
    plan_law s;
    if (!plan_law_shard(p, law, &s)) return 0;
    int k = fewest_units_from(p, &s, s.least_units, p->max_units[t], level);
    if (!k) return 0;
    *o = (plan_option){k, 0, plan_stage_throughput(p, &s, k, 0), 0, 1, 0};
    return 1;
}

/* Option x costs the objective less than o (or as much, and carries more);
 * any option beats none. */
static int cheaper(const plan_problem *p, int t, const plan_option *x, const plan_option *o)
{
    if (!o->units) return 1;
    double wx = option_weight(p, t, x), wo = option_weight(p, t, o);
    return wx < wo || (wx == wo && x->throughput > o->throughput);
}

/* The fewest units and servers of their own carrying the level. */
static int apart_at_level(const plan_problem *p, const plan_law *law, int t, double level, plan_option *o)
{
    *o = (plan_option){0, 0, 0, 0, 0, 0};
    o->servers = plan_stage_servers(p, law, level);
    /* servers take units of their type (hps-cluster(5)): a stage on it has the rest */
    if (o->servers >= 0)
        o->units = fewest_units(p, law, p->max_units[t] - plan_units_taken(p, t, 0, o->servers, t), level);
    if (o->units) o->throughput = plan_stage_throughput(p, law, o->units, o->servers);
    return o->units > 0;
}

/* The law whose servers the apart and beside ways take: the stage's own,
 * or for rows that fit its HBM, the same rows on the servers (*moved);
 * NULL when there is none. */
static const plan_law *servers_way(const plan_problem *p, const plan_law *law, plan_law *buf, int *moved)
{
    *moved = law->rows == PLAN_ROWS_HBM && !law->shards;
    if (!*moved) return law;
    return plan_law_servers(p, law, buf) ? buf : NULL;
}

int plan_stage_at_level(const plan_problem *p, const plan_law *law, int t, double level, plan_option *o)
{
    if (!law->fits) return 0;
    int any = law->pick == PLAN_PICK_ANY, moved;
    plan_law buf;
    const plan_law *sv = servers_way(p, law, &buf, &moved);
    plan_option x;
    *o = (plan_option){0, 0, 0, 0, 0, 0};
    /* rows that fit one unit in its HBM, whole */
    if (moved && (any || law->pick == PLAN_PICK_HBM)) apart_at_level(p, law, t, level, o);
    /* on servers of their own, beside the units, or in shards over them,
     * when that costs the objective less */
    if (sv && (any || law->pick == PLAN_PICK_APART) && apart_at_level(p, sv, t, level, &x) && cheaper(p, t, &x, o))
        *o = x, o->on_servers = moved;
    if (sv && (any || law->pick == PLAN_PICK_BESIDE) && colocated_at_level(p, sv, t, level, &x) && cheaper(p, t, &x, o))
        *o = x, o->on_servers = moved;
    if ((any || law->pick == PLAN_PICK_SHARDS) && sharded_at_level(p, law, t, level, &x) && cheaper(p, t, &x, o))
        *o = x;
    return o->units > 0;
}

/* On the servers' type, units and servers share the limit: the stage's
 * units rise while they are the slower, so the fastest split is where the
 * units' rate crosses the servers' (both monotone up to the best units). */
static int servers_beside(const plan_problem *p, int t, int units)
{
    return p->max_units[t] - units < p->max_servers ? p->max_units[t] - units : p->max_servers;
}

/* The fastest with servers of their own. */
static void fastest_apart(const plan_problem *p, const plan_law *law, int t, plan_option *o)
{
    int max = p->max_units[t], least = plan_stage_servers(p, law, 0);
    o->coloc = o->shards = o->on_servers = 0;
    if (least < 0) { /* no count within max_servers holds the rows: no rate at all (hps-plan(1), MEMORY) */
        o->units = plan_law_best_units(law, max);
        o->servers = p->max_servers;
        o->throughput = 0;
        return;
    }
    if (t != p->server_type || !least) {
        o->units = plan_law_best_units(law, max);
        o->servers = p->max_servers;
    } else if (max - least < 1) { /* the servers leave it no unit: short of its limit already */
        o->units = 1;
        o->servers = least;
    } else {
        int lo = 1, hi = plan_law_best_units(law, max - least);
        while (lo < hi) { /* the last k whose units are slower than the servers beside them */
            int k = lo + (hi - lo + 1) / 2;
            if (throughput_of(p, plan_law_ms(law, k)) <= plan_servers_throughput(p, law, servers_beside(p, t, k)))
                lo = k;
            else
                hi = k - 1;
        }
        o->units = lo;
        if (lo < max - least && plan_stage_throughput(p, law, lo + 1, servers_beside(p, t, lo + 1)) >
                                    plan_stage_throughput(p, law, lo, servers_beside(p, t, lo)))
            o->units = lo + 1;
        o->servers = servers_beside(p, t, o->units);
    }
    o->throughput = plan_stage_throughput(p, law, o->units, o->servers);
}

/* The fastest with the servers beside the units, when faster than o. */
static void fastest_beside(const plan_problem *p, const plan_law *law, int t, int moved, plan_option *o)
{
    plan_law c;
    int fewest;
    if (!plan_law_colocate(p, law, t, &c) || (fewest = plan_coloc_least_units(p, &c, t)) <= 0) return;
    for (int k = fewest; k <= p->max_units[t]; k++) {
        double thr = plan_stage_throughput(p, &c, k, 0);
        if (thr > o->throughput) *o = (plan_option){k, 0, thr, 1, 0, moved};
    }
}

void plan_stage_fastest(const plan_problem *p, const plan_law *law, int t, plan_option *o)
{
    int any = law->pick == PLAN_PICK_ANY, max = p->max_units[t], moved;
    plan_law buf, c;
    const plan_law *sv = servers_way(p, law, &buf, &moved);
    plan_option x;
    /* the way asked for, else none at all: the servers apart, or the rows whole in HBM */
    *o = (plan_option){plan_law_best_units(law, max), 0, 0, law->pick == PLAN_PICK_BESIDE,
                       law->pick == PLAN_PICK_SHARDS, 0};
    if (moved && (any || law->pick == PLAN_PICK_HBM)) fastest_apart(p, law, t, o);
    if (sv && (any || law->pick == PLAN_PICK_APART)) {
        fastest_apart(p, sv, t, &x);
        x.on_servers = moved;
        if (!moved || x.throughput > o->throughput) *o = x;
    }
    /* or with the servers beside its units, when that is faster */
    if (sv && (any || law->pick == PLAN_PICK_BESIDE)) fastest_beside(p, sv, t, moved, o);
    /* or its rows in shards: the fastest count, at least those that hold them */
    if ((any || law->pick == PLAN_PICK_SHARDS) && plan_law_shard(p, law, &c)) {
        int k = plan_law_best_units(&c, max);
        k = k > c.least_units ? k : c.least_units;
        double thr = plan_stage_throughput(p, &c, k, 0);
        if (thr > o->throughput) *o = (plan_option){k, 0, thr, 0, 1, 0};
    }
}

/* Just above cur's throughput, the unit or server at the bottleneck must
 * grow; the step widens when rounding keeps the same provisioning. */
int plan_stage_next(const plan_problem *p, const plan_law *law, int t, const plan_option *cur, plan_option *next)
{
    plan_option was = *cur; /* next may be cur */
    if (!isfinite(was.throughput)) return 0;
    for (double step = 1e-9; step < 1e-3; step *= 10) {
        if (!plan_stage_at_level(p, law, t, was.throughput * (1 + step), next)) return 0;
        if (next->units != was.units || next->servers != was.servers || next->coloc != was.coloc ||
            next->shards != was.shards || next->on_servers != was.on_servers)
            return 1;
    }
    return 0;
}

int plan_units_taken(const plan_problem *p, int t, int units, int servers, int x)
{
    return (x == t ? units : 0) + (x == p->server_type ? servers : 0);
}

void plan_take_units(const plan_problem *p, int t, int units, int servers, int *used)
{
    used[t] += units;
    if (p->server_type >= 0) used[p->server_type] += servers;
}

int plan_instances(const plan_problem *p, int t, int n)
{
    int k = p->units_per_instance[t] > 0 ? p->units_per_instance[t] : 1;
    return (n + k - 1) / k;
}

/* Servers share the instances of their type only where it has several
 * units an instance; else each is one unit at server_price, as before
 * instances (a random instance's server_price need not be its type's). */
static int servers_in_instances(const plan_problem *p)
{
    return p->server_type >= 0 && p->units_per_instance[p->server_type] > 1;
}

double plan_rent_per_hour(const plan_problem *p, const int *units, int servers)
{
    int shared = servers_in_instances(p);
    double rate = 0;
    for (int t = 0; t < p->n_types; t++) {
        int n = units[t] + (shared && t == p->server_type ? servers : 0);
        rate += plan_instances(p, t, n) * p->units_per_instance[t] * p->price[t];
    }
    /* the servers last, as the bill was summed before instances: the same
     * bits for one unit an instance (the shipped policy was trained on them) */
    return shared ? rate : rate + servers * p->server_price;
}

/* With its servers beside its units (law->coloc), k units have k servers. */
double plan_stage_throughput(const plan_problem *p, const plan_law *law, int k, int servers)
{
    return fmin(throughput_of(p, plan_law_ms(law, k)), plan_servers_throughput(p, law, law->coloc ? k : servers));
}

double plan_link_ms(const plan_problem *p, int first, int a, int b)
{
    if (first <= 0 || p->link_bpms[a][b] <= 0) return 0;
    return p->cut_bytes[first] / p->link_bpms[a][b] + 2 * p->link_ms[a][b];
}

int plan_micro_batches(const plan_problem *p, int n_stages)
{
    return p->micro_batches > 0 ? p->micro_batches : n_stages;
}

double plan_bubble(const plan_problem *p, int n_stages)
{
    if (p->micro_batches == PLAN_NO_BUBBLE) return 1;
    double m = plan_micro_batches(p, n_stages);
    return m / (m + n_stages - 1);
}

double plan_score(const plan_eval *e)
{
    return e->feasible ? e->objective : 1e30 * (1 + e->violation);
}

void plan_eval_init(plan_eval *e, const plan_problem *p)
{
    memset(e, 0, sizeof *e);
    e->stages = hps_calloc((size_t)p->n_layers, sizeof *e->stages);
    e->scratch = hps_calloc(2 * (size_t)p->n_layers, sizeof *e->scratch);
}

void plan_eval_free(plan_eval *e)
{
    free(e->stages);
    free(e->scratch);
    e->stages = NULL;
    e->scratch = NULL;
}

/* The stage's time and throughput at its units and servers, on the law
 * they run (its servers beside its units: colocated; plan_evaluate settles
 * the law once provisioning is done). */
static void stage_times(const plan_problem *p, plan_stage *s)
{
    plan_law c = s->law;
    /* rows that fit its HBM on the servers instead, then those beside its units */
    if (s->on_servers) plan_law_servers(p, &c, &c);
    if (s->coloc) plan_law_colocate(p, &c, s->type, &c);
    if (s->shards) plan_law_shard(p, &c, &c);
    const plan_law *law = &c;
    s->ms = plan_law_ms(law, s->units);
    s->throughput = plan_stage_throughput(p, law, s->units, s->servers);
}

/* Provisions one stage; returns its shortfall (0 when it meets the limit). */
static double stage_fill(const plan_problem *p, plan_stage *s, int prev_type, double level, int pick)
{
    double shortfall = 0;
    plan_option o;
    plan_stage_law(p, s->first, s->end, s->type, &s->law);
    s->law.pick = pick;
    plan_stage_fastest(p, &s->law, s->type, &o);
    s->best_units = o.units;
    s->best_throughput = o.throughput;
    s->short_of_limit = 0;
    s->coloc = s->shards = s->on_servers = 0;
    if (plan_stage_at_level(p, &s->law, s->type, level, &o)) {
        s->units = o.units;
        s->servers = o.servers;
        s->coloc = o.coloc;
        s->shards = o.shards;
        s->on_servers = o.on_servers;
    } else {
        s->short_of_limit |= PLAN_SHORT_STAGE;
        s->units = s->best_units;
        shortfall += fmax(0, 1 - s->best_throughput / level);
        if (!s->law.fits) shortfall += 1 + s->law.mem_bytes / fmax(1, p->mem_bytes[s->type]);
        s->servers = plan_stage_servers(p, &s->law, level);
        if (s->servers < 0) s->servers = p->max_servers; /* short of the limit already */
    }
    stage_times(p, s);
    s->link_ms = prev_type >= 0 ? plan_link_ms(p, s->first, prev_type, s->type) : 0;
    s->link_throughput = s->link_ms > 0 ? throughput_of(p, s->link_ms) : 0;
    if (s->link_ms > 0 && s->link_throughput < level * (1 - 1e-12)) {
        s->short_of_limit |= PLAN_SHORT_LINK;
        shortfall += 1 - s->link_throughput / level;
    }
    return shortfall;
}

/* The provisioning that scores best, for a plan every stage of which meets
 * the limit at its fewest units: raising the bottleneck level step by step
 * (each stage at the fewest units and servers carrying it) from the limit
 * until a unit limit, a link or the stages' best stop it, or no level above
 * can score better (rate and power only grow with the level).  Any other
 * provisioning at the same bottleneck costs more, so this is optimal. */
static void provision_for_objective(const plan_problem *p, plan_eval *e)
{
    int S = e->n_stages, T = p->n_types;
    double bubble = plan_bubble(p, S);
    plan_option *cur = e->scratch, *best = e->scratch + S;
    double cap = HUGE_VAL, top, best_v = HUGE_VAL;
    for (int s = 0; s < S; s++) {
        plan_stage *st = &e->stages[s];
        cur[s] = (plan_option){st->units, st->servers, st->throughput, st->coloc, st->shards, st->on_servers};
        if (st->link_ms > 0) cap = fmin(cap, st->link_throughput);
    }
    top = cap;
    for (int s = 0; s < S; s++) top = fmin(top, e->stages[s].best_throughput);
    for (;;) {
        int units[PLAN_MAX_TYPES] = {0}, workers[PLAN_MAX_TYPES] = {0}, servers = 0;
        double thr = cap, power = 0;
        for (int s = 0; s < S; s++) {
            int t = e->stages[s].type;
            thr = fmin(thr, cur[s].throughput);
            plan_take_units(p, t, cur[s].units, cur[s].servers, units);
            workers[t] += cur[s].units;
            servers += cur[s].servers;
            power += cur[s].units * p->power[t] + cur[s].servers * p->server_power;
        }
        for (int t = 0; t < T; t++)
            if (units[t] > p->max_units[t]) goto done;
        /* whole instances: more units may cost nothing, so the level search
         * goes on (the rate never falls as the level rises) */
        double rate = plan_rent_per_hour(p, workers, servers);
        double v = plan_objective_value(p, rate, power, thr * bubble);
        if (v < best_v * (1 - 1e-12)) {
            best_v = v;
            memcpy(best, cur, (size_t)S * sizeof *cur);
        }
        if (thr >= cap || !(plan_objective_value(p, rate, power, top * bubble) < best_v * (1 - 1e-12))) break;
        for (int s = 0; s < S; s++)
            if (cur[s].throughput <= thr &&
                !plan_stage_next(p, &e->stages[s].law, e->stages[s].type, &cur[s], &cur[s]))
                goto done;
    }
done:
    for (int s = 0; s < S; s++) {
        plan_stage *st = &e->stages[s];
        st->units = best[s].units;
        st->servers = best[s].servers;
        st->coloc = best[s].coloc;
        st->shards = best[s].shards;
        st->on_servers = best[s].on_servers;
        stage_times(p, st);
    }
}

/* plan_evaluate with stage i's servers where picks[i] says (NULL: any). */
#define PLAN_MAX_STAGES_EVAL 64
static void evaluate_picks(const plan_problem *p, const int *assign, plan_eval *e, const int *picks)
{
    int L = p->n_layers, T = p->n_types;
    e->n_stages = 0;
    e->violation = 0;
    e->throughput = HUGE_VAL;
    e->cost_per_hour = e->power_w = 0;
    e->bottleneck = e->bottleneck_is_link = 0;
    e->servers = 0;
    memset(e->units, 0, sizeof e->units);
    for (int first = 0; first < L;) {
        int end = first + 1;
        while (end < L && assign[end] == assign[first]) end++;
        plan_stage *s = &e->stages[e->n_stages++];
        s->first = first;
        s->end = end;
        s->type = assign[first];
        first = end;
    }
    /* the stages must carry the limit through the pipeline's bubble */
    e->micro_batches = plan_micro_batches(p, e->n_stages);
    e->bubble = plan_bubble(p, e->n_stages);
    double level = p->min_throughput / e->bubble;
    memset(e->used, 0, sizeof e->used);
    for (int i = 0; i < e->n_stages; i++) {
        plan_stage *s = &e->stages[i];
        e->violation += stage_fill(p, s, i ? e->stages[i - 1].type : -1, level, picks ? picks[i] : PLAN_PICK_ANY);
        plan_take_units(p, s->type, s->units, s->servers, e->used);
    }
    for (int t = 0; t < T; t++)
        if (e->used[t] > p->max_units[t])
            e->violation += (double)(e->used[t] - p->max_units[t]) / p->max_units[t];
    if (e->violation == 0) provision_for_objective(p, e);
    /* a stage with its servers beside its units runs the law that charges
     * them; one with its rows in shards, the law of shards, its units'
     * memory at their count */
    for (int i = 0; i < e->n_stages; i++) {
        plan_stage *s = &e->stages[i];
        if (s->on_servers) plan_law_servers(p, &s->law, &s->law);
        if (s->coloc) plan_law_colocate(p, &s->law, s->type, &s->law);
        if (s->shards && plan_law_shard(p, &s->law, &s->law)) s->law.mem_bytes = plan_law_mem_bytes(&s->law, s->units);
    }
    memset(e->used, 0, sizeof e->used);
    e->coloc_servers = 0;
    for (int i = 0; i < e->n_stages; i++) {
        const plan_stage *s = &e->stages[i];
        if (s->throughput < e->throughput) {
            e->throughput = s->throughput;
            e->bottleneck = i;
            e->bottleneck_is_link = 0;
        }
        if (s->link_ms > 0 && s->link_throughput < e->throughput) {
            e->throughput = s->link_throughput;
            e->bottleneck = i;
            e->bottleneck_is_link = 1;
        }
        e->units[s->type] += s->units;
        e->servers += s->servers;
        e->coloc_servers += s->coloc ? s->units : 0;
        plan_take_units(p, s->type, s->units, s->servers, e->used);
    }
    for (int t = 0; t < T; t++) e->power_w += e->units[t] * p->power[t];
    e->cost_per_hour = plan_rent_per_hour(p, e->units, e->servers);
    /* the servers' share of it: what the bill would lose without them */
    e->server_cost_per_hour = e->cost_per_hour - plan_rent_per_hour(p, e->units, 0);
    e->power_w += e->servers * p->server_power;
    e->throughput *= e->bubble;
    e->feasible = e->violation == 0;
    e->time_s = p->samples * p->epochs / e->throughput;
    e->cost = e->time_s * e->cost_per_hour / 3600.0;
    e->energy_j = e->time_s * e->power_w;
    e->edp = e->energy_j * e->time_s;
    e->objective = plan_objective_value(p, e->cost_per_hour, e->power_w, e->throughput);
}

/* Stages whose rows have several ways to live (whole in HBM, servers
 * apart, beside the units, HBM shards over them) are tried every way, each combination
 * provisioned for the objective: under unit limits shared across stages
 * the cheapest way at each level need not be the best plan.  Past
 * PLAN_MAX_WAYS such stages, each level takes the cheapest. */
#define PLAN_MAX_WAYS 4
void plan_evaluate(const plan_problem *p, const int *assign, plan_eval *e)
{
    evaluate_picks(p, assign, e, NULL);
    int which[PLAN_MAX_WAYS], ways[PLAN_MAX_WAYS][3], n_ways[PLAN_MAX_WAYS], m = 0, picks[PLAN_MAX_STAGES_EVAL];
    int combos = 1;
    for (int i = 0; i < e->n_stages; i++) {
        plan_law d, c;
        const plan_stage *s = &e->stages[i];
        plan_stage_law(p, s->first, s->end, s->type, &d);
        int n = 0, w[3];
        /* rows that fit its HBM there or on servers; else on servers or in shards */
        if (plan_law_servers(p, &d, &c)) w[n++] = PLAN_PICK_HBM;
        else c = d;
        w[n++] = PLAN_PICK_APART;
        if (plan_law_colocate(p, &c, s->type, &c)) w[n++] = PLAN_PICK_BESIDE;
        if (plan_law_shard(p, &d, &c)) w[n++] = PLAN_PICK_SHARDS;
        if (n < 2) continue;
        if (m == PLAN_MAX_WAYS || e->n_stages > PLAN_MAX_STAGES_EVAL) return;
        memcpy(ways[m], w, sizeof w);
        n_ways[m] = n;
        combos *= n;
        which[m++] = i;
    }
    if (!m) return;
    double best = plan_score(e);
    int best_combo = -1;
    for (int combo = 0; combo <= combos; combo++) {
        int x = combo == combos ? best_combo : combo; /* last: the best again, or the first pass */
        for (int i = 0; i < e->n_stages; i++) picks[i] = PLAN_PICK_ANY;
        for (int j = 0; j < m && x >= 0; x /= n_ways[j], j++) picks[which[j]] = ways[j][x % n_ways[j]];
        evaluate_picks(p, assign, e, combo == combos && best_combo < 0 ? NULL : picks);
        double v = plan_score(e);
        if (combo < combos && v < best * (1 - 1e-12)) best = v, best_combo = combo;
    }
}

/* The largest throughput over all assignments, every stage on the units
 * that make it fastest: a DP over (stages so far, end of prefix, type of
 * its last stage), the stage count for the bubble (an ideal pipeline needs
 * none of it: one count stands for all); 0 when no assignment's stages fit their units. */
double plan_max_throughput(const plan_problem *p, int *assign)
{
    int L = p->n_layers, T = p->n_types;
    int N = p->micro_batches == PLAN_NO_BUBBLE ? 1 : L < PLAN_MAX_STAGES ? L : PLAN_MAX_STAGES;
    size_t S = (size_t)(L + 1) * T;
    double *best = hps_malloc((size_t)N * S * sizeof(double));
    int *from = hps_malloc((size_t)N * S * 2 * sizeof(int));
    for (size_t k = 0; k < (size_t)N * S; k++) best[k] = -1;
    for (int i = 1; i <= L; i++)
        for (int t = 0; t < T; t++)
            for (int j = 0; j < i; j++) {
                plan_law law;
                plan_stage_law(p, j, i, t, &law);
                if (!law.fits) continue;
                plan_option o;
                plan_stage_fastest(p, &law, t, &o);
                double thr = o.throughput;
                if (!(thr > 0)) continue; /* its servers cannot hold its rows */
                for (int n = 0; n < N; n++) {
                    double *b = &best[n * S + (size_t)i * T + t];
                    int *f = &from[(n * S + (size_t)i * T + t) * 2];
                    if (j == 0) {
                        if (n == 0 && thr > *b) *b = thr, f[0] = 0, f[1] = -1;
                        continue;
                    }
                    int prev = N > 1 ? n - 1 : 0;
                    if (prev < 0) continue;
                    for (int u = 0; u < T; u++) {
                        double pb = best[prev * S + (size_t)j * T + u];
                        if (u == t || pb < 0) continue;
                        double lm = plan_link_ms(p, j, u, t), v = fmin(thr, pb);
                        if (lm > 0) v = fmin(v, throughput_of(p, lm));
                        if (v > *b) *b = v, f[0] = j, f[1] = u;
                    }
                }
            }
    int bn = 0, bt = 0;
    double v = -1;
    for (int n = 0; n < N; n++)
        for (int t = 0; t < T; t++) {
            double x = best[n * S + (size_t)L * T + t];
            if (x >= 0 && x * plan_bubble(p, n + 1) > v) v = x * plan_bubble(p, n + 1), bn = n, bt = t;
        }
    for (int i = L, n = bn, t = bt; i > 0 && v >= 0;) {
        const int *f = &from[(n * S + (size_t)i * T + t) * 2];
        int j = f[0], u = f[1];
        for (int l = j; l < i; l++) assign[l] = t;
        i = j;
        t = u;
        if (N > 1) n--;
    }
    if (v < 0) { /* every layer fits some type, but no chain of stages fits */
        for (int l = 0; l < L; l++) assign[l] = 0;
        v = 0;
    }
    free(best);
    free(from);
    return v;
}
