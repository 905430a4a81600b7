/* The rl scheduler, as in HeterPS: a recurrent policy reads the layers in
 * order and emits one resource type per layer; REINFORCE with a moving-average
 * baseline and Adam trains it on the objective of the plans it samples.
 *
 * The policy is a GRU (PyTorch's gate layout r, z, n) over the layer chain.
 * Its input at layer l is the layer's features (kind, FLOPs, bytes, profiled
 * time and unit cost on each type) and the type chosen for layer l - 1, so it
 * can learn to keep a stage going or to cut it.  A batch of episodes runs side
 * by side as the rows of one matrix, so every step is a few cblas_sgemm calls.
 *
 * Everything is seeded from --seed and runs on one BLAS thread: the same seed
 * gives the same plan (unless --time-limit cuts a run short).  The best plan
 * sampled is kept; at the end the best few, and the fastest plan, are
 * polished by plan_descend (the local search alternating with the DP moves
 * of plan_polish.c) and the best of those by an iterated local search
 * (hps-plan(1) says so, and the plan's search section says polished). */
#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/hps_rng.h"
#include "plan/hps_plan.h"

#define RL_HIDDEN 32
#define RL_BATCH 16
#define RL_LR 0.02f
#define RL_ENTROPY 0.01f
#define RL_BASELINE_DECAY 0.9
#define RL_POLISH 16
#define RL_KICKS 200 /* rounds of the iterated local search on the best plan */
#define RL_STATIC 11 /* kind one-hot (5), five log sizes, position */

typedef struct {
    int L, T, D, H, N;
    /* parameters, gradients and Adam's moments share one layout */
    size_t n_params;
    float *params, *grads, *m, *v;
    float *wx, *wh, *bx, *bh, *wo, *bo, *stick; /* views into params */
    float *gwx, *gwh, *gbx, *gbh, *gwo, *gbo, *gstick;
    long adam_t;
    /* per layer features, [L x (D - T - 1)] */
    float *feat;
    /* activations of one batch, per step */
    float *x, *gx, *gh, *h, *r, *z, *n, *probs; /* [L][N][...] */
    int *actions;                               /* [N][L] */
} rl_policy;

static void policy_layout(rl_policy *P)
{
    int D = P->D, H = P->H, T = P->T;
    size_t sizes[7] = {(size_t)D * 3 * H, (size_t)H * 3 * H, 3 * (size_t)H, 3 * (size_t)H,
                       (size_t)H * T, (size_t)T, 1};
    P->n_params = 0;
    for (int i = 0; i < 7; i++) P->n_params += sizes[i];
    P->params = hps_calloc(P->n_params, sizeof(float));
    P->grads = hps_calloc(P->n_params, sizeof(float));
    P->m = hps_calloc(P->n_params, sizeof(float));
    P->v = hps_calloc(P->n_params, sizeof(float));
    float **views[7] = {&P->wx, &P->wh, &P->bx, &P->bh, &P->wo, &P->bo, &P->stick};
    float **gviews[7] = {&P->gwx, &P->gwh, &P->gbx, &P->gbh, &P->gwo, &P->gbo, &P->gstick};
    size_t off = 0;
    for (int i = 0; i < 7; i++) {
        *views[i] = P->params + off;
        *gviews[i] = P->grads + off;
        off += sizes[i];
    }
}

static void init_weights(float *w, int fan_in, size_t n, hps_rng *rng)
{
    float s = 1.0f / sqrtf((float)fan_in);
    for (size_t i = 0; i < n; i++) w[i] = hps_rng_range(rng, -s, s);
}

static float lg(double x) { return (float)(log1p(x > 0 ? x : 0) / 25.0); }

