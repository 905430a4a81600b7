/* The plan file: it round-trips through JSON, and what hps-shard and
 * hps-train read (assignment, digests, workers, servers) is consistent. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/hps_io.h"
#include "core/hps_json.h"
#include "plan/hps_plan.h"
#include "plan/hps_plan_file.h"
#include "plan_fixture.h"

/* The fixture's exact plan, evaluated and laid out. */
static void solve_plan(const plan_fixture *f, uint64_t seed, plan_result *r, plan_eval *e, plan_layout *l)
{
    hps_error err;
    plan_result_init(r, f->p);
    plan_eval_init(e, f->p);
    plan_solve_exact(f->p, &(plan_search_opts){.seed = seed, .bound_time = 5}, r);
    plan_evaluate(f->p, r->assign, e);
    assert_int_equal(plan_layout_make(f->p, f->c, e, l, &err), 0);
}

/* The fixture's exact plan as hps-plan writes it (hps-plan(5)). */
static json_t *exact_plan_json(const plan_fixture *f, plan_result *r, plan_eval *e, plan_layout *l)
{
    plan_search_opts o = {.seed = 3, .bound_time = 5};
    solve_plan(f, o.seed, r, e, l);
    assert_true(e->feasible);
    const char *names[] = {"demo-ctr.json"}, *digests[] = {hps_profiles_digest(f->ps, 0)};
    plan_meta meta = {.model_path = "m.json", .cluster_path = "c.json", .model_digest = f->m->digest,
                      .cluster_digest = f->c->digest, .n_profiles = 1, .profile_names = names,
                      .profile_digests = digests, .model_name = f->m->name, .algorithm = "exact",
                      .opts = o, .exact_objective = e->objective};
    return plan_to_json(f->p, e, l, r, &meta, f->c);
}

/* Reads a plan's text back as hps-train does, from a file beside /tmp/m.json. */
static void load_plan_text(const char *text, plan_file *pf)
{
    hps_error err;
    char path[] = "/tmp/hps-plan-emit-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0 && write(fd, text, strlen(text)) == (ssize_t)strlen(text));
    close(fd);
    assert_int_equal(plan_file_load(path, pf, &err), 0);
    unlink(path);
}

