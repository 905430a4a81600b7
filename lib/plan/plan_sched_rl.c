/* The rl scheduler: a policy over stages, its training (PPO), and the
 * polish from its best samples; hps-plan(1), rl, describes the algorithm.
 * The policy acts on stages, not layers: HeterPS's per-layer policy,
 * measured, learned nothing in 2048 episodes (a chain of 128 choices is a
 * needle in a haystack of T^128 plans).  Every step is counted in
 * cost-model evaluations, not seconds, and runs on one thread, so that a
 * seed gives one plan on any machine.  The instance and the relaxation the
 * features look ahead by are plan_rl_relax.c; the policy file
 * plan_policy_file.c. */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/hps_io.h"
#include "core/hps_json.h"
#include "core/hps_rng.h"
#include "plan/hps_plan.h"
#include "plan/plan_internal.h"
#include "plan/plan_rl.h"

#define RL_BATCH 16
#define RL_EPOCHS 2
#define RL_CLIP 0.2f
#define RL_LR 0.01f
/* Exploration: a sample follows the softmax with probability 1 - eps and
 * is uniform over the unmasked actions otherwise (the policy is that
 * mixture, in the updates too), eps falling linearly from RL_EPS0 to RL_EPS1
 * over a run, and the softmax's entropy earns a bonus that decays linearly
 * to a tenth.  A policy pre-trained without them collapsed onto one plan per
 * instance and sampled worse than random search; with eps at a quarter to
 * the end, a plan of 60 stages almost never followed the policy's choice at
 * every step. */
#define RL_EPS0 0.25f
#define RL_EPS1 0.02f
#define RL_ENTROPY0 0.2f
#define RL_GREEDY_EVERY 16 /* updates between two evaluations of the policy's likeliest plan */
#define RL_ELITE 4        /* best sampled plans the polish starts from */
#define RL_LIMITS_STARTS 2 /* of them, those planned afresh with the unit limits (plan_dp_limits) */
#define RL_PRUNE 70       /* relaxed cost in percent above the state's best past which a stage is left out */


static float *w1(float *w) { return w; }
static float *b1(float *w) { return w + RL_H * RL_F; }
static float *w2(float *w) { return w + RL_H * RL_F + RL_H; }
static float *v(float *w) { return w + RL_H * RL_F + 2 * RL_H; }

static double reward_of(const rl_instance *in, const plan_eval *e)
{
    if (e->feasible) return -log(e->objective / in->ref_objective);
    return -2 - log1p(e->violation);
}

/* ---- actions and their features ------------------------------------------- */

typedef struct {
    int type, end;
    float f[RL_F];
} rl_action;

static float clampf(double x, double lo, double hi) { return (float)(x < lo ? lo : x > hi ? hi : x); }

/* The actions of state (i, prev, used) into out (room for T (L - i));
 * returns how many.  Masked out, as long as anything is left: stages that
 * cannot meet the limit, that take a type past its units, or whose link in
 * is too slow (mask 0); then types a layer does not fit and the previous
 * type (mask 1).  Mask 2 keeps the chain going whatever it costs. */