/* Per-layer features: what the layer is and how each type would serve it. */
static void layer_features(rl_policy *P, const plan_problem *p)
{
    int F = P->D - P->T - 1;
    for (int l = 0; l < P->L; l++) {
        float *f = P->feat + (size_t)l * F;
        if (p->kind[l] >= 0 && p->kind[l] < 5) f[p->kind[l]] = 1;
        f[5] = lg(p->flops[l]);
        f[6] = lg(p->bytes_in[l]);
        f[7] = lg(p->bytes_out[l]);
        f[8] = lg(p->param_bytes[l]);
        f[9] = lg(p->sparse_bytes[l]);
        f[10] = P->L > 1 ? (float)l / (P->L - 1) : 0;
        double tmin = HUGE_VAL, cmin = HUGE_VAL;
        for (int t = 0; t < P->T; t++) {
            double t1 = p->t1_ms[l * P->T + t] + 1e-9;
            tmin = fmin(tmin, t1);
            cmin = fmin(cmin, t1 * p->price[t]);
        }
        for (int t = 0; t < P->T; t++) {
            double t1 = p->t1_ms[l * P->T + t] + 1e-9;
            f[RL_STATIC + t] = (float)(log(t1 / tmin) / 5);
            f[RL_STATIC + P->T + t] = (float)(log(t1 * p->price[t] / cmin) / 5);
        }
    }
}

static void policy_init(rl_policy *P, const plan_problem *p, hps_rng *rng)
{
    memset(P, 0, sizeof *P);
    P->L = p->n_layers;
    P->T = p->n_types;
    P->H = RL_HIDDEN;
    P->N = RL_BATCH;
    P->D = RL_STATIC + 2 * P->T + P->T + 1;
    policy_layout(P);
    init_weights(P->wx, P->D, (size_t)P->D * 3 * P->H, rng);
    init_weights(P->wh, P->H, (size_t)P->H * 3 * P->H, rng);
    init_weights(P->wo, P->H, (size_t)P->H * P->T, rng);
    /* Stages are runs, so the policy starts out keeping the previous layer's
     * type with odds that make runs of about a third of the chain. */
    P->stick[0] = 1.0f + logf((float)P->L);
    size_t LN = (size_t)P->L * P->N;
    P->feat = hps_calloc((size_t)P->L * (P->D - P->T - 1), sizeof(float));
    P->x = hps_calloc(LN * P->D, sizeof(float));
    P->gx = hps_calloc(LN * 3 * P->H, sizeof(float));
    P->gh = hps_calloc(LN * 3 * P->H, sizeof(float));
    P->h = hps_calloc(LN * P->H, sizeof(float));
    P->r = hps_calloc(LN * P->H, sizeof(float));
    P->z = hps_calloc(LN * P->H, sizeof(float));
    P->n = hps_calloc(LN * P->H, sizeof(float));
    P->probs = hps_calloc(LN * P->T, sizeof(float));
    P->actions = hps_calloc(LN, sizeof(int));
    layer_features(P, p);
}

static void policy_free(rl_policy *P)
{
    float *bufs[] = {P->params, P->grads, P->m, P->v, P->feat, P->x, P->gx,
                     P->gh,     P->h,     P->r, P->z, P->n,    P->probs};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) free(bufs[i]);
    free(P->actions);
}

static float sigmoidf(float x) { return 1.0f / (1.0f + expf(-x)); }

