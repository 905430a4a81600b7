/* train_rows: a stage's embedding rows in the backend's memory (train_rows.h). */
#include <stdlib.h>
#include <string.h>

#include "core/hps_io.h"
#include "train/train_rows.h"

typedef struct {
    int64_t slot, row;
} rows_move;

typedef struct {
    rows_move *at;
    int64_t n, cap;
} rows_list;

typedef struct {
    hps_table *host;
    int D;
    float *w, *acc;            /* backend memory: cap_slots rows each */
    int64_t cap_slots, next_slot;
    int64_t *host_of;          /* per device slot: the host row fetched into it last */
    int64_t *free_slots, n_free, cap_free;
    /* per host row, grown with the host table */
    uint64_t *count, *stamp, *touched; /* touched: the step's id + 1 at its last lookup */
    int64_t *slot, *heap_at;           /* -1: not on the device, not in the heap */
    unsigned char *staged;
    int64_t cap_host;
    rows_list backs, fetches, stage;
    hps_sparse_grad **host_grads, *sum, *dev_sum;
    int n_host_grads;
    /* replicas: this process's rows named by key, every part's device slots */
    hps_row_key *keys;
    int64_t cap_keys, *part_slots, cap_part_slots;
} rows_layer;

/* A row of the eviction order with its key, (count, stamp) as they were
 * when it entered: the heap's comparisons read only the heap, not two
 * arrays by host row each (random reads that made the heap a sixth of the
 * small cache's step on the CPU backend, perf, dlrm-criteo). */
typedef struct {
    uint64_t count, stamp;
    int64_t row;
    int l;
} heap_entry;

struct train_rows {
    const hps_backend *be;
    int first, end;
    rows_layer *L;
    int64_t capacity, n_cached;
    /* the cached rows, lowest (count, stamp) first; those the step used stay
     * under their old keys until its end (least_unused, restore_order) */
    heap_entry *heap;
    int64_t n_heap, cap_heap;
    heap_entry *pinned; /* the cached rows the step used: their keys renewed at its end */
    int64_t n_pinned, cap_pinned;
    uint64_t *grown; /* restore_order: a bit a heap position whose key grew */
    int64_t cap_grown;
    int ordered; /* heap and pinned kept: the cache has been full (keeps_order) */
    uint64_t step_id, seq;
    train_rows_stats stats;
    train_rows_home home; /* get NULL: the host tables are the home */
};

static void *grow_array(void *p, int64_t *cap, int64_t need, size_t size)
{
    if (need <= *cap) return p;
    int64_t c = *cap ? *cap : 64;
    while (c < need) c *= 2;
    p = hps_realloc(p, (size_t)c * size);
    *cap = c;
    return p;
}

static void list_push(rows_list *s, int64_t slot, int64_t row)
{
    s->at = grow_array(s->at, &s->cap, s->n + 1, sizeof *s->at);
    s->at[s->n++] = (rows_move){slot, row};
}

static rows_layer *layer_of(train_rows *r, int l)
{
    HPS_CHECK(l >= r->first && l < r->end && r->L[l - r->first].host);
    return &r->L[l - r->first];
}

/* The per-row arrays cover host row `row`. */
static void cover_row(rows_layer *T, int64_t row)
{
    if (row < T->cap_host) return;
    int64_t old = T->cap_host, c = old ? old : 1024;
    while (c <= row) c *= 2;
    T->count = hps_realloc(T->count, (size_t)c * sizeof *T->count);
    T->stamp = hps_realloc(T->stamp, (size_t)c * sizeof *T->stamp);
    T->touched = hps_realloc(T->touched, (size_t)c * sizeof *T->touched);
    T->slot = hps_realloc(T->slot, (size_t)c * sizeof *T->slot);
    T->heap_at = hps_realloc(T->heap_at, (size_t)c * sizeof *T->heap_at);
    T->staged = hps_realloc(T->staged, (size_t)c * sizeof *T->staged);
    for (int64_t i = old; i < c; i++) {
        T->count[i] = T->stamp[i] = T->touched[i] = 0;
        T->slot[i] = T->heap_at[i] = -1;
        T->staged[i] = 0;
    }
    T->cap_host = c;
}