static int actions_of(const rl_instance *in, int i, int prev, const int *used, const rl_prefix *pre, rl_action *out)
{
    const plan_problem *p = in->p;
    int L = in->L, T = in->T, n = 0;
    int level = 0;
    for (int mask = 0; mask < 3 && n == 0; mask++) {
        level = mask;
        for (int t = 0; t < T; t++) {
            if (t == prev && mask < 2) continue;
            double lm = prev >= 0 ? plan_link_ms(p, i, prev, t) : 0;
            int slow_link = lm > 0 && 1000.0 * p->batch / lm < p->min_throughput;
            if (slow_link && mask == 0) continue;
            for (int e = i + 1; e <= L; e++) {
                if (mask < 2 && in->misfit[t * (L + 1) + e] > in->misfit[t * (L + 1) + i]) break;
                int k;
                double thr, rate = plan_rl_stage_rate(in, i, e, t, &k, &thr);
                int kk = k ? k : p->max_units[t];
                if (mask == 0 && (!k || used[t] + k > p->max_units[t])) continue;
                /* the rest of the chain as one stage on another type, within
                 * the units left if it can be (wide: else) */
                double rest = e < L ? HUGE_VAL : 0, wide = rest;
                for (int u = 0; e < L && u < T; u++) {
                    if (u == t) continue;
                    double r = in->rest[e * T + u];
                    wide = fmin(wide, r);
                    if (used[u] + in->rest_units[e * T + u] <= p->max_units[u]) rest = fmin(rest, r);
                }
                double share = rate / in->ref_rate;
                double whole = share + (rest < HUGE_VAL ? rest : wide) / in->ref_rate;
                rl_action *a = &out[n++];
                float *f = a->f;
                a->type = t;
                a->end = e;
                f[0] = 0; /* on the relaxation's best plan: set below */
                f[1] = k > 0;
                f[2] = clampf(share, 0, 4);
                f[3] = clampf(log(share * L / (e - i)) / 3, -3, 3);
                f[4] = (float)(e - i) / L;
                f[5] = e == L;
                f[6] = clampf(log(thr / p->min_throughput), -2, 2);
                f[7] = lm > 0 ? (slow_link ? -1 : 1) : 0;
                f[8] = used[t] + kk > p->max_units[t];
                f[9] = clampf((double)(used[t] + kk) / p->max_units[t], 0, 2);
                f[10] = (float)i / L;
                f[11] = clampf(log(in->w[t] / in->wmin) / 3, 0, 3);
                f[12] = clampf(whole, 0, 8);
                f[13] = rest < HUGE_VAL;
                f[14] = clampf(log(share * L / (e - i)), -10, 10); /* made relative below */
                /* the relaxed optimum's cost of the plan through this stage */
                double go = k ? plan_rl_togo_objective(in, i, e, t, pre) : HUGE_VAL;
                f[15] = clampf(go < HUGE_VAL ? log(go / in->ref_objective) : log(whole) + 5, -10, 10);
            }
        }
    }
    /* per-layer and whole-plan cost against the state's best */
    float best14 = 10, best15 = 10;
    for (int c = 0; c < n; c++)
        if (out[c].f[1] > 0) {
            best14 = fminf(best14, out[c].f[14]);
            best15 = fminf(best15, out[c].f[15]);
        }
    int kept = 0;
    for (int c = 0; c < n; c++) {
        out[c].f[14] = fminf(out[c].f[14] - best14, 4);
        /* in percent: the relaxation tells plans apart by a percent or
         * less, and the weights learnt on log ratios left its choice soft */
        out[c].f[15] = fminf(100 * (out[c].f[15] - best15), 100);
        /* the relaxation's best action (a plan of 60 stages followed it to
         * the optimum where the scorer's soft preference strayed) */
        out[c].f[0] = out[c].f[15] <= 0.01f;
        /* among the stages that can be had (mask 0), those whose plan
         * through them is RL_PRUNE percent above the best's by the relaxation are
         * left out: scoring them is most of a sample's time, and neither
         * the policy nor its exploration gains by them */
        if (level > 0 || out[c].f[15] <= RL_PRUNE) out[kept++] = out[c];
    }
    return kept;
}

/* tanh by one expf: libm's tanhf was 40% of a sample's time. */
static float fast_tanh(float z)
{
    float t = expf(-2 * fabsf(z)), y = (1 - t) / (1 + t);
    return z < 0 ? -y : y;
}

/* Scores of n actions, v.f + w2.tanh(w1 f + b1): the linear part learns
 * from any start (even all zero, where the hidden layer has no gradient).
 * h gets the hidden layer when not NULL ([n][RL_H]). */
static void score(const float *w, const rl_action *a, int n, float *s, float *h)
{
    float hb[RL_H];
    const float *lin = w + RL_H * RL_F + 2 * RL_H;
    for (int c = 0; c < n; c++) {
        float *hc = h ? h + (size_t)c * RL_H : hb, acc = 0;
        for (int k = 0; k < RL_F; k++) acc += lin[k] * a[c].f[k];
        for (int j = 0; j < RL_H; j++) {
            float z = w[RL_H * RL_F + j];
            for (int k = 0; k < RL_F; k++) z += w[j * RL_F + k] * a[c].f[k];
            hc[j] = fast_tanh(z);
            acc += w[RL_H * RL_F + RL_H + j] * hc[j];
        }
        s[c] = acc;
    }
}