/* Samples a batch of N plans (greedy: the most likely type at every step). */
static void policy_sample(rl_policy *P, hps_rng *rng, int greedy)
{
    int N = P->N, H = P->H, T = P->T, D = P->D, F = D - T - 1;
    for (int l = 0; l < P->L; l++) {
        float *x = P->x + (size_t)l * N * D, *gx = P->gx + (size_t)l * N * 3 * H;
        float *gh = P->gh + (size_t)l * N * 3 * H, *h = P->h + (size_t)l * N * H;
        float *hp = l ? P->h + (size_t)(l - 1) * N * H : NULL;
        float *r = P->r + (size_t)l * N * H, *z = P->z + (size_t)l * N * H, *nn = P->n + (size_t)l * N * H;
        float *probs = P->probs + (size_t)l * N * T;
        for (int b = 0; b < N; b++) {
            float *xb = x + (size_t)b * D;
            memcpy(xb, P->feat + (size_t)l * F, F * sizeof(float));
            memset(xb + F, 0, (T + 1) * sizeof(float));
            if (l) xb[F + P->actions[b * P->L + l - 1]] = 1;
            else xb[F + T] = 1;
        }
        for (int b = 0; b < N; b++) {
            memcpy(gx + (size_t)b * 3 * H, P->bx, 3 * H * sizeof(float));
            memcpy(gh + (size_t)b * 3 * H, P->bh, 3 * H * sizeof(float));
        }
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, 3 * H, D, 1, x, D, P->wx, 3 * H, 1, gx, 3 * H);
        if (hp) cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, 3 * H, H, 1, hp, H, P->wh, 3 * H, 1, gh, 3 * H);
        for (int b = 0; b < N; b++)
            for (int j = 0; j < H; j++) {
                size_t g = (size_t)b * 3 * H, k = (size_t)b * H + j;
                r[k] = sigmoidf(gx[g + j] + gh[g + j]);
                z[k] = sigmoidf(gx[g + H + j] + gh[g + H + j]);
                nn[k] = tanhf(gx[g + 2 * H + j] + r[k] * gh[g + 2 * H + j]);
                h[k] = (1 - z[k]) * nn[k] + z[k] * (hp ? hp[k] : 0);
            }
        for (int b = 0; b < N; b++) memcpy(probs + (size_t)b * T, P->bo, T * sizeof(float));
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, T, H, 1, h, H, P->wo, T, 1, probs, T);
        for (int b = 0; l && b < N; b++) probs[(size_t)b * T + P->actions[b * P->L + l - 1]] += P->stick[0];
        for (int b = 0; b < N; b++) {
            float *pb = probs + (size_t)b * T, mx = pb[0], sum = 0;
            for (int t = 1; t < T; t++) mx = fmaxf(mx, pb[t]);
            for (int t = 0; t < T; t++) sum += pb[t] = expf(pb[t] - mx);
            int a = greedy ? 0 : T - 1;
            if (greedy) {
                for (int t = 1; t < T; t++)
                    if (pb[t] > pb[a]) a = t;
            } else {
                double u = hps_rng_uniform(rng) * sum, acc = 0;
                for (int t = 0; t < T; t++)
                    if (u < (acc += pb[t])) {
                        a = t;
                        break;
                    }
            }
            for (int t = 0; t < T; t++) pb[t] /= sum;
            P->actions[b * P->L + l] = a;
        }
    }
}

/* Gradient of -mean(adv * log pi(actions)) - entropy bonus, by BPTT. */
static void policy_backward(rl_policy *P, const float *adv)
{
    int N = P->N, H = P->H, T = P->T, D = P->D;
    float *dlog = hps_malloc((size_t)N * T * sizeof(float));
    float *dh = hps_calloc((size_t)N * H, sizeof(float));
    float *dgx = hps_malloc((size_t)N * 3 * H * sizeof(float));
    float *dgh = hps_malloc((size_t)N * 3 * H * sizeof(float));
    memset(P->grads, 0, P->n_params * sizeof(float));
    for (int l = P->L - 1; l >= 0; l--) {
        float *x = P->x + (size_t)l * N * D, *gh = P->gh + (size_t)l * N * 3 * H;
        float *h = P->h + (size_t)l * N * H, *hp = l ? P->h + (size_t)(l - 1) * N * H : NULL;
        float *r = P->r + (size_t)l * N * H, *z = P->z + (size_t)l * N * H, *nn = P->n + (size_t)l * N * H;
        float *probs = P->probs + (size_t)l * N * T;
        for (int b = 0; b < N; b++) {
            float *pb = probs + (size_t)b * T, ent = 0;
            for (int t = 0; t < T; t++) ent -= pb[t] * logf(pb[t] + 1e-12f);
            for (int t = 0; t < T; t++) {
                float onehot = t == P->actions[b * P->L + l];
                dlog[b * T + t] = (adv[b] * (pb[t] - onehot) +
                                   RL_ENTROPY * pb[t] * (logf(pb[t] + 1e-12f) + ent)) / N;
            }
        }
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, H, T, N, 1, h, H, dlog, T, 1, P->gwo, T);
        for (int b = 0; b < N; b++)
            for (int t = 0; t < T; t++) P->gbo[t] += dlog[b * T + t];
        for (int b = 0; l && b < N; b++) P->gstick[0] += dlog[b * T + P->actions[b * P->L + l - 1]];
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, H, T, 1, dlog, T, P->wo, T, 1, dh, H);
        for (int b = 0; b < N; b++)
            for (int j = 0; j < H; j++) {
                size_t k = (size_t)b * H + j, g = (size_t)b * 3 * H;
                float hprev = hp ? hp[k] : 0;
                float dn = dh[k] * (1 - z[k]) * (1 - nn[k] * nn[k]);
                float dz = dh[k] * (hprev - nn[k]) * z[k] * (1 - z[k]);
                float dr = dn * gh[g + 2 * H + j] * r[k] * (1 - r[k]);
                dgx[g + j] = dgh[g + j] = dr;
                dgx[g + H + j] = dgh[g + H + j] = dz;
                dgx[g + 2 * H + j] = dn;
                dgh[g + 2 * H + j] = dn * r[k];
                dh[k] *= z[k]; /* the direct path to h_{l-1} */
            }
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, D, 3 * H, N, 1, x, D, dgx, 3 * H, 1, P->gwx, 3 * H);
        for (int b = 0; b < N; b++)
            for (int j = 0; j < 3 * H; j++) {
                P->gbx[j] += dgx[(size_t)b * 3 * H + j];
                P->gbh[j] += dgh[(size_t)b * 3 * H + j];
            }
        if (hp) {
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, H, 3 * H, N, 1, hp, H, dgh, 3 * H, 1, P->gwh, 3 * H);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, H, 3 * H, 1, dgh, 3 * H, P->wh, 3 * H, 1, dh, H);
        }
    }
    free(dlog);
    free(dh);
    free(dgx);
    free(dgh);
}

