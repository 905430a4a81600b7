/* Several jobs on one cluster: schedules from an order, the exact search and
 * the marginal-gain heuristic (hps_plan_jobs.h). */
#include <math.h>
#include <string.h>

#include "core/hps_rng.h"
#include "plan/hps_plan_jobs.h"

const char *const plan_jobs_objective_names[] = {"cost", "completion", "makespan", NULL};

/* What the search fixes as it goes: the jobs placed so far. */
typedef struct {
    int n;
    int job[PLAN_JOBS_MAX];
    const int *units[PLAN_JOBS_MAX];
    double start[PLAN_JOBS_MAX], end[PLAN_JOBS_MAX];
} placed_set;

/* 1 when u fits beside the placed jobs at every instant of [t, t + d):
 * their usage only rises at their starts, so t and those starts suffice. */
static int fits_at(const plan_jobs_problem *jp, const placed_set *ps, const int *u, double t, double d)
{
    for (int i = -1; i < ps->n; i++) {
        double x = i < 0 ? t : ps->start[i];
        if (i >= 0 && !(x > t && x < t + d)) continue;
        for (int k = 0; k < jp->n_types; k++) {
            if (!u[k]) continue;
            int used = u[k];
            for (int q = 0; q < ps->n; q++)
                if (ps->start[q] <= x && x < ps->end[q]) used += ps->units[q][k];
            if (used > jp->max_units[k]) return 0;
        }
    }
    return 1;
}

/* The earliest start of a job taking u for d: 0 or some placed job's end. */
static double earliest_start(const plan_jobs_problem *jp, const placed_set *ps, const int *u, double d)
{
    double best = HUGE_VAL;
    for (int i = -1; i < ps->n; i++) {
        double t = i < 0 ? 0 : ps->end[i];
        if (t < best && fits_at(jp, ps, u, t, d)) best = t;
    }
    return best; /* the last end always fits: options are within max_units */
}

static void place(placed_set *ps, int job, const plan_job_option *o, double start)
{
    ps->job[ps->n] = job;
    ps->units[ps->n] = o->units;
    ps->start[ps->n] = start;
    ps->end[ps->n++] = start + o->duration_s;
}

static double objective_of(const plan_jobs_problem *jp, double cost, double completion, double makespan)
{
    switch (jp->objective) {
    case PLAN_JOBS_COST: return cost;
    case PLAN_JOBS_COMPLETION: return completion;
    case PLAN_JOBS_MAKESPAN: return makespan;
    }
    return HUGE_VAL;
}

void plan_jobs_schedule_build(const plan_jobs_problem *jp, const int *order, const int *option,
                              plan_jobs_schedule *s)
{
    placed_set ps = {0};
    double late = 0;
    s->cost = s->completion = s->makespan = 0;
    for (int i = 0; i < jp->n_jobs; i++) {
        int j = order[i];
        const plan_job_option *o = &jp->jobs[j].options[option[j]];
        double t = earliest_start(jp, &ps, o->units, o->duration_s);
        place(&ps, j, o, t);
        s->order[i] = j;
        s->option[j] = option[j];
        s->start_s[j] = t;
        s->end_s[j] = t + o->duration_s;
        s->cost += o->cost;
        s->completion += jp->jobs[j].weight * s->end_s[j];
        s->makespan = fmax(s->makespan, s->end_s[j]);
        if (s->end_s[j] > jp->jobs[j].deadline_s) late += s->end_s[j] / jp->jobs[j].deadline_s - 1;
    }
    double over = s->cost > jp->budget ? s->cost / jp->budget - 1 : 0;
    s->feasible = late == 0 && over == 0;
    s->objective = objective_of(jp, s->cost, s->completion, s->makespan);
    /* an infeasible schedule scores above every feasible one, less so the
     * nearer it is, so that the heuristic can walk towards feasibility */
    if (!s->feasible) s->objective = 1e30 * (1 + late + over);
}

/* ---- exact ---------------------------------------------------------------- */

typedef struct {
    const plan_jobs_problem *jp;
    placed_set ps;
    int option[PLAN_JOBS_MAX], order[PLAN_JOBS_MAX];
    double min_cost[PLAN_JOBS_MAX], min_time[PLAN_JOBS_MAX]; /* each job's best option alone */
    plan_jobs_schedule *best;
    double deadline; /* hps_now() at which the search stops */
    long nodes;      /* partial schedules visited: the clock is read every 1024 */
    int stopped;
} exact_search;