/* Softmax of s in place; returns the entropy. */
static float softmax(float *s, int n)
{
    float mx = s[0], sum = 0, ent = 0;
    for (int c = 1; c < n; c++) mx = fmaxf(mx, s[c]);
    for (int c = 0; c < n; c++) sum += s[c] = expf(s[c] - mx);
    for (int c = 0; c < n; c++) {
        s[c] /= sum;
        if (s[c] > 0) ent -= s[c] * logf(s[c]);
    }
    return ent;
}

/* ---- episodes -------------------------------------------------------------- */

/* The steps of a batch of episodes, kept for the updates: each step's
 * actions, the one taken and its probability when sampled. */
typedef struct {
    rl_action *act;
    size_t n_act, cap_act;
    int *first, *taken, *episode; /* per step: its actions start at first */
    float *logp;
    int n_steps, cap_steps;
    float *s, *h; /* scratch for one step's scores and hidden layers */
    int cap_scratch;
} rl_steps;

static void steps_reserve(rl_steps *st, int L, int T)
{
    size_t need = st->n_act + (size_t)L * T;
    if (need > st->cap_act) {
        st->cap_act = need * 2;
        st->act = hps_realloc(st->act, st->cap_act * sizeof *st->act);
    }
    if (st->n_steps + 1 >= st->cap_steps) {
        st->cap_steps = st->cap_steps ? 2 * st->cap_steps : 256;
        st->first = hps_realloc(st->first, (size_t)(st->cap_steps + 1) * sizeof *st->first);
        st->taken = hps_realloc(st->taken, (size_t)st->cap_steps * sizeof *st->taken);
        st->episode = hps_realloc(st->episode, (size_t)st->cap_steps * sizeof *st->episode);
        st->logp = hps_realloc(st->logp, (size_t)st->cap_steps * sizeof *st->logp);
    }
    if (L * T > st->cap_scratch) {
        st->cap_scratch = L * T;
        st->s = hps_realloc(st->s, (size_t)L * T * sizeof *st->s);
        st->h = hps_realloc(st->h, (size_t)L * T * RL_H * sizeof *st->h);
    }
}

static void steps_free(rl_steps *st)
{
    free(st->act);
    free(st->first);
    free(st->taken);
    free(st->episode);
    free(st->logp);
    free(st->s);
    free(st->h);
}

/* One plan from the policy into assign (greedy: the likeliest action at
 * every step); its steps are appended to st when st is not NULL. */
static void episode(const rl_instance *in, const float *w, float eps, hps_rng *rng, int greedy, int *assign,
                    rl_steps *st, int id, rl_action *scratch, float *s)
{
    int used[PLAN_MAX_TYPES] = {0}, prev = -1;
    rl_prefix pre; /* at each floor of the cost to go */
    plan_rl_prefix_init(&pre);
    for (int i = 0; i < in->L;) {
        rl_action *a = scratch;
        if (st) {
            steps_reserve(st, in->L, in->T);
            a = st->act + st->n_act;
            s = st->s;
        }
        int n = actions_of(in, i, prev, used, &pre, a);
        score(w, a, n, s, NULL);
        softmax(s, n);
        for (int k = 0; k < n; k++) s[k] = (1 - eps) * s[k] + eps / n;
        int c = 0;
        if (greedy) {
            for (int k = 1; k < n; k++)
                if (s[k] > s[c]) c = k;
        } else {
            double u = hps_rng_uniform(rng), acc = 0;
            for (c = 0; c < n - 1; c++)
                if (u < (acc += s[c])) break;
        }
        if (st) {
            st->first[st->n_steps] = (int)st->n_act;
            st->taken[st->n_steps] = c;
            st->episode[st->n_steps] = id;
            st->logp[st->n_steps] = logf(s[c] + 1e-30f);
            st->n_steps++;
            st->n_act += (size_t)n;
            st->first[st->n_steps] = (int)st->n_act;
        }
        int t = a[c].type, e = a[c].end, k;
        double thr;
        plan_rl_stage_rate(in, i, e, t, &k, &thr);
        used[t] += k ? k : in->p->max_units[t];
        plan_rl_prefix_add(in, &pre, i, e, t);
        for (int l = i; l < e; l++) assign[l] = t;
        prev = t;
        i = e;
    }
}

/* ---- learning -------------------------------------------------------------- */