static void adam_step(rl_policy *P)
{
    double norm = 0;
    for (size_t i = 0; i < P->n_params; i++) norm += (double)P->grads[i] * P->grads[i];
    float clip = norm > 25.0 ? (float)(5.0 / sqrt(norm)) : 1.0f; /* global norm <= 5 */
    P->adam_t++;
    float c1 = 1 - powf(0.9f, (float)P->adam_t), c2 = 1 - powf(0.999f, (float)P->adam_t);
    for (size_t i = 0; i < P->n_params; i++) {
        float g = P->grads[i] * clip;
        P->m[i] = 0.9f * P->m[i] + 0.1f * g;
        P->v[i] = 0.999f * P->v[i] + 0.001f * g * g;
        P->params[i] -= RL_LR * (P->m[i] / c1) / (sqrtf(P->v[i] / c2) + 1e-8f);
    }
}

/* Normalises objectives by the best single-type plan, so that rewards are
 * near -1 whatever the units of the objective. */
static double reward_scale(const plan_problem *p, plan_eval *e, int *assign)
{
    double ref = HUGE_VAL;
    for (int t = 0; t < p->n_types; t++) {
        for (int l = 0; l < p->n_layers; l++) assign[l] = t;
        plan_evaluate(p, assign, e);
        if (e->feasible) ref = fmin(ref, e->objective);
    }
    if (ref == HUGE_VAL) {
        plan_max_throughput(p, assign);
        plan_evaluate(p, assign, e);
        if (e->feasible) ref = e->objective;
    }
    return ref < HUGE_VAL && ref > 0 ? ref : 1;
}

static double reward_of(const plan_eval *e, double ref)
{
    return e->feasible ? -e->objective / ref : -fmin(2 + e->violation, 10);
}

/* The RL_POLISH best distinct plans sampled, best first. */
typedef struct {
    int n;
    double score[RL_POLISH];
    int *assign[RL_POLISH];
} elite;

static void elite_offer(elite *el, const int *a, int L, double score)
{
    for (int i = 0; i < el->n; i++)
        if (memcmp(el->assign[i], a, (size_t)L * sizeof *a) == 0) return;
    int i;
    if (el->n < RL_POLISH) i = el->n++;
    else if (score < el->score[RL_POLISH - 1]) i = RL_POLISH - 1;
    else return;
    for (; i > 0 && el->score[i - 1] > score; i--) {
        el->score[i] = el->score[i - 1];
        memcpy(el->assign[i], el->assign[i - 1], (size_t)L * sizeof *a);
    }
    el->score[i] = score;
    memcpy(el->assign[i], a, (size_t)L * sizeof *a);
}