static void test_plan_round_trips(void **state)
{
    (void)state;
    plan_fixture f;
    plan_fixture_load(&f, HPS_TESTDATA "/models/demo-ctr.json", HPS_TESTDATA "/clusters/aws.json",
                      HPS_TESTDATA "/profiles/demo-ctr.json", 1000000);
    f.p->max_servers = 0, f.p->separate_servers = 1; /* its rows in HBM: its layers all on its GPUs */
    plan_result r;
    plan_eval e;
    plan_layout l;
    hps_error err;
    json_t *root = exact_plan_json(&f, &r, &e, &l);
    char *text = hps_json_text(root);
    json_t *back;
    plan_file pf;
    load_plan_text(text, &pf);
    assert_int_equal(hps_json_loadb("plan.json", text, strlen(text), &back, &err), 0);
    assert_string_equal(pf.model_digest, f.m->digest);
    assert_string_equal(pf.cluster_digest, f.c->digest);
    assert_string_equal(pf.objective, "cost");
    assert_true(pf.min_throughput == 1000000 && pf.epochs == 1 && pf.n_layers == 7);
    for (int i = 0; i < 7; i++) assert_string_equal(pf.assign[i], f.p->type_names[r.assign[i]]);
    assert_int_equal(pf.n_stages, e.n_stages);
    assert_int_equal(pf.n_workers, l.n_workers);
    assert_int_equal(pf.n_servers, l.n_servers);
    assert_string_equal(pf.model_path, "/tmp/m.json"); /* beside the plan */
    for (int s = 0; s < e.n_stages; s++) {
        assert_int_equal(pf.stages[s].first, e.stages[s].first);
        assert_int_equal(pf.stages[s].end, e.stages[s].end);
        assert_string_equal(pf.stages[s].rows, plan_rows_names[e.stages[s].law.rows]);
        assert_int_equal(pf.stages[s].servers_beside, e.stages[s].coloc);
        /* what the layers compute on each unit: their t1 on the type, split over the units */
        const plan_stage *st = &e.stages[s];
        size_t row = (size_t)st->type * (f.p->n_layers + 1);
        const double *ser = f.p->pre_serial + row, *par = f.p->pre_parallel + row;
        double layers = ser[st->end] - ser[st->first] + par[st->end] - par[st->first];
        assert_true(fabs(pf.stages[s].layers_ms - layers / st->units) <= 1e-9 * layers);
        assert_true(pf.stages[s].layers_ms < pf.stages[s].ms_per_batch);
    }
    char *again = hps_json_text(back);
    assert_string_equal(text, again); /* the same bytes after a read and a write */
    /* workers: one per unit, shares summing to 1, on nodes with their type */
    double shares = 0;
    json_t *workers = json_object_get(back, "workers"), *w;
    size_t i;
    json_array_foreach(workers, i, w) shares += json_real_value(json_object_get(w, "share"));
    assert_true(fabs(shares - 1) < 1e-9);
    assert_int_equal((int)json_array_size(workers), l.n_workers);
    assert_true(l.cross_node_bytes <= l.round_robin_bytes);
    /* network: every stage's ring allreduce (2 (k - 1) P over its k units)
     * and hbm replicas' rows,
     * the cut after it, and its rows pulled from and pushed to the servers
     * (2 E; this plan has none) */
    assert_int_equal(l.n_servers, 0);
    double bytes = 0;
    for (int s = 0; s < e.n_stages; s++) {
        const plan_stage *st = &e.stages[s];
        bytes += 2.0 * (st->units - 1) * (f.p->pre_param[st->end] - f.p->pre_param[st->first]);
        /* hbm replicas: each unit's 1 / k of the rows to the k - 1 others */
        if (st->law.rows == PLAN_ROWS_HBM) bytes += (st->units - 1) * st->law.replica_bytes;
        if (s + 1 < e.n_stages) bytes += f.p->cut_bytes[st->end];
    }
    assert_true(e.stages[0].law.rows == PLAN_ROWS_HBM && e.stages[0].units > 1 && e.stages[0].law.replica_bytes > 0);
    assert_true(bytes > 0 && fabs(pf.network_bytes - bytes) <= 1e-9 * bytes);
    free(again);
    free(text);
    plan_file_free(&pf);
    json_decref(back);
    json_decref(root);
    plan_layout_free(&l);
    plan_eval_free(&e);
    plan_result_free(&r);
    plan_fixture_free(&f);
}

/* Fewer units of each gpu type than any of its stages' shards need
 * (plan_law_shard), so that tables too big for one unit are cached. */
static void too_few_for_shards(plan_problem *p)
{
    for (int t = 0; t < p->n_types; t++)
        for (int i = 0; p->is_gpu[t] && i < p->n_layers; i++)
            for (int j = i + 1; j <= p->n_layers; j++) {
                plan_law law, s;
                plan_stage_law(p, i, j, t, &law);
                if (plan_law_shard(p, &law, &s) && s.least_units <= p->max_units[t]) p->max_units[t] = s.least_units - 1;
            }
}