/* A lower bound on the objective of any completion of the partial schedule. */
static double bound(const exact_search *x, uint64_t placed, double cost, double completion, double makespan)
{
    const plan_jobs_problem *jp = x->jp;
    for (int j = 0; j < jp->n_jobs; j++)
        if (!(placed >> j & 1)) {
            cost += x->min_cost[j];
            completion += jp->jobs[j].weight * x->min_time[j];
            makespan = fmax(makespan, x->min_time[j]);
        }
    if (cost > jp->budget * (1 + 1e-12)) return HUGE_VAL;
    return objective_of(jp, cost, completion, makespan);
}

static void search(exact_search *x, uint64_t placed, double cost, double completion, double makespan)
{
    const plan_jobs_problem *jp = x->jp;
    int depth = x->ps.n;
    if (depth == jp->n_jobs) {
        double v = objective_of(jp, cost, completion, makespan);
        x->best->schedules++;
        if (!x->best->feasible || v < x->best->objective) plan_jobs_schedule_build(jp, x->order, x->option, x->best);
        return;
    }
    if ((++x->nodes & 1023) == 0 && hps_now() > x->deadline) x->stopped = 1;
    if (x->stopped) return;
    for (int j = 0; j < jp->n_jobs; j++) {
        if (placed >> j & 1) continue;
        const plan_job_choice *c = &jp->jobs[j];
        for (int k = 0; k < c->n_options; k++) {
            const plan_job_option *o = &c->options[k];
            double t = earliest_start(jp, &x->ps, o->units, o->duration_s), end = t + o->duration_s;
            if (end > c->deadline_s) continue;
            double c2 = cost + o->cost, w2 = completion + c->weight * end, m2 = fmax(makespan, end);
            double lb = bound(x, placed | (uint64_t)1 << j, c2, w2, m2);
            if (x->best->feasible && lb >= x->best->objective * (1 - 1e-12)) continue;
            if (lb == HUGE_VAL) continue;
            x->option[j] = k;
            x->order[depth] = j;
            place(&x->ps, j, o, t);
            search(x, placed | (uint64_t)1 << j, c2, w2, m2);
            x->ps.n--;
        }
    }
}

void plan_jobs_solve_exact(const plan_jobs_problem *jp, double time_s, plan_jobs_schedule *s)
{
    exact_search x = {.jp = jp, .best = s, .deadline = hps_now() + time_s};
    memset(s, 0, sizeof *s);
    for (int j = 0; j < jp->n_jobs; j++) {
        x.min_cost[j] = x.min_time[j] = HUGE_VAL;
        for (int k = 0; k < jp->jobs[j].n_options; k++) {
            x.min_cost[j] = fmin(x.min_cost[j], jp->jobs[j].options[k].cost);
            x.min_time[j] = fmin(x.min_time[j], jp->jobs[j].options[k].duration_s);
        }
    }
    /* the heuristic's schedule first: a bound to prune by from the start */
    plan_jobs_schedule g;
    plan_jobs_solve_greedy(jp, &g);
    *s = g;
    s->schedules = 0;
    if (!g.feasible) s->objective = HUGE_VAL;
    search(&x, 0, 0, 0, 0);
    if (!s->feasible) plan_jobs_schedule_build(jp, g.order, g.option, s); /* none exists: the nearest */
    s->optimal = !x.stopped;
    s->schedules += g.schedules;
}

/* ---- marginal gain -------------------------------------------------------- */

/* Smith's rule, deadlines first: the order a single machine would take. */
static void first_order(const plan_jobs_problem *jp, const int *option, int *order)
{
    for (int i = 0; i < jp->n_jobs; i++) order[i] = i;
    for (int i = 1; i < jp->n_jobs; i++)
        for (int k = i; k > 0; k--) {
            const plan_job_choice *a = &jp->jobs[order[k - 1]], *b = &jp->jobs[order[k]];
            double ra = a->weight / a->options[option[order[k - 1]]].duration_s;
            double rb = b->weight / b->options[option[order[k]]].duration_s;
            int swap = b->deadline_s < a->deadline_s || (b->deadline_s == a->deadline_s && rb > ra);
            if (!swap) break;
            int t = order[k];
            order[k] = order[k - 1], order[k - 1] = t;
        }
}

/* Local search from s: the first move that gains is taken (a job's
 * candidate changed, a job moved to another place in the order), until none
 * gains.  Returns the schedules built. */