/* ---- the arena ------------------------------------------------------------- */

static void arena_grow(const hps_backend *be, rows_layer *T)
{
    int64_t c = T->cap_slots ? T->cap_slots * 2 : 1024;
    size_t old = (size_t)T->cap_slots * T->D * sizeof(float), now = (size_t)c * T->D * sizeof(float);
    float *host = hps_malloc(old + 1);
    float **arena[2] = {&T->w, &T->acc};
    for (int i = 0; i < 2; i++) {
        float *fresh = be->alloc(now);
        if (*arena[i]) {
            be->download(host, *arena[i], old);
            be->upload(fresh, host, old);
            be->release(*arena[i]);
        }
        *arena[i] = fresh;
    }
    free(host);
    T->host_of = hps_realloc(T->host_of, (size_t)c * sizeof *T->host_of);
    T->cap_slots = c;
}

static int64_t take_slot(const hps_backend *be, rows_layer *T)
{
    if (T->n_free) return T->free_slots[--T->n_free];
    if (T->next_slot == T->cap_slots) arena_grow(be, T);
    return T->next_slot++;
}

static void give_slot(rows_layer *T, int64_t slot)
{
    T->free_slots = grow_array(T->free_slots, &T->cap_free, T->n_free + 1, sizeof *T->free_slots);
    T->free_slots[T->n_free++] = slot;
}

/* ---- the heap of evictable rows ----------------------------------------------- */

static int heap_less(heap_entry a, heap_entry b)
{
    return a.count != b.count ? a.count < b.count : a.stamp < b.stamp;
}

static heap_entry entry_of(const train_rows *r, int l, int64_t row)
{
    const rows_layer *T = &r->L[l - r->first];
    return (heap_entry){T->count[row], T->stamp[row], row, l};
}

static void heap_set(train_rows *r, int64_t i, heap_entry e)
{
    r->heap[i] = e;
    r->L[e.l - r->first].heap_at[e.row] = i;
}

static void heap_up(train_rows *r, int64_t i)
{
    heap_entry e = r->heap[i];
    while (i > 0 && heap_less(e, r->heap[(i - 1) / 2])) {
        heap_set(r, i, r->heap[(i - 1) / 2]);
        i = (i - 1) / 2;
    }
    heap_set(r, i, e);
}

static void heap_down(train_rows *r, int64_t i)
{
    heap_entry e = r->heap[i];
    for (;;) {
        int64_t c = 2 * i + 1;
        if (c >= r->n_heap) break;
        if (c + 1 < r->n_heap && heap_less(r->heap[c + 1], r->heap[c])) c++;
        if (!heap_less(r->heap[c], e)) break;
        heap_set(r, i, r->heap[c]);
        i = c;
    }
    heap_set(r, i, e);
}

static void heap_push(train_rows *r, int l, int64_t row)
{
    r->heap = grow_array(r->heap, &r->cap_heap, r->n_heap + 1, sizeof *r->heap);
    r->heap[r->n_heap++] = entry_of(r, l, row);
    heap_up(r, r->n_heap - 1);
}

static void heap_remove(train_rows *r, int l, int64_t row)
{
    rows_layer *T = &r->L[l - r->first];
    int64_t i = T->heap_at[row];
    HPS_CHECK(i >= 0 && i < r->n_heap);
    T->heap_at[row] = -1;
    heap_entry last = r->heap[--r->n_heap];
    if (i == r->n_heap) return;
    heap_set(r, i, last);
    heap_up(r, i);
    heap_down(r, r->L[last.l - r->first].heap_at[last.row]);
}

/* ---- creation ----------------------------------------------------------------- */

train_rows *train_rows_create(const hps_backend *be, const hps_model *m, hps_table **tables,
                              int first, int end, int64_t capacity)
{
    train_rows *r = hps_calloc(1, sizeof *r);
    r->be = be;
    r->first = first, r->end = end;
    r->capacity = capacity;
    r->L = hps_calloc((size_t)(end - first), sizeof *r->L);
    for (int l = first; l < end; l++) {
        rows_layer *T = &r->L[l - first];
        if (!tables[l]) continue;
        T->host = tables[l];
        T->D = m->layers[l].dim;
    }
    return r;
}