/* A cache stage's rows reach hps-train: the plan's cache_rows read back. */
static void test_cache_rows_round_trip(void **state)
{
    (void)state;
    plan_fixture f;
    plan_fixture_load(&f, HPS_TESTDATA "/models/demo-ctr.json", HPS_TESTDATA "/clusters/lab.json",
                      HPS_TESTDATA "/profiles/demo-ctr.json", 500000);
    for (int t = 0; t < f.p->n_types; t++)
        if (f.p->is_gpu[t]) f.p->mem_bytes[t] = 1 * PLAN_GIB; /* 1.2 GiB of tables and working set: a cache */
    too_few_for_shards(f.p);
    plan_result r;
    plan_eval e;
    plan_layout l;
    json_t *root = exact_plan_json(&f, &r, &e, &l);
    char *text = hps_json_text(root);
    plan_file pf;
    load_plan_text(text, &pf);
    int caches = 0;
    for (int s = 0; s < e.n_stages; s++) {
        const plan_law *law = &e.stages[s].law;
        assert_true(pf.stages[s].cache_rows == (long long)law->cache_rows);
        caches += law->rows == PLAN_ROWS_CACHE && pf.stages[s].cache_rows > 0;
    }
    assert_true(caches > 0);
    free(text);
    plan_file_free(&pf);
    json_decref(root);
    plan_layout_free(&l);
    plan_eval_free(&e);
    plan_result_free(&r);
    plan_fixture_free(&f);
}

#define PLAN_HEAD "{\"format\": \"hps-plan\", \"version\": 1, "

/* One reader, every index bounded (robustness 17.5, 17.8), a file of another kind refused. */
static void test_plan_file_errors(void **state)
{
    (void)state;
    hps_error err;
    static const struct {
        const char *text, *msg;
    } cases[] = {
        {"{\"format\": \"hps-cluster\", \"version\": 1}", "p.json: format is 'hps-cluster', expected 'hps-plan': a cluster given where a plan is expected"},
        {"{\"format\": \"hps-plan\", \"version\": 2}", "p.json: hps-plan version 2, this hps reads versions 1 to 1"},
        {"{\"version\": 1}", "p.json: missing field 'format': expected a plan (\"format\": \"hps-plan\")"},
        {PLAN_HEAD "\"stages\": [{\"type\": \"cpu\", \"units\": 1, \"layers\": [0, 2147483647]}]}",
         "p.json: stage 0: layers [0, 2147483647]: expected [0, last] with last < 1024"},
        {PLAN_HEAD "\"model\": {\"layers\": 3}, \"stages\": [{\"type\": \"cpu\", \"units\": 1, \"layers\": [0, 1]}]}",
         "p.json: stages end at layer 1 of 3"},
        {PLAN_HEAD "\"workers\": [{\"rank\": 0, \"stage\": 64}]}",
         "p.json: workers[0]: stage=64 must be in [0, 63]"},
        {PLAN_HEAD "\"stages\": [{\"type\": \"cpu\", \"units\": 1, \"layers\": [0, 1]}], "
                   "\"workers\": [{\"rank\": 0, \"stage\": 1}]}",
         "p.json: workers[0]: stage=1 must be in [0, 0]"},
        {PLAN_HEAD "\"servers\": {\"count\": 2, \"ranks\": [1]}}", "p.json: servers.ranks lists 1 ranks for 2 servers"},
        {PLAN_HEAD "\"stages\": [{\"type\": \"cpu\", \"units\": 1, \"layers\": [0, 1], \"servers_beside\": 1}]}",
         "p.json: stage 0: servers_beside must be true or false"},
    };
    char dir[] = "/tmp/hps-plan-read-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[64];
    snprintf(path, sizeof path, "%s/p.json", dir);
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        FILE *fp = fopen(path, "w");
        fputs(cases[k].text, fp);
        fclose(fp);
        plan_file pf;
        assert_int_equal(plan_file_load(path, &pf, &err), -1);
        assert_string_equal(err.msg + strlen(dir) + 1, cases[k].msg); /* errors name the path */
    }
    unlink(path);
    rmdir(dir);
}

/* demo-ctr's exact plan on a cluster at a limit, evaluated and laid out. */
static void exact_plan(plan_fixture *f, const char *cluster, double limit, plan_result *r, plan_eval *e,
                       plan_layout *l)
{
    plan_fixture_load(f, HPS_TESTDATA "/models/demo-ctr.json", cluster, HPS_TESTDATA "/profiles/demo-ctr.json", limit);
    solve_plan(f, 0, r, e, l);
}