static long descend(const plan_jobs_problem *jp, plan_jobs_schedule *s)
{
    int n = jp->n_jobs, option[PLAN_JOBS_MAX], order[PLAN_JOBS_MAX], o2[PLAN_JOBS_MAX];
    long built = 0;
    plan_jobs_schedule t;
    for (int gained = 1; gained;) {
        gained = 0;
        memcpy(option, s->option, sizeof option);
        memcpy(order, s->order, sizeof order);
        for (int j = 0; j < n && !gained; j++)
            for (int k = 0; k < jp->jobs[j].n_options && !gained; k++) {
                if (k == option[j]) continue;
                int was = option[j];
                option[j] = k;
                plan_jobs_schedule_build(jp, order, option, &t), built++;
                if (t.objective < s->objective * (1 - 1e-12)) *s = t, gained = 1;
                option[j] = was;
            }
        for (int a = 0; a < n && !gained; a++)
            for (int b = 0; b < n && !gained; b++) {
                if (a == b) continue;
                /* the job at a taken out and put in at b */
                int q = 0;
                for (int i = 0; i < n; i++)
                    if (i != a) o2[q++] = order[i];
                memmove(o2 + b + 1, o2 + b, sizeof(int) * (size_t)(n - 1 - b));
                o2[b] = order[a];
                plan_jobs_schedule_build(jp, o2, option, &t), built++;
                if (t.objective < s->objective * (1 - 1e-12)) *s = t, gained = 1;
            }
    }
    return built;
}

/* Marginal gain (as Optimus adds units where they gain most), in the form
 * of a local search over candidates and order: from each job's cheapest and
 * each job's fastest candidate, in Smith's order; then kicks of the best
 * (two candidates changed at random, seeded) followed by the search again,
 * 8 per job. */
void plan_jobs_solve_greedy(const plan_jobs_problem *jp, plan_jobs_schedule *s)
{
    int n = jp->n_jobs, option[PLAN_JOBS_MAX] = {0}, order[PLAN_JOBS_MAX];
    long built = 0;
    plan_jobs_schedule t;
    for (int start = 0; start < 2; start++) {
        for (int j = 0; j < n && start; j++) {
            const plan_job_choice *c = &jp->jobs[j];
            for (int k = 0; k < c->n_options; k++)
                if (c->options[k].duration_s < c->options[option[j]].duration_s) option[j] = k;
        }
        first_order(jp, option, order);
        plan_jobs_schedule_build(jp, order, option, &t), built++;
        built += descend(jp, &t);
        if (start == 0 || t.objective < s->objective) *s = t;
    }
    hps_rng r;
    hps_rng_seed(&r, 1);
    for (int kick = 0; kick < 8 * n; kick++) {
        memcpy(option, s->option, sizeof option);
        for (int m = 0; m < 2; m++) {
            int j = (int)hps_rng_below(&r, (uint64_t)n);
            option[j] = (int)hps_rng_below(&r, (uint64_t)jp->jobs[j].n_options);
        }
        plan_jobs_schedule_build(jp, s->order, option, &t), built++;
        built += descend(jp, &t);
        if (t.objective < s->objective * (1 - 1e-12)) *s = t;
    }
    s->optimal = 0;
    s->schedules = built;
}

void plan_jobs_separate(const plan_jobs_problem *jp, plan_jobs_schedule *s)
{
    int option[PLAN_JOBS_MAX] = {0}, order[PLAN_JOBS_MAX];
    for (int i = 0; i < jp->n_jobs; i++) order[i] = i;
    plan_jobs_schedule_build(jp, order, option, s);
    s->optimal = 0;
    s->schedules = 1;
}

/* ---- random instances ----------------------------------------------------- */

void plan_jobs_random(plan_jobs_problem *jp, uint64_t seed, int n_jobs, int n_types, int n_options)
{
    hps_rng r;
    hps_rng_seed(&r, seed);
    memset(jp, 0, sizeof *jp);
    jp->n_jobs = n_jobs;
    jp->n_types = n_types;
    jp->budget = HUGE_VAL;
    for (int k = 0; k < n_types; k++) jp->max_units[k] = 2 + (int)hps_rng_below(&r, 7);
    for (int j = 0; j < n_jobs; j++) {
        plan_job_choice *c = &jp->jobs[j];
        c->weight = 1 + (double)hps_rng_below(&r, 4);
        c->deadline_s = HUGE_VAL;
        c->n_options = n_options;
        double work = 10 + (double)hps_rng_below(&r, 40); /* unit-seconds */
        for (int o = 0; o < n_options; o++) {
            plan_job_option *op = &c->options[o];
            int k = (int)hps_rng_below(&r, (uint64_t)n_types), u = 1 + (int)hps_rng_below(&r, (uint64_t)jp->max_units[k]);
            op->units[k] = u;
            /* faster on more units, at a falling efficiency; integer seconds */
            op->duration_s = fmax(1, round(work / pow(u, 0.8)));
            op->cost_per_hour = u * (1 + 0.5 * k);
            op->cost = op->cost_per_hour * op->duration_s / 3600;
            op->throughput = 1 / op->duration_s;
            op->index = o;
        }
    }
}