void train_rows_free(train_rows *r)
{
    if (!r) return;
    for (int l = r->first; l < r->end; l++) {
        rows_layer *T = &r->L[l - r->first];
        if (T->w) r->be->release(T->w), r->be->release(T->acc);
        free(T->free_slots), free(T->count), free(T->stamp), free(T->touched), free(T->slot);
        free(T->heap_at), free(T->staged), free(T->host_of), free(T->keys), free(T->part_slots);
        free(T->backs.at), free(T->fetches.at), free(T->stage.at);
        for (int i = 0; i < T->n_host_grads; i++) hps_sparse_grad_free(T->host_grads[i]);
        free(T->host_grads);
        hps_sparse_grad_free(T->sum);
        if (T->dev_sum) r->be->sparse_grad_free(T->dev_sum);
    }
    free(r->L), free(r->heap), free(r->pinned), free(r->grown);
    free(r);
}

void train_rows_set_home(train_rows *r, const train_rows_home *home) { r->home = *home; }

/* The host rows of s from the home (get) or to it. */
static void home_move(train_rows *r, rows_layer *T, int l, const rows_list *s, int get)
{
    if (!r->home.get || !s->n) return;
    int64_t *rows = hps_malloc((size_t)s->n * sizeof *rows);
    for (int64_t i = 0; i < s->n; i++) rows[i] = s->at[i].row;
    (get ? r->home.get : r->home.put)(r->home.ctx, T->host, l, rows, s->n);
    free(rows);
}

/* ---- lookups ------------------------------------------------------------------- */

/* Row `row` of T gets a slot and is fetched at train_rows_prepare. */
static int64_t fetch(train_rows *r, rows_layer *T, int64_t row)
{
    int64_t s = take_slot(r->be, T);
    T->slot[row] = s;
    T->host_of[s] = row;
    list_push(&T->fetches, s, row);
    return s;
}

static void stage(train_rows *r, rows_layer *T, int64_t row)
{
    T->staged[row] = 1;
    list_push(&T->stage, fetch(r, T, row), row);
}

/* The cached row the heap puts first leaves the device: written back at
 * train_rows_prepare, before any fetch may reuse its slot. */
static void evict(train_rows *r, heap_entry v)
{
    rows_layer *V = &r->L[v.l - r->first];
    heap_remove(r, v.l, v.row);
    list_push(&V->backs, V->slot[v.row], v.row);
    give_slot(V, V->slot[v.row]);
    V->slot[v.row] = -1;
    r->n_cached--;
    r->stats.write_backs++;
}

/* Rows without a capacity (rows: hbm) never leave the device: they keep no
 * eviction order, whose upkeep on every row of every step was a quarter of
 * an hbm step's cycles on the CPU backend (perf, dlrm-criteo). */
static int evicts(const train_rows *r) { return r->capacity != INT64_MAX; }

/* A cache evicts only once it is full, so it keeps its eviction order from
 * then on: a cache that holds every row it is ever asked for (dlrm-criteo's
 * 581,217 rows in bench-fidelity) paid the heap's upkeep on every hit of
 * every step and ran at half its plan's rate.  Built late, the order evicts
 * the same rows: each eviction takes the least (count, stamp) of the rows
 * the step has not used, and stamps are unique (one seq for all layers). */
static int keeps_order(const train_rows *r) { return evicts(r) && r->ordered; }

/* The first row of the order that the step has not used (0: none).  A row
 * the step used stays in the heap under its old key, lower than its new
 * one, so it may come first: it leaves the heap then, to be pushed back at
 * the step's end.  The first row not used is the least of them all: their
 * keys in the heap are their own. */
static int least_unused(train_rows *r, heap_entry *v)
{
    while (r->n_heap > 0) {
        heap_entry e = r->heap[0];
        if (r->L[e.l - r->first].touched[e.row] != r->step_id + 1) return *v = e, 1;
        heap_remove(r, e.l, e.row);
    }
    return 0;
}