typedef struct {
    float m[RL_NP], v[RL_NP];
    long t;
} rl_adam;

static void adam_step(float *w, const float *g, rl_adam *ad)
{
    double norm = 0;
    for (int i = 0; i < RL_NP; i++) norm += (double)g[i] * g[i];
    float clip = norm > 1.0 ? (float)(1.0 / sqrt(norm)) : 1.0f; /* global norm <= 1 */
    ad->t++;
    float c1 = 1 - powf(0.9f, (float)ad->t), c2 = 1 - powf(0.999f, (float)ad->t);
    for (int i = 0; i < RL_NP; i++) {
        float gi = g[i] * clip;
        ad->m[i] = 0.9f * ad->m[i] + 0.1f * gi;
        ad->v[i] = 0.999f * ad->v[i] + 0.001f * gi * gi;
        w[i] -= RL_LR * (ad->m[i] / c1) / (sqrtf(ad->v[i] / c2) + 1e-8f);
    }
}

/* PPO: RL_EPOCHS passes over the batch, each one Adam step on the clipped
 * surrogate -min(ratio adv, clip(ratio) adv) minus the entropy bonus. */
static void update(float *w, rl_adam *ad, rl_steps *st, const float *adv, int n_episodes, float entropy, float eps)
{
    float g[RL_NP];
    for (int epoch = 0; epoch < RL_EPOCHS; epoch++) {
        memset(g, 0, sizeof g);
        for (int k = 0; k < st->n_steps; k++) {
            const rl_action *a = st->act + st->first[k];
            int n = st->first[k + 1] - st->first[k], c = st->taken[k];
            float A = adv[st->episode[k]], *s = st->s, *h = st->h;
            score(w, a, n, s, h);
            float ent = softmax(s, n), mixed = (1 - eps) * s[c] + eps / n;
            float ratio = expf(logf(mixed + 1e-30f) - st->logp[k]);
            /* outside the clip range on the side the advantage pushes, the
             * surrogate is flat: only the entropy term remains */
            int flat = (A > 0 && ratio > 1 + RL_CLIP) || (A < 0 && ratio < 1 - RL_CLIP);
            /* d log mixed / d s[q] = (1 - eps) s[c] (1[q = c] - s[q]) / mixed */
            float dlogp = flat ? 0 : -A * ratio / n_episodes * (1 - eps) * s[c] / mixed;
            for (int q = 0; q < n; q++) {
                float ds = dlogp * ((q == c) - s[q]);
                if (s[q] > 0) ds += entropy * s[q] * (logf(s[q]) + ent) / n_episodes;
                if (ds == 0) continue;
                const float *hq = h + (size_t)q * RL_H;
                for (int f = 0; f < RL_F; f++) v(g)[f] += ds * a[q].f[f];
                for (int j = 0; j < RL_H; j++) {
                    w2(g)[j] += ds * hq[j];
                    float dz = ds * w2(w)[j] * (1 - hq[j] * hq[j]);
                    b1(g)[j] += dz;
                    for (int f = 0; f < RL_F; f++) w1(g)[j * RL_F + f] += dz * a[q].f[f];
                }
            }
        }
        adam_step(w, g, ad);
    }
}

/* The best distinct plans sampled, best first. */
typedef struct {
    int n;
    double score[RL_ELITE];
    int *assign[RL_ELITE];
} elite;

static void elite_offer(elite *el, const int *a, int L, double s)
{
    for (int i = 0; i < el->n; i++)
        if (memcmp(el->assign[i], a, (size_t)L * sizeof *a) == 0) return;
    int i;
    if (el->n < RL_ELITE) i = el->n++;
    else if (s < el->score[RL_ELITE - 1]) i = RL_ELITE - 1;
    else return;
    for (; i > 0 && el->score[i - 1] > s; i--) {
        el->score[i] = el->score[i - 1];
        memcpy(el->assign[i], el->assign[i - 1], (size_t)L * sizeof *a);
    }
    el->score[i] = s;
    memcpy(el->assign[i], a, (size_t)L * sizeof *a);
}

/* What one run of the policy on an instance keeps. */
typedef struct {
    elite el;
    double best; /* plan_score of the best plan sampled */
    double mean_first, mean_last;
} rl_run;

