/* No plan meets the limit: which stage, link or type cannot, so that the
 * user knows what to add or relax. */
#include <math.h>
#include <stdlib.h>

#include "plan/hps_plan_inputs.h"

/* A stage on the servers' type whose servers take every unit: no rate is
 * reachable, and the best throughput plan_max_throughput finds does not hold. */
static int servers_take_all(const plan_problem *p, const plan_stage *st, int s, hps_error *err)
{
    int t = st->type, least = plan_stage_servers(p, &st->law, 0);
    if (!((st->short_of_limit & PLAN_SHORT_STAGE) && t == p->server_type && least > 0 && p->max_units[t] - least < 1))
        return 0;
    hps_fail(err, HPS_EXIT_RUNTIME,
             "no plan meets %.6g samples/s: stage %d ('%s'..'%s') on '%s' has no unit beside its %d server%s: "
             "'%s' has %d unit%s, servers included",
             p->min_throughput, s, p->layer_names[st->first], p->layer_names[st->end - 1], p->type_names[t], least,
             least == 1 ? "" : "s", p->type_names[t], p->max_units[t], p->max_units[t] == 1 ? "" : "s");
    return 1;
}

/* A stage whose rows need more servers than there may be: memory, not
 * throughput, is what stops it (hps-plan(1), MEMORY). */
static int servers_short_of_memory(const plan_problem *p, const plan_stage *st, int s, hps_error *err)
{
    if (!(st->short_of_limit & PLAN_SHORT_STAGE) || plan_stage_servers(p, &st->law, 0) >= 0 || p->server_mem <= 0)
        return 0;
    double need = ceil(st->law.server_table_bytes * PLAN_SERVER_HEADROOM / p->server_mem);
    hps_fail(err, HPS_EXIT_RUNTIME,
             "no plan meets %.6g samples/s: stage %d ('%s'..'%s') on '%s' keeps %.3g GiB of tables and optimizer "
             "state on the servers: that takes %.0f servers of %.3g GiB (with %.0f%% headroom) and %s%s%s has %d",
             p->min_throughput, s, p->layer_names[st->first], p->layer_names[st->end - 1], p->type_names[st->type],
             st->law.server_table_bytes / PLAN_GIB, need, p->server_mem / PLAN_GIB, 100 * (PLAN_SERVER_HEADROOM - 1),
             p->server_type >= 0 ? "'" : "", p->server_type >= 0 ? p->type_names[p->server_type] : "the cluster",
             p->server_type >= 0 ? "'" : "", p->max_servers);
    return 1;
}

void plan_infeasible(const plan_problem *p, const plan_eval *e, hps_error *err)
{
    int *a = hps_malloc((size_t)p->n_layers * sizeof *a);
    double best = plan_max_throughput(p, a);
    free(a);
    char why[300] = "";
    for (int s = 0; s < e->n_stages && !why[0]; s++) {
        const plan_stage *st = &e->stages[s];
        if (servers_take_all(p, st, s, err) || servers_short_of_memory(p, st, s, err)) return;
        if (st->short_of_limit & PLAN_SHORT_LINK)
            snprintf(why, sizeof why, "the link from '%s' into stage %d on '%s' carries at most %.6g samples/s",
                     p->type_names[e->stages[s - 1].type], s, p->type_names[st->type], st->link_throughput);
        else if (st->short_of_limit & PLAN_SHORT_STAGE)
            snprintf(why, sizeof why, "stage %d ('%s'..'%s') on '%s' reaches at most %.6g samples/s with %d unit%s%s",
                     s, p->layer_names[st->first], p->layer_names[st->end - 1], p->type_names[st->type],
                     st->best_throughput, st->best_units, st->best_units == 1 ? "" : "s",
                     st->type == p->server_type && st->servers ? " beside its servers" : "");
    }
    for (int t = 0; t < p->n_types && !why[0]; t++)
        if (e->used[t] > p->max_units[t])
            snprintf(why, sizeof why, "'%s' would need %d units%s and has %d", p->type_names[t], e->used[t],
                     t == p->server_type && e->servers ? " (servers included)" : "", p->max_units[t]);
    hps_fail(err, HPS_EXIT_RUNTIME, "no plan meets %.6g samples/s: %s; the best throughput reachable is %.6g samples/s",
             p->min_throughput, why, best);
}