/* The step's rows back in order under their new keys.  A row still in the
 * heap only grew (count and stamp), so each is sifted down where it is,
 * the deepest first, as heapify does: the heap is whole again without
 * taking them out on every hit and in at the end (a remove and a push, each
 * up to log n levels, on every hit of every step).  The others (new, or
 * taken out by least_unused) are pushed. */
static void restore_order(train_rows *r)
{
    int64_t words = r->n_heap / 64 + 1;
    r->grown = grow_array(r->grown, &r->cap_grown, words, sizeof *r->grown);
    memset(r->grown, 0, (size_t)words * sizeof *r->grown);
    for (int64_t i = 0; i < r->n_pinned; i++) {
        heap_entry p = r->pinned[i];
        int64_t at = r->L[p.l - r->first].heap_at[p.row];
        if (at < 0) continue;
        r->heap[at] = entry_of(r, p.l, p.row);
        r->grown[at / 64] |= 1ull << (at % 64);
    }
    for (int64_t w = words - 1; w >= 0; w--)
        while (r->grown[w]) {
            int b = 63 - __builtin_clzll(r->grown[w]);
            r->grown[w] &= ~(1ull << b);
            heap_down(r, w * 64 + b);
        }
    for (int64_t i = 0; i < r->n_pinned; i++) {
        heap_entry p = r->pinned[i];
        if (r->L[p.l - r->first].heap_at[p.row] < 0) heap_push(r, p.l, p.row);
    }
    r->n_pinned = 0;
}

static void pin(train_rows *r, int l, int64_t row)
{
    r->pinned = grow_array(r->pinned, &r->cap_pinned, r->n_pinned + 1, sizeof *r->pinned);
    r->pinned[r->n_pinned++] = (heap_entry){.row = row, .l = l};
}

/* The full cache's order: the rows this step used pinned, the others in
 * the heap (heapified: one pass, not a push each). */
static void build_order(train_rows *r)
{
    for (int l = r->first; l < r->end; l++) {
        rows_layer *T = &r->L[l - r->first];
        for (int64_t row = 0; row < T->cap_host; row++) {
            if (T->slot[row] < 0 || T->staged[row]) continue;
            if (T->touched[row] == r->step_id + 1) {
                pin(r, l, row);
                continue;
            }
            r->heap = grow_array(r->heap, &r->cap_heap, r->n_heap + 1, sizeof *r->heap);
            heap_set(r, r->n_heap++, entry_of(r, l, row));
        }
    }
    for (int64_t i = r->n_heap / 2 - 1; i >= 0; i--) heap_down(r, i);
    r->ordered = 1;
}

/* n lookups of host row `row` of layer l in a row, taken at once: its count
 * grows by n, its stamp once (stamps stay one a call, so ties follow the
 * order of the calls), and the counts are those of n calls of one lookup:
 * after a miss the step's later lookups hit unless the row is staged. */
static int64_t map_lookups(train_rows *r, int l, int64_t row, uint32_t n)
{
    rows_layer *T = layer_of(r, l);
    HPS_CHECK(n > 0);
    cover_row(T, row);
    T->count[row] += n;
    T->stamp[row] = ++r->seq;
    r->stats.lookups += n;
    if (T->touched[row] == r->step_id + 1) { /* again this step: where its first lookup put it */
        r->stats.hits += T->staged[row] ? 0 : n;
        return T->slot[row];
    }
    T->touched[row] = r->step_id + 1;
    if (T->slot[row] >= 0) {
        r->stats.hits += n;
        if (keeps_order(r)) pin(r, l, row); /* it stays in the heap: least_unused passes it */
        return T->slot[row];
    }
    r->stats.misses++;
    if (r->n_cached == r->capacity && !r->ordered) build_order(r);
    heap_entry v;
    /* the first of the n decides, as when they come one by one */
    if (r->n_cached == r->capacity && least_unused(r, &v) && T->count[row] - (n - 1) > v.count) evict(r, v);
    if (r->n_cached == r->capacity) {
        stage(r, T, row);
        return T->slot[row];
    }
    r->stats.hits += n - 1; /* fetched: the rest of the n find it */
    r->n_cached++;
    if (keeps_order(r)) pin(r, l, row);
    return fetch(r, T, row);
}