static void progress(int on, const char *what, long ep, long total, double best)
{
    if (!on) return;
    fprintf(stderr, "\rrl: %s %ld/%ld  best %.6g   ", what, ep, total, best);
    if (ep >= total) fputc('\n', stderr);
}

/* The policy's likeliest plan. */
static void greedy_plan(const rl_instance *in, const float *w, int *assign)
{
    rl_action *a = hps_malloc((size_t)in->L * in->T * sizeof *a);
    float *s = hps_malloc((size_t)in->L * in->T * sizeof *s);
    episode(in, w, 0, NULL, 1, assign, NULL, 0, a, s);
    free(a);
    free(s);
}

/* A plan the policy made, to the elite and the trace. */
static void offer(rl_run *run, plan_result *r, const plan_budget *b, const int *assign, int L, const plan_eval *e)
{
    elite_offer(&run->el, assign, L, plan_score(e));
    if (plan_score(e) < run->best) {
        run->best = plan_score(e);
        if (e->feasible && r) plan_trace_add(r, (double)b->evals, e->objective);
    }
}

/* Samples `episodes` plans in batches, learning from each batch unless
 * frozen; offers every plan to run->el and traces the best into r. */
static void train(const rl_instance *in, float *w, rl_adam *ad, long episodes, int frozen, hps_rng *rng,
                  plan_budget *b, rl_run *run, plan_result *r, int show)
{
    const plan_problem *p = in->p;
    int L = in->L;
    rl_steps st = {0};
    plan_eval e;
    plan_eval_init(&e, p);
    int *assign = hps_malloc((size_t)L * sizeof *assign);
    float adv[RL_BATCH];
    double rew[RL_BATCH];
    long ep = 0, updates = (episodes + RL_BATCH - 1) / RL_BATCH;
    for (long u = 0; ep < episodes && plan_budget_left(b); u++) {
        int n = episodes - ep < RL_BATCH ? (int)(episodes - ep) : RL_BATCH;
        st.n_act = 0;
        st.n_steps = 0;
        double mean = 0, var = 0;
        float done = (float)u / (float)(updates > 1 ? updates - 1 : 1);
        if (u % RL_GREEDY_EVERY == 0) { /* the likeliest plan, as the policy now stands */
            greedy_plan(in, w, assign);
            plan_budget_evaluate(b, p, assign, &e);
            offer(run, r, b, assign, L, &e);
        }
        float eps = RL_EPS0 + (RL_EPS1 - RL_EPS0) * done;
        for (int k = 0; k < n; k++) {
            episode(in, w, eps, rng, 0, assign, &st, k, NULL, NULL);
            plan_budget_evaluate(b, p, assign, &e);
            rew[k] = reward_of(in, &e);
            mean += rew[k] / n;
            offer(run, r, b, assign, L, &e);
        }
        for (int k = 0; k < n; k++) var += (rew[k] - mean) * (rew[k] - mean) / n;
        for (int k = 0; k < n; k++) adv[k] = (float)((rew[k] - mean) / (sqrt(var) + 1e-6));
        if (u == 0) run->mean_first = mean;
        run->mean_last = mean;
        float entropy = RL_ENTROPY0 * (1 - 0.9f * done);
        if (!frozen && var > 1e-12) update(w, ad, &st, adv, n, entropy, eps);
        ep += n;
        progress(show, "episode", ep, episodes, run->best < 1e30 ? run->best : NAN);
    }
    free(assign);
    plan_eval_free(&e);
    steps_free(&st);
}

static void init_random(float *w, hps_rng *rng)
{
    float s1 = 1.0f / sqrtf((float)RL_F), s2 = 1.0f / sqrtf((float)RL_H);
    for (int i = 0; i < RL_H * RL_F; i++) w1(w)[i] = hps_rng_range(rng, -s1, s1);
    for (int i = 0; i < RL_H; i++) {
        b1(w)[i] = 0;
        w2(w)[i] = hps_rng_range(rng, -s2, s2);
    }
    for (int i = 0; i < RL_F; i++) v(w)[i] = hps_rng_range(rng, -s1, s1);
}

/* The feasibility repair: where neither the policy nor the polish ended
 * on a feasible plan, the cheap heuristics' best feasible one (greedy,
 * each type alone, the fastest plan planned with the unit limits), then
 * descended, so that rl never answers "no plan" where one of them finds
 * one (issue 29: rl alone on deep instances returned none at 0.95 of the
 * fastest throughput where exact found a plan).  1 when it replaced r's. */
