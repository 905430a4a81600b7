/* Seeded random instances for the rl policy's pre-training (hps-plan
 * --train-policy, so in the library, not libhps-test.a), the tests and the
 * benchmark (make bench-plan):
 * a CTR-like chain (embedding layers, then an MLP, then the loss) on one CPU
 * type and GPU types that differ in speed, price, NIC and scaling. */
#include <math.h>
#include <stdio.h>

#include "core/hps_rng.h"
#include "plan/hps_plan.h"

static double between(hps_rng *r, double lo, double hi) { return lo + (hi - lo) * hps_rng_uniform(r); }

static const char *const random_type_names[PLAN_MAX_TYPES] = {
    "cpu", "gpu1", "gpu2", "gpu3", "gpu4", "gpu5", "gpu6", "gpu7",
    "gpu8", "gpu9", "gpu10", "gpu11", "gpu12", "gpu13", "gpu14", "gpu15"};

static char random_layer_names[HPS_MAX_LAYERS][16];

static void random_types(plan_problem *p, hps_rng *r, int unit_limits)
{
    for (int t = 0; t < p->n_types; t++) {
        int gpu = t > 0;
        p->type_names[t] = random_type_names[t];
        p->price[t] = gpu ? between(r, 0.4, 5.0) : between(r, 0.3, 1.0);
        p->power[t] = gpu ? between(r, 100, 450) : between(r, 120, 250);
        p->nic_bpms[t] = between(r, gpu ? 10 : 5, gpu ? 100 : 25) * PLAN_GBPS_TO_BPMS;
        p->overhead_ms[t] = gpu ? between(r, 0.05, 0.3) : between(r, 0.2, 1.0);
        p->max_units[t] = unit_limits ? 1 + (int)hps_rng_below(r, 6) : 64;
    }
}

static void random_layers(plan_problem *p, hps_rng *r, double *fc_speed, double *emb_speed)
{
    int L = p->n_layers, T = p->n_types, n_emb = L >= 4 ? 1 + L / 8 : 1;
    double B = p->batch, width = 0;
    for (int l = 0; l < L; l++) {
        int emb = l < n_emb, loss = l == L - 1 && L > 1;
        snprintf(random_layer_names[l], sizeof random_layer_names[l], "%s%d", emb ? "emb" : loss ? "loss" : "fc", l);
        p->layer_names[l] = random_layer_names[l];
        p->kind[l] = emb ? HPS_LAYER_EMBEDDING : loss ? HPS_LAYER_LOSS : HPS_LAYER_FC;
        double out = emb ? 16 * between(r, 4, 32) : loss ? 1 : floor(between(r, 16, 1024));
        if (emb) {
            p->sparse_bytes[l] = B * between(r, 4, 32) * 16 * 4;
            p->flops[l] = p->sparse_bytes[l];
            p->bytes_in[l] = B * 8 * between(r, 4, 32);
            width += out;
        } else {
            p->flops[l] = 6 * B * width * out;
            p->param_bytes[l] = 4 * (width * out + out);
            p->bytes_in[l] = B * width * 4;
            width = out;
        }
        p->bytes_out[l] = B * (emb ? width : out) * 4;
        for (int t = 0; t < T; t++) {
            double rate = emb ? emb_speed[t] : fc_speed[t];
            p->t1_ms[l * T + t] = 1e3 * p->flops[l] / rate * between(r, 0.7, 1.3) + (t ? 0.02 : 0.005);
            p->par[l * T + t] = t ? between(r, 0.85, 0.99) : between(r, emb ? 0.5 : 0.8, 0.97);
        }
    }
}

plan_problem *plan_problem_random(uint64_t seed, int n_layers, int n_types, double tightness,
                                  int unit_limits)
{
    hps_rng r;
    hps_rng_seed(&r, seed);
    plan_problem *p = plan_problem_new(n_layers, n_types);
    double fc_speed[PLAN_MAX_TYPES], emb_speed[PLAN_MAX_TYPES];
    p->batch = 1024;
    p->micro_batches = PLAN_NO_BUBBLE; /* the solvers' instances: an ideal pipeline */
    for (int t = 0; t < n_types; t++) {
        fc_speed[t] = t ? between(&r, 2e12, 20e12) : between(&r, 3e10, 1.5e11);
        emb_speed[t] = t ? between(&r, 2e10, 2e11) : between(&r, 1e10, 4e10);
    }
    random_types(p, &r, unit_limits);
    random_layers(p, &r, fc_speed, emb_speed);
    plan_problem_chain_cuts(p);
    plan_problem_prepare(p);
    int *a = hps_malloc((size_t)n_layers * sizeof *a);
    p->min_throughput = 1; /* the law does not depend on it */
    p->min_throughput = tightness * plan_max_throughput(p, a);
    free(a);
    return p;
}