int64_t train_rows_map(train_rows *r, int l, int64_t row, int evaluating)
{
    if (!evaluating) return map_lookups(r, l, row, 1);
    rows_layer *T = layer_of(r, l); /* the values as trained, nothing counted or moved */
    cover_row(T, row);
    if (T->slot[row] < 0) stage(r, T, row);
    return T->slot[row];
}

/* n host rows of T (their weights or accumulators in slab) to and from
 * their device slots, packed through a host buffer. */
static void move_rows(const hps_backend *be, rows_layer *T, const rows_list *s, int up)
{
    if (!s->n) return;
    int64_t *ids = hps_malloc((size_t)s->n * sizeof *ids);
    float *buf = hps_malloc((size_t)s->n * T->D * sizeof *buf);
    for (int64_t i = 0; i < s->n; i++) ids[i] = s->at[i].slot;
    for (int k = 0; k < 2; k++) {
        float *slab = k ? hps_table_accum(T->host) : hps_table_weights(T->host);
        float *dev = k ? T->acc : T->w;
        size_t bytes = (size_t)T->D * sizeof *buf;
        if (up) {
            for (int64_t i = 0; i < s->n; i++) memcpy(buf + i * T->D, slab + s->at[i].row * T->D, bytes);
            be->rows_put(dev, T->D, ids, s->n, buf);
        } else {
            be->rows_get(buf, dev, T->D, ids, s->n);
            for (int64_t i = 0; i < s->n; i++) memcpy(slab + s->at[i].row * T->D, buf + i * T->D, bytes);
        }
    }
    free(ids), free(buf);
}

void train_rows_prepare(train_rows *r)
{
    for (int l = r->first; l < r->end; l++) {
        rows_layer *T = &r->L[l - r->first];
        if (!T->host) continue;
        /* a row evicted and missed again in one load is in both lists: its
         * home's copy (older) comes first, the device's overwrites it */
        home_move(r, T, l, &T->fetches, 1);
        move_rows(r->be, T, &T->backs, 0);
        move_rows(r->be, T, &T->fetches, 1);
        home_move(r, T, l, &T->backs, 0);
        T->backs.n = T->fetches.n = 0;
    }
}

float *train_rows_weights(train_rows *r, int l)
{
    rows_layer *T = layer_of(r, l);
    if (!T->w) arena_grow(r->be, T);
    return T->w;
}

float *train_rows_accum(train_rows *r, int l)
{
    rows_layer *T = layer_of(r, l);
    if (!T->acc) arena_grow(r->be, T);
    return T->acc;
}

/* ---- updates ------------------------------------------------------------------- */

/* g (backend memory) into h (host), grown to hold it. */
static void grad_to_host(const hps_backend *be, const hps_sparse_grad *g, hps_sparse_grad **h)
{
    if (!*h || (*h)->cap < g->n) {
        hps_sparse_grad_free(*h);
        *h = hps_sparse_grad_create(g->n * 2 + 16, g->D);
    }
    (*h)->n = g->n;
    be->download((*h)->rows, g->rows, (size_t)g->n * sizeof *g->rows);
    be->download((*h)->grad, g->grad, (size_t)g->n * g->D * sizeof *g->grad);
}

/* The n gradients (backend memory) summed in host memory, as
 * hps_table_grad_sum sums them (T->sum, or the one host copy). */
static const hps_sparse_grad *host_sum(const hps_backend *be, rows_layer *T, hps_sparse_grad *const *grads,
                                       int n)
{
    if (n > T->n_host_grads) {
        T->host_grads = hps_realloc(T->host_grads, (size_t)n * sizeof *T->host_grads);
        for (int i = T->n_host_grads; i < n; i++) T->host_grads[i] = NULL;
        T->n_host_grads = n;
    }
    for (int i = 0; i < n; i++) grad_to_host(be, grads[i], &T->host_grads[i]);
    return hps_table_grad_sum(T->host_grads, n, T->D, &T->sum);
}