static int repair(const plan_problem *p, plan_result *r, plan_eval *e)
{
    int L = p->n_layers, T = p->n_types, *cand = hps_malloc((size_t)L * sizeof *cand), found = 0;
    double best = HUGE_VAL;
    plan_result h;
    plan_result_init(&h, p);
    plan_budget b;
    plan_budget_init(&b, 20000, 0); /* what the repair's own descents may spend */
    for (int k = -2; k < T; k++) {
        if (k == -2) plan_solve_greedy(p, &h);
        else if (k == -1) {
            plan_max_throughput(p, h.assign);
            plan_dp_limits(p, h.assign, &b);
        } else
            plan_solve_fixed(p, k, &h);
        plan_evaluate(p, h.assign, e);
        if (e->feasible && e->objective < best) {
            best = e->objective;
            memcpy(cand, h.assign, (size_t)L * sizeof *cand);
            found = 1;
        }
    }
    if (found) {
        plan_descend(p, cand, &b);
        memcpy(r->assign, cand, (size_t)L * sizeof *cand);
        r->found_by = "repair";
    }
    plan_evaluate(p, r->assign, e);
    plan_result_free(&h);
    free(cand);
    return found;
}

int plan_solve_rl(const plan_problem *p, const plan_search_opts *o, plan_result *r)
{
    int L = p->n_layers;
    double t0 = hps_now();
    long total = o->evaluations > 0 ? o->evaluations : 1000000;
    long episodes = o->episodes > 0 ? o->episodes : 2048;
    plan_budget b;
    plan_budget_init(&b, total, o->time_limit);
    hps_rng rng;
    hps_rng_seed(&rng, o->seed);
    float w[RL_NP];
    if (o->start == PLAN_START_RANDOM) init_random(w, &rng);
    else if (o->start == PLAN_START_UNIFORM) memset(w, 0, sizeof w);
    else {
        plan_policy *shipped = o->policy ? NULL : plan_policy_shipped();
        memcpy(w, (o->policy ? o->policy : shipped)->w, sizeof w);
        plan_policy_free(shipped);
    }
    rl_instance in;
    plan_rl_instance_init(&in, p, &b);
    rl_adam ad = {0};
    rl_run run = {.best = HUGE_VAL};
    for (int i = 0; i < RL_ELITE; i++) run.el.assign[i] = hps_malloc((size_t)L * sizeof(int));
    /* the policy keeps at most what the polish needs to start from */
    long own = o->polish ? total / 2 : total;
    train(&in, w, &ad, episodes < own ? episodes : own, o->frozen || o->start == PLAN_START_UNIFORM, &rng, &b,
          &run, r, o->progress);
    plan_eval e;
    plan_eval_init(&e, p);
    int *a = hps_malloc((size_t)L * sizeof *a);
    greedy_plan(&in, w, a);
    plan_budget_evaluate(&b, p, a, &e);
    elite_offer(&run.el, a, L, plan_score(&e));
    memcpy(r->assign, run.el.assign[0], (size_t)L * sizeof *a);
    double policy_best = run.el.score[0];
    if (policy_best < run.best && e.feasible) plan_trace_add(r, (double)b.evals, e.objective);
    r->found_by = "policy";
    if (o->polish) {
        /* each of the best samples plans with the unit limits (the moves
         * of the descent see them only as prices), then descends; then,
         * best first, each goes on with the iterated search while
         * evaluations are left (one whose search stalls leaves the budget
         * to the next start).  A descent may spend the budget: the best
         * plan so far is kept at every step. */
        double sc[RL_ELITE], best = HUGE_VAL;
        int order[RL_ELITE], n = 0;
        int *trial = hps_malloc((size_t)L * sizeof *trial);
        if (!(policy_best < 1e30)) { /* none feasible: the polish alone's start in the last place */
            plan_max_throughput(p, trial);
            plan_budget_evaluate(&b, p, trial, &e);
            run.el.n = run.el.n < RL_ELITE ? run.el.n : RL_ELITE - 1;
            elite_offer(&run.el, trial, L, plan_score(&e));
        }
        /* the two best, and the fastest plan when it is a start */
        for (int i = 0; i < run.el.n; i++)
            if (i < RL_LIMITS_STARTS || !(policy_best < 1e30)) plan_dp_limits(p, run.el.assign[i], &b);
        for (int i = 0; i < run.el.n; i++) {
            int seen = 0; /* where they led to one plan, it descends once */
            for (int q = 0; q < i && !seen; q++) seen = !memcmp(run.el.assign[q], run.el.assign[i], (size_t)L * sizeof *a);
            if (seen) continue;
            plan_descend(p, run.el.assign[i], &b);
            plan_budget_evaluate(&b, p, run.el.assign[i], &e);
            sc[i] = plan_score(&e);
            int k = n++;
            for (; k > 0 && sc[order[k - 1]] > sc[i]; k--) order[k] = order[k - 1];
            order[k] = i;
        }
        for (int k = 0; k < n; k++) {
            memcpy(trial, run.el.assign[order[k]], (size_t)L * sizeof *trial);
            if (plan_budget_left(&b)) plan_iterated_search(p, trial, o->seed + (uint64_t)k, &b);
            plan_budget_evaluate(&b, p, trial, &e);
            if (plan_score(&e) < best) {
                best = plan_score(&e);
                memcpy(a, trial, (size_t)L * sizeof *a);
            }
        }
        free(trial);
        if (best < policy_best * (1 - 1e-12)) {
            plan_budget_evaluate(&b, p, a, &e);
            memcpy(r->assign, a, (size_t)L * sizeof *a);
            r->found_by = "polish";
            if (e.feasible) plan_trace_add(r, (double)b.evals, e.objective);
        }
    }
    plan_evaluate(p, r->assign, &e);
    if (!e.feasible && repair(p, r, &e)) plan_trace_add(r, (double)b.evals, e.objective);
    r->found = 1;
    r->episodes = b.evals;
    r->timed_out = b.cut;
    r->mean_first = run.mean_first;
    r->mean_last = run.mean_last;
    r->seconds = hps_now() - t0;
    free(a);
    plan_eval_free(&e);
    for (int i = 0; i < RL_ELITE; i++) free(run.el.assign[i]);
    plan_rl_instance_free(&in);
    return 0;
}