/* Servers carry the embedding traffic at the predicted throughput. */
static void test_servers_are_not_the_bottleneck(void **state)
{
    (void)state;
    plan_fixture f;
    plan_result r;
    plan_eval e;
    plan_layout l;
    plan_fixture_load(&f, HPS_TESTDATA "/models/demo-ctr.json", HPS_TESTDATA "/clusters/aws.json",
                      HPS_TESTDATA "/profiles/demo-ctr.json", 1000000);
    f.p->separate_servers = 1; /* servers of their own, as few as carry it (beside, one a unit) */
    solve_plan(&f, 0, &r, &e, &l);
    assert_true(l.n_servers > 0);
    double per_server = f.c->server_gbps * 1.25e8;
    assert_true(l.server_bytes_per_s <= l.n_servers * per_server);
    /* and one fewer would not (the hottest key's share on one of them) */
    const plan_stage *st = &e.stages[0];
    assert_true(e.n_stages == 1 && st->servers == l.n_servers && st->law.server_table_bytes > 0);
    assert_true(plan_servers_throughput(f.p, &st->law, st->servers) >= e.throughput * (1 - 1e-9));
    assert_true(plan_servers_throughput(f.p, &st->law, st->servers - 1) < e.throughput);
    assert_true(l.cross_node_bytes < 0); /* no nodes: no placement */
    plan_layout_free(&l);
    plan_eval_free(&e);
    plan_result_free(&r);
    plan_fixture_free(&f);
}

/* dlrm-criteo on aws.json at 1e5 samples/s: issue 29's servers beside units
 * and per stage. */
static void dlrm_on_aws(plan_fixture *f)
{
    plan_fixture_load(f, HPS_TESTDATA "/models/dlrm-criteo.json", HPS_TESTDATA "/clusters/aws.json",
                      HPS_TESTDATA "/profiles/dlrm-criteo.json", 1e5);
}

/* Issue 29, servers where they cost nothing: dlrm-criteo at 1e5 samples/s
 * with --rows servers took one T4 ($0.526/hour) and an r5 server of its own
 * ($1.008/hour) for 0.4 GiB of tables; the T4's host (16 GiB, 4 vCPUs)
 * holds the server beside it.  The plan is the T4 alone, its server on the
 * T4's instance, the rankfile giving the worker 3 of the unit's cores and
 * the server the fourth; with separate_servers, the plan is as before. */
static void test_server_beside_its_gpu(void **state)
{
    (void)state;
    plan_fixture f;
    plan_result r;
    plan_eval e;
    plan_layout l;
    hps_error err;
    dlrm_on_aws(&f);
    f.p->rows_on_servers = 1;
    int t4 = hps_cluster_find(f.c, "gpu-t4");
    /* a node of two g4dn instances, for the placement and the rankfile */
    f.c->n_nodes = 1;
    free(f.c->nodes);
    f.c->nodes = hps_calloc(1, sizeof *f.c->nodes);
    snprintf(f.c->nodes[0].name, sizeof f.c->nodes[0].name, "g4dn");
    f.c->nodes[0].units[t4] = 2;
    f.c->nodes[0].units[f.c->server_type] = 1;
    solve_plan(&f, 0, &r, &e, &l);
    assert_int_equal(e.n_stages, 1);
    assert_int_equal(e.stages[0].type, t4);
    assert_int_equal(e.servers, 0); /* no instance of its own */
    assert_int_equal(e.coloc_servers, 1);
    assert_true(e.feasible);
    assert_true(fabs(e.cost_per_hour - 0.526) < 1e-9);
    assert_int_equal(l.n_servers, 1);
    assert_int_equal(l.servers[0].worker, 0);
    assert_int_equal(l.servers[0].instance, l.workers[0].instance);
    assert_int_equal(l.servers[0].node, l.workers[0].node);
    char path[] = "/tmp/hps-rankfile-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(plan_rankfile_write(path, f.c, &l, &err), 0);
    char *text;
    size_t len;
    assert_int_equal(hps_read_all(path, &text, &len, &err), 0);
    assert_string_equal(text, "rank 0=g4dn slot=0-2\nrank 1=g4dn slot=3\n");
    free(text);
    unlink(path);
    /* the stage runs its host work on 3 of its 4 cores: slower than apart */
    double beside_ms = e.stages[0].ms;
    plan_layout_free(&l);
    plan_eval_free(&e);
    plan_result_free(&r);
    f.p->separate_servers = 1;
    solve_plan(&f, 0, &r, &e, &l);
    assert_int_equal(e.servers, 1);
    assert_int_equal(e.coloc_servers, 0);
    assert_true(fabs(e.cost_per_hour - (0.526 + 1.008)) < 1e-9);
    assert_true(e.stages[0].ms < beside_ms);
    assert_int_equal(l.servers[0].worker, -1);
    plan_layout_free(&l);
    plan_eval_free(&e);
    plan_result_free(&r);
    plan_fixture_free(&f);
}