static void progress(const plan_search_opts *o, long ep, long total, double best)
{
    if (!o->progress) return;
    fprintf(stderr, "\rrl: episode %ld/%ld  best %.6g   ", ep, total, best);
    if (ep >= total) fputc('\n', stderr);
}

int plan_solve_rl(const plan_problem *p, const plan_search_opts *o, plan_result *r)
{
    int L = p->n_layers;
    /* training takes at most 70% of the time limit, the polish the rest but
     * 1%, left for the wrap-up so that the whole run keeps within the limit */
    double t0 = hps_now(), limit = o->time_limit > 0 ? o->time_limit : 1e9;
    double deadline = t0 + 0.7 * limit, polish_deadline = t0 + 0.99 * limit;
    long total = o->episodes > 0 ? o->episodes : 2048;
    hps_rng rng;
    hps_rng_seed(&rng, o->seed);
    openblas_set_num_threads(1);
    rl_policy P;
    policy_init(&P, p, &rng);
    plan_eval e;
    plan_eval_init(&e, p);
    elite el = {0};
    for (int i = 0; i < RL_POLISH; i++) el.assign[i] = hps_malloc((size_t)L * sizeof(int));
    double ref = reward_scale(p, &e, r->assign), baseline = 0, best = HUGE_VAL;
    float adv[RL_BATCH];
    long ep = 0;
    int updates = 0;
    while (ep < total && (ep == 0 || hps_now() < deadline)) {
        policy_sample(&P, &rng, 0);
        double mean = 0, rewards[RL_BATCH];
        for (int b = 0; b < P.N; b++) {
            const int *a = P.actions + (size_t)b * L;
            plan_evaluate(p, a, &e);
            rewards[b] = reward_of(&e, ref);
            mean += rewards[b] / P.N;
            elite_offer(&el, a, L, plan_score(&e));
            if (plan_score(&e) < best) {
                best = plan_score(&e);
                if (e.feasible) plan_trace_add(r, (double)(ep + b + 1), e.objective);
            }
        }
        baseline = updates ? RL_BASELINE_DECAY * baseline + (1 - RL_BASELINE_DECAY) * mean : mean;
        for (int b = 0; b < P.N; b++) adv[b] = (float)(rewards[b] - baseline);
        if (updates == 0) r->mean_first = mean;
        r->mean_last = mean;
        policy_backward(&P, adv);
        adam_step(&P);
        ep += P.N;
        updates++;
        progress(o, ep < total ? ep : total, total, best < 1e30 ? best : NAN);
    }
    /* The policy's most likely plan is a candidate too, and for the polish
     * the fastest plan (the one the reward scale falls back on). */
    policy_sample(&P, &rng, 1);
    plan_evaluate(p, P.actions, &e);
    elite_offer(&el, P.actions, L, plan_score(&e));
    double best_polished = HUGE_VAL;
    int *fast = hps_malloc((size_t)L * sizeof *fast);
    plan_max_throughput(p, fast);
    for (int i = 0; i <= el.n; i++) {
        int *a = i < el.n ? el.assign[i] : fast;
        if (i == el.n && !o->polish) break;
        if (o->polish) plan_descend(p, a, polish_deadline);
        plan_evaluate(p, a, &e);
        if (plan_score(&e) < best_polished) {
            best_polished = plan_score(&e);
            memcpy(r->assign, a, (size_t)L * sizeof(int));
        }
    }
    free(fast);
    if (o->polish) plan_iterated_search(p, r->assign, o->seed, RL_KICKS, polish_deadline);
    plan_evaluate(p, r->assign, &e);
    best_polished = plan_score(&e);
    if (best_polished < best && best_polished < 1e30) plan_trace_add(r, (double)ep, best_polished);
    r->found = 1;
    r->episodes = ep;
    r->seconds = hps_now() - t0;
    for (int i = 0; i < RL_POLISH; i++) free(el.assign[i]);
    plan_eval_free(&e);
    policy_free(&P);
    return 0;
}