/* A summed gradient in host memory to the backend, then AdaGrad there. */
static void apply_sum(const hps_backend *be, rows_layer *T, const hps_sparse_grad *sum, float lr, float eps)
{
    if (!T->dev_sum || T->dev_sum->cap < sum->n) {
        if (T->dev_sum) be->sparse_grad_free(T->dev_sum);
        T->dev_sum = be->sparse_grad_create(sum->n * 2 + 16, T->D);
    }
    T->dev_sum->n = sum->n;
    be->upload(T->dev_sum->rows, sum->rows, (size_t)sum->n * sizeof *sum->rows);
    be->upload(T->dev_sum->grad, sum->grad, (size_t)sum->n * T->D * sizeof *sum->grad);
    be->sparse_adagrad(T->w, T->acc, T->dev_sum, lr, eps);
}

void train_rows_apply(train_rows *r, int l, hps_sparse_grad *const *grads, int n, float lr, float eps)
{
    rows_layer *T = layer_of(r, l);
    if (n == 1) { /* nothing to sum: the gradient stays where it is */
        r->be->sparse_adagrad(T->w, T->acc, grads[0], lr, eps);
        return;
    }
    apply_sum(r->be, T, host_sum(r->be, T, grads, n), lr, eps);
}

/* This process's summed gradient, its rows named by key (T->keys). */
static void name_rows(rows_layer *T, int l, const hps_sparse_grad *g)
{
    T->keys = grow_array(T->keys, &T->cap_keys, g->n + 1, sizeof *T->keys);
    for (int64_t i = 0; i < g->n; i++) {
        int slot;
        hps_table_row_key(T->host, T->host_of[g->rows[i]], &slot, &T->keys[i].key);
        T->keys[i].layer = l, T->keys[i].slot = slot;
    }
}

/* The device slot of the row of (slot, key) in layer l, placed there from
 * its host row if it is not: a key no lookup of this process made is
 * created as a lookup at `step` creates it (its first values are the key's);
 * being no lookup of this process, it is not counted.  Rows placed are
 * fetched at the next train_rows_prepare. */
static int64_t place_key(train_rows *r, int l, int slot, uint64_t key, uint64_t step, hps_error *err)
{
    rows_layer *T = layer_of(r, l);
    int64_t row = hps_table_lookup(T->host, slot, key, step, err);
    if (row < 0) return -1;
    cover_row(T, row);
    if (T->slot[row] < 0) { /* cached, this step not having used it */
        /* a cache (shards under mpirun) read every row of the step first */
        HPS_CHECK(r->capacity == INT64_MAX);
        r->n_cached++;
        fetch(r, T, row);
    }
    return T->slot[row];
}

/* Every part's rows on the device (T->part_slots). */
static int place_parts(train_rows *r, rows_layer *T, const hps_row_grads *all, uint64_t step, hps_error *err)
{
    int64_t total = all->parts ? all->end[all->parts - 1] : 0;
    T->part_slots = grow_array(T->part_slots, &T->cap_part_slots, total + 1, sizeof *T->part_slots);
    for (int64_t e = 0; e < total; e++) {
        const hps_row_key *k = &all->keys[e];
        if ((T->part_slots[e] = place_key(r, (int)k->layer, k->slot, k->key, step, err)) < 0) return -1;
    }
    train_rows_prepare(r);
    return 0;
}

int train_rows_apply_parts(train_rows *r, int l, const hps_row_grads *all, uint64_t step, float lr, float eps,
                           hps_error *err)
{
    rows_layer *T = layer_of(r, l);
    HPS_CHECK(all->parts >= 1); /* every row of the parts is here: hbm, or a cache that read them */
    if (all->end[all->parts - 1] == 0) return 0; /* no worker's rows: nothing to update */
    if (place_parts(r, T, all, step, err)) return -1;
    /* summed per row in worker order, as a parameter server sums its
     * workers' pushes: every replica adds the same floats in the same order */
    hps_sparse_grad *views = hps_malloc((size_t)all->parts * sizeof *views);
    hps_sparse_grad **src = hps_malloc((size_t)all->parts * sizeof *src);
    for (int w = 0; w < all->parts; w++) {
        int64_t lo = w ? all->end[w - 1] : 0, k = all->end[w] - lo;
        views[w] = (hps_sparse_grad){.n = k, .cap = k, .D = T->D, .rows = T->part_slots + lo,
                                     .grad = (float *)all->grad + lo * T->D};
        src[w] = &views[w];
    }
    apply_sum(r->be, T, hps_table_grad_sum(src, all->parts, T->D, &T->sum), lr, eps);
    free(views), free(src);
    return 0;
}