/* Three stages of dlrm-criteo, each with its tables: two servers of its
 * own, one, and one beside its unit.  Each server is its stage's (those of
 * their own first, stage by stage, then those beside: the order hps-train
 * routes each stage's tables in), co-location puts a stage's servers by its
 * own worker, and the cross-node bytes charge a stage's exchange with its
 * own servers alone: here none, only the cuts between the nodes. */
static void test_servers_per_stage(void **state)
{
    (void)state;
    plan_fixture f;
    plan_result r;
    plan_eval e;
    plan_layout l;
    hps_error err;
    dlrm_on_aws(&f);
    solve_plan(&f, 0, &r, &e, &l);
    plan_layout_free(&l);
    int c5 = hps_cluster_find(f.c, "cpu-c5"), sv = f.c->server_type;
    assert_true(c5 >= 0 && sv >= 0 && c5 != sv);
    free(f.c->nodes);
    f.c->n_nodes = 3;
    f.c->nodes = hps_calloc(3, sizeof *f.c->nodes);
    for (int n = 0; n < 3; n++) {
        snprintf(f.c->nodes[n].name, sizeof f.c->nodes[n].name, "n%d", n);
        f.c->nodes[n].units[c5] = 1, f.c->nodes[n].units[sv] = 2;
    }
    static const int first[] = {0, 1, 2}, end[] = {1, 2, 8}, servers[] = {2, 1, 0};
    e.n_stages = 3;
    memset(e.units, 0, sizeof e.units);
    for (int s = 0; s < 3; s++) {
        plan_stage *st = &e.stages[s];
        st->first = first[s], st->end = end[s], st->type = c5, st->units = 1;
        st->servers = servers[s], st->coloc = s == 2, st->throughput = 1000;
        st->law.server_bytes = 1e6, st->law.replica_bytes = 0;
        st->law.server_table_bytes = (s == 0 ? 4 : 0.4) * PLAN_GIB;
        e.units[c5]++;
    }
    e.servers = 3, e.coloc_servers = 1, e.throughput = 1000;
    assert_int_equal(plan_layout_make(f.p, f.c, &e, &l, &err), 0);
    assert_int_equal(l.n_servers, 4);
    static const int stage[] = {0, 0, 1, 2}, beside[] = {-1, -1, -1, 2};
    for (int v = 0; v < 4; v++) {
        assert_int_equal(l.servers[v].stage, stage[v]);
        assert_int_equal(l.servers[v].worker, beside[v]);
        assert_int_equal(l.servers[v].node, l.workers[stage[v]].node);
    }
    assert_true(l.workers[0].node != l.workers[1].node && l.workers[1].node != l.workers[2].node);
    double cuts = f.p->cut_bytes[1] + f.p->cut_bytes[2];
    assert_true(cuts > 0 && fabs(l.cross_node_bytes - cuts) <= 1e-9 * cuts);
    /* the file says each stage's count and where they live, which hps-train
     * reads back in the same order: those of their own, then those beside */
    const char *names[] = {"dlrm-criteo.json"}, *digests[] = {hps_profiles_digest(f.ps, 0)};
    plan_meta meta = {.model_path = "m.json", .cluster_path = "c.json", .model_digest = f.m->digest,
                      .cluster_digest = f.c->digest, .n_profiles = 1, .profile_names = names,
                      .profile_digests = digests, .model_name = f.m->name, .algorithm = "exact"};
    json_t *root = plan_to_json(f.p, &e, &l, &r, &meta, f.c);
    /* the fullest server: stage 0's, 1.25 x 4 GiB over its 2 (not the 4.4 GiB over all 3) */
    json_t *used = json_object_get(json_object_get(json_object_get(root, "servers"), "memory"), "used_bytes");
    assert_true(fabs((double)json_integer_value(used) - 2.5 * PLAN_GIB) < 1);
    char *text = hps_json_text(root);
    plan_file pf;
    load_plan_text(text, &pf);
    assert_int_equal(pf.n_stages, 3);
    assert_int_equal(pf.n_servers, 4);
    for (int s = 0, own = 0, beside = 0; s < 3; s++) {
        const plan_file_stage *st = &pf.stages[s];
        assert_int_equal(st->servers, servers[s] + (s == 2));
        assert_int_equal(st->servers_beside, s == 2);
        for (int i = 0; i < st->servers; i++)
            assert_int_equal(l.servers[st->servers_beside ? e.servers + beside++ : own++].stage, s);
    }
    free(text);
    plan_file_free(&pf);
    json_decref(root);
    /* and the table says so */
    size_t n;
    FILE *fp = open_memstream(&text, &n);
    plan_print_table(fp, f.p, &e, &l, &r, &meta);
    fclose(fp);
    assert_non_null(strstr(text, "servers 4, each stage's tables on its own (stage 0: hps_mix64(key) % 2, "
                                 "stage 1: hps_mix64(key) % 1, stage 2: hps_mix64(key) % 1 beside), "));
    free(text);
    plan_layout_free(&l);
    plan_eval_free(&e);
    plan_result_free(&r);
    plan_fixture_free(&f);
}