/* ---- pre-training ---------------------------------------------------------- */

plan_policy *plan_policy_pretrain(uint64_t seed, int instances, long episodes, int show)
{
    static const int layers[] = {4, 8, 12, 16, 24, 32, 48, 64, 96, 128};
    plan_policy *pol = hps_calloc(1, sizeof *pol);
    hps_rng rng;
    hps_rng_seed(&rng, seed);
    init_random(pol->w, &rng);
    pol->seed = seed;
    pol->instances = instances;
    pol->episodes = episodes;
    rl_adam ad = {0};
    for (int k = 0; k < instances; k++) {
        /* not bench-plan's instances: seeds through hps_mix64, limits drawn
         * from an interval */
        int L = layers[hps_rng_below(&rng, sizeof layers / sizeof *layers)];
        int T = 2 + (int)hps_rng_below(&rng, 15);
        double tight = 0.2 + 0.75 * hps_rng_uniform(&rng);
        int limits = (int)hps_rng_below(&rng, 3), memory = hps_rng_below(&rng, 3) == 0;
        uint64_t at = hps_mix64(seed * 1000003u + (uint64_t)k);
        plan_problem *p = memory ? plan_problem_random_with_memory(at, L, T, tight, limits)
                                 : plan_problem_random(at, L, T, tight, limits);
        if (!p) continue; /* memory that fits nowhere */
        plan_budget b;
        plan_budget_init(&b, LONG_MAX, 0);
        rl_instance in;
        plan_rl_instance_init(&in, p, &b);
        rl_run run = {.best = HUGE_VAL};
        for (int i = 0; i < RL_ELITE; i++) run.el.assign[i] = hps_malloc((size_t)L * sizeof(int));
        train(&in, pol->w, &ad, episodes, 0, &rng, &b, &run, NULL, 0);
        for (int i = 0; i < RL_ELITE; i++) free(run.el.assign[i]);
        plan_rl_instance_free(&in);
        plan_problem_free(p);
        progress(show, "instance", k + 1, instances, run.best < 1e30 ? run.best : NAN);
    }
    return pol;
}