int train_rows_apply_replicas(train_rows *r, int l, hps_sparse_grad *const *grads, int n,
                              const hps_train_dist *h, uint64_t step, float lr, float eps, hps_error *err)
{
    rows_layer *T = layer_of(r, l);
    hps_sparse_grad none = {.D = T->D};
    const hps_sparse_grad *mine = n > 0 ? host_sum(r->be, T, grads, n) : &none;
    name_rows(T, l, mine);
    hps_row_grads all;
    if (h->exchange_rows(h->ctx, l, T->keys, mine->grad, mine->n, &all, err)) return -1;
    return train_rows_apply_parts(r, l, &all, step, lr, eps, err);
}

int train_rows_read(train_rows *r, const hps_row_key *keys, const uint32_t *lookups, int64_t n, uint64_t step,
                    float *out, hps_error *err)
{
    int64_t *slots = hps_malloc((size_t)(n + 1) * sizeof *slots), *at = hps_malloc((size_t)(n + 1) * sizeof *at);
    int64_t *ids = hps_malloc((size_t)(n + 1) * sizeof *ids), floats = 0;
    int rc = 0;
    for (int64_t i = 0; i < n && rc == 0; i++) {
        rows_layer *T = layer_of(r, keys[i].layer);
        at[i] = floats;
        floats += T->D;
        /* a worker's lookups of the key as one process's: counted, and with
         * a cache maybe a miss */
        int64_t row = hps_table_lookup(T->host, keys[i].slot, keys[i].key, step, err);
        if (row < 0) rc = -1;
        else slots[i] = map_lookups(r, keys[i].layer, row, lookups ? lookups[i] : 1);
    }
    train_rows_prepare(r);
    float *buf = hps_malloc((size_t)(floats + 1) * sizeof *buf);
    /* one copy a layer, the keys being of several layers (each its arena and width) */
    for (int l = r->first; l < r->end && rc == 0; l++) {
        rows_layer *T = &r->L[l - r->first];
        int64_t m = 0;
        for (int64_t i = 0; T->host && i < n; i++)
            if (keys[i].layer == l) ids[m++] = slots[i];
        if (!m) continue;
        r->be->rows_get(buf, T->w, T->D, ids, m);
        for (int64_t i = 0, j = 0; i < n; i++)
            if (keys[i].layer == l) memcpy(out + at[i], buf + j++ * T->D, (size_t)T->D * sizeof *buf);
    }
    free(slots), free(at), free(ids), free(buf);
    return rc;
}

void train_rows_step_end(train_rows *r, int write_back)
{
    for (int l = r->first; l < r->end; l++) {
        rows_layer *T = &r->L[l - r->first];
        if (!T->host) continue;
        if (write_back) move_rows(r->be, T, &T->stage, 0), home_move(r, T, l, &T->stage, 0);
        if (write_back) r->stats.write_backs += (uint64_t)T->stage.n;
        for (int64_t i = 0; i < T->stage.n; i++) {
            give_slot(T, T->stage.at[i].slot);
            T->slot[T->stage.at[i].row] = -1;
            T->staged[T->stage.at[i].row] = 0;
        }
        T->stage.n = 0;
    }
    if (!write_back) return; /* an evaluation batch pins nothing */
    restore_order(r);
    r->step_id++;
}

/* Every cached row between the device and its host row (up: to the device). */
static void move_cached(train_rows *r, int up)
{
    for (int l = r->first; l < r->end; l++) {
        rows_layer *T = &r->L[l - r->first];
        if (!T->host) continue;
        rows_list all = {0};
        for (int64_t row = 0; row < T->cap_host; row++)
            if (T->slot[row] >= 0 && !T->staged[row]) list_push(&all, T->slot[row], row);
        if (up) home_move(r, T, l, &all, 1);
        move_rows(r->be, T, &all, up);
        if (!up) home_move(r, T, l, &all, 0);
        free(all.at);
    }
}