/* A plan a rounding error below the optimum (another assignment of the
 * same cost) has no gap: 0 in the file, "0.00% above" in the table, never
 * "-0.00%". */
static void test_gap_of_a_tie(void **state)
{
    (void)state;
    plan_fixture f;
    plan_result r;
    plan_eval e;
    plan_layout l;
    exact_plan(&f, HPS_TESTDATA "/clusters/lab.json", 500000, &r, &e, &l);
    r.optimal = 0; /* as rl's plan */
    plan_meta meta = {.model_path = "m.json", .cluster_path = "c.json", .model_digest = f.m->digest,
                      .cluster_digest = f.c->digest, .model_name = f.m->name, .algorithm = "rl",
                      .exact_objective = nextafter(e.objective, HUGE_VAL)};
    json_t *root = plan_to_json(f.p, &e, &l, &r, &meta, f.c);
    json_t *gap = json_object_get(json_object_get(root, "search"), "gap");
    assert_true(json_is_number(gap) && json_number_value(gap) == 0);
    char *text = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&text, &len);
    plan_print_table(mem, f.p, &e, &l, &r, &meta);
    fclose(mem);
    assert_null(strstr(text, "-0.00%"));
    assert_non_null(strstr(text, ", at the optimum (within 0.01%)"));
    free(text);
    json_decref(root);
    plan_layout_free(&l);
    plan_eval_free(&e);
    plan_result_free(&r);
    plan_fixture_free(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plan_round_trips),
        cmocka_unit_test(test_cache_rows_round_trip),
        cmocka_unit_test(test_plan_file_errors),
        cmocka_unit_test(test_servers_are_not_the_bottleneck),
        cmocka_unit_test(test_gap_of_a_tie),
        cmocka_unit_test(test_server_beside_its_gpu),
        cmocka_unit_test(test_servers_per_stage),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