void train_rows_flush(train_rows *r) { move_cached(r, 0); }
void train_rows_reload(train_rows *r) { move_cached(r, 1); }

const train_rows_stats *train_rows_stats_of(const train_rows *r) { return &r->stats; }
int64_t train_rows_capacity(const train_rows *r) { return r->capacity; }

/* ---- checkpoints ---------------------------------------------------------------- */

#define ROWS_MAGIC 0x53574f52u /* "ROWS" */

int train_rows_save(const train_rows *r, FILE *f)
{
    uint32_t magic = ROWS_MAGIC;
    uint64_t head[6] = {r->step_id, r->seq, r->stats.lookups, r->stats.hits, r->stats.misses,
                        r->stats.write_backs};
    if (!HPS_FWRITE(f, &magic, 1) || !HPS_FWRITE(f, head, 6)) return -1;
    for (int l = r->first; l < r->end; l++) {
        const rows_layer *T = &r->L[l - r->first];
        if (!T->host) continue;
        int64_t n = hps_table_rows(T->host);
        if (n > T->cap_host) n = T->cap_host;
        if (!HPS_FWRITE(f, &n, 1)) return -1;
        for (int64_t row = 0; row < n; row++) {
            uint64_t rec[3] = {T->count[row], T->stamp[row], T->slot[row] >= 0 && !T->staged[row]};
            if (!HPS_FWRITE(f, rec, 3)) return -1;
        }
    }
    return 0;
}

/* Nothing on the device, nothing counted: before a checkpoint's state. */
static void rows_reset(train_rows *r)
{
    for (int l = r->first; l < r->end; l++) {
        rows_layer *T = &r->L[l - r->first];
        for (int64_t row = 0; row < T->cap_host; row++) {
            T->count[row] = T->stamp[row] = T->touched[row] = 0;
            T->slot[row] = T->heap_at[row] = -1;
            T->staged[row] = 0;
        }
        T->next_slot = T->n_free = 0;
        T->backs.n = T->fetches.n = T->stage.n = 0;
    }
    r->n_cached = r->n_heap = r->n_pinned = r->ordered = 0;
    r->step_id = r->seq = 0;
    r->stats = (train_rows_stats){0};
}

int train_rows_load(train_rows *r, FILE *f, hps_error *err, const char *name)
{
    uint32_t magic = 0;
    rows_reset(r);
    if (fread(&magic, sizeof magic, 1, f) != 1) return 0; /* none saved: a cold cache */
    uint64_t head[6];
    if (magic != ROWS_MAGIC || !HPS_FREAD(f, head, 6))
        return hps_fail(err, HPS_EXIT_RUNTIME, "%s: bad device rows section", name);
    r->step_id = head[0], r->seq = head[1];
    r->stats = (train_rows_stats){head[2], head[3], head[4], head[5]};
    for (int l = r->first; l < r->end; l++) {
        rows_layer *T = &r->L[l - r->first];
        if (!T->host) continue;
        int64_t n;
        if (!HPS_FREAD(f, &n, 1) || n < 0 || n > hps_table_rows(T->host))
            return hps_fail(err, HPS_EXIT_RUNTIME, "%s: embedding layer %d: bad device rows", name, l);
        if (n) cover_row(T, n - 1);
        for (int64_t row = 0; row < n; row++) {
            uint64_t rec[3];
            if (!HPS_FREAD(f, rec, 3) || rec[2] > 1 || rec[1] > r->seq)
                return hps_fail(err, HPS_EXIT_RUNTIME, "%s: embedding layer %d: bad device row %lld",
                                name, l, (long long)row);
            T->count[row] = rec[0], T->stamp[row] = rec[1];
            if (!rec[2]) continue;
            if (r->n_cached == r->capacity)
                return hps_fail(err, HPS_EXIT_RUNTIME, "%s: caches more rows than the plan's %lld", name,
                                (long long)r->capacity);
            r->n_cached++;
            fetch(r, T, row);
            if (keeps_order(r)) heap_push(r, l, row);
        }
    }
    train_rows_prepare(r);
    return 0;
}
