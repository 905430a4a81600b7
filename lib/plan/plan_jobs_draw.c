/* A joint plan read back (hps-plan(5), JOINT PLAN) for hps-plan show: a
 * table per job, and a Gantt chart of the schedule over the units in use. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/hps_io.h"
#include "core/hps_json.h"
#include "core/hps_svg.h"
#include "plan/hps_plan_jobs.h"

typedef struct {
    const char *type, *first, *last; /* the stage's type, its first and last layer's names */
    int units;
    double throughput, cost_per_hour;
} joint_stage;

typedef struct {
    const char *name, *units; /* units: "gpu-a100 x2, cpu-r5 x3" */
    double start, end, separate_end, cost, throughput, weight;
    int n_stages, servers;
    joint_stage *stages;
    const char *server_type; /* NULL when no servers */
    double servers_cost_per_hour;
} joint_job;

struct plan_joint {
    json_t *root;
    const char *objective;
    int n_jobs;
    joint_job jobs[PLAN_JOBS_MAX];
    char units_text[PLAN_JOBS_MAX][512];
    double cost, completion, makespan, sep_cost, sep_completion, sep_makespan;
    int n_types, n_phases;
    const char *type_names[PLAN_MAX_TYPES];
    double *phase_t;  /* n_phases + 1 edges */
    int *phase_units; /* [phase * n_types + k] */
};

int plan_joint_is(json_t *root)
{
    json_t *f = json_object_get(root, "format");
    return json_is_string(f) && strcmp(json_string_value(f), "hps-joint-plan") == 0;
}

static int read_totals(json_t *o, const char *ctx, double *cost, double *comp, double *mk, hps_error *err)
{
    if (!json_is_object(o)) return hps_fail(err, HPS_EXIT_USAGE, "%s must be an object", ctx);
    return hps_json_num(o, "cost", HPS_REQUIRED, 0, 1e300, cost, ctx, err) ||
           hps_json_num(o, "completion_s", HPS_REQUIRED, 0, 1e300, comp, ctx, err) ||
           hps_json_num(o, "makespan_s", HPS_REQUIRED, 0, 1e300, mk, ctx, err) ? -1 : 0;
}

/* The job's own plan (hps-plan(5)): its stages and servers, for the table. */
static int read_job_plan(joint_job *j, json_t *plan, const char *job_ctx, hps_error *err)
{
    char ctx[700];
    snprintf(ctx, sizeof ctx, "%s: plan", job_ctx);
    json_t *stages = json_is_object(plan) ? json_object_get(plan, "stages") : NULL;
    if (!json_is_array(stages) || json_array_size(stages) == 0 || json_array_size(stages) > 4096)
        return hps_fail(err, HPS_EXIT_USAGE, "%s: stages must be an array of 1 to 4096 stages", ctx);
    j->stages = hps_calloc(json_array_size(stages), sizeof *j->stages);
    for (size_t i = 0; i < json_array_size(stages); i++, j->n_stages++) {
        json_t *o = json_array_get(stages, i), *names;
        joint_stage *st = &j->stages[i];
        long long units;
        snprintf(ctx, sizeof ctx, "%s: plan: stage %zu", job_ctx, i);
        if (!json_is_object(o)) return hps_fail(err, HPS_EXIT_USAGE, "%s: must be an object", ctx);
        if (hps_json_str(o, "type", HPS_REQUIRED, &st->type, ctx, err) ||
            hps_json_int(o, "units", HPS_REQUIRED, 0, 1000000, &units, ctx, err) ||
            hps_json_num(o, "throughput", HPS_REQUIRED, 0, 1e300, &st->throughput, ctx, err) ||
            hps_json_num(o, "cost_per_hour", HPS_REQUIRED, 0, 1e300, &st->cost_per_hour, ctx, err))
            return -1;
        st->units = (int)units;
        names = json_object_get(o, "layer_names");
        size_t n = json_array_size(names);
        if (!json_is_array(names) || n == 0 || !json_is_string(json_array_get(names, 0)) ||
            !json_is_string(json_array_get(names, n - 1)))
            return hps_fail(err, HPS_EXIT_USAGE, "%s: layer_names must be an array of names", ctx);
        st->first = json_string_value(json_array_get(names, 0));
        st->last = json_string_value(json_array_get(names, n - 1));
    }
    json_t *sv = json_object_get(plan, "servers");
    if (json_is_object(sv)) {
        long long count = 0;
        snprintf(ctx, sizeof ctx, "%s: plan: servers", job_ctx);
        if (hps_json_int(sv, "count", HPS_REQUIRED, 0, 1000000, &count, ctx, err) ||
            hps_json_str(sv, "type", HPS_OPTIONAL, &j->server_type, ctx, err) ||
            hps_json_num(sv, "cost_per_hour", HPS_OPTIONAL, 0, 1e300, &j->servers_cost_per_hour, ctx, err))
            return -1;
        j->servers = (int)count;
    }
    return 0;
}

static int read_job(plan_joint *jt, json_t *o, const char *file, int i, hps_error *err)
{
    char ctx[600];
    snprintf(ctx, sizeof ctx, "%s: job %d", file, i);
    joint_job *j = &jt->jobs[i];
    if (!json_is_object(o)) return hps_fail(err, HPS_EXIT_USAGE, "%s: must be an object", ctx);
    if (hps_json_str(o, "name", HPS_REQUIRED, &j->name, ctx, err) ||
        hps_json_num(o, "start_s", HPS_REQUIRED, 0, 1e300, &j->start, ctx, err) ||
        hps_json_num(o, "end_s", HPS_REQUIRED, j->start, 1e300, &j->end, ctx, err) ||
        hps_json_num(o, "separate_end_s", HPS_REQUIRED, 0, 1e300, &j->separate_end, ctx, err) ||
        hps_json_num(o, "cost", HPS_REQUIRED, 0, 1e300, &j->cost, ctx, err) ||
        hps_json_num(o, "throughput", HPS_REQUIRED, 0, 1e300, &j->throughput, ctx, err) ||
        hps_json_num(o, "weight", HPS_REQUIRED, 0, 1e300, &j->weight, ctx, err))
        return -1;
    json_t *u = json_object_get(o, "units"), *v;
    const char *k;
    if (!json_is_object(u)) return hps_fail(err, HPS_EXIT_USAGE, "%s: units must be an object", ctx);
    char *s = jt->units_text[i];
    size_t n = 0;
    s[0] = 0;
    json_object_foreach(u, k, v) {
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > 1000000)
            return hps_fail(err, HPS_EXIT_USAGE, "%s: units: '%s' must be a count", ctx, k);
        char buf[HPS_NAME_MAX];
        int w = snprintf(s + n, 512 - n, "%s%s x%d", n ? ", " : "", hps_printable(k, buf, sizeof buf),
                         (int)json_integer_value(v));
        if (w < 0 || (size_t)w >= 512 - n) break;
        n += (size_t)w;
    }
    j->units = s;
    return read_job_plan(j, json_object_get(o, "plan"), ctx, err);
}

static int read_phases(plan_joint *jt, json_t *root, const char *file, hps_error *err)
{
    json_t *lim = json_object_get(root, "max_units"), *v, *ph = json_object_get(root, "phases");
    const char *k;
    if (!json_is_object(lim) || json_object_size(lim) > PLAN_MAX_TYPES)
        return hps_fail(err, HPS_EXIT_USAGE, "%s: max_units must be an object of at most %d types", file,
                        PLAN_MAX_TYPES);
    json_object_foreach(lim, k, v) jt->type_names[jt->n_types++] = k;
    if (!json_is_array(ph) || json_array_size(ph) > 2 * PLAN_JOBS_MAX)
        return hps_fail(err, HPS_EXIT_USAGE, "%s: phases must be an array of at most %d", file, 2 * PLAN_JOBS_MAX);
    jt->n_phases = (int)json_array_size(ph);
    jt->phase_t = hps_calloc((size_t)jt->n_phases + 1, sizeof *jt->phase_t);
    jt->phase_units = hps_calloc((size_t)jt->n_phases * jt->n_types + 1, sizeof *jt->phase_units);
    for (int p = 0; p < jt->n_phases; p++) {
        json_t *o = json_array_get(ph, (size_t)p);
        char ctx[600];
        snprintf(ctx, sizeof ctx, "%s: phase %d", file, p);
        double end;
        if (!json_is_object(o)) return hps_fail(err, HPS_EXIT_USAGE, "%s: must be an object", ctx);
        if (hps_json_num(o, "start_s", HPS_REQUIRED, p ? jt->phase_t[p] : 0, 1e300, &jt->phase_t[p], ctx, err) ||
            hps_json_num(o, "end_s", HPS_REQUIRED, jt->phase_t[p], 1e300, &end, ctx, err))
            return -1;
        jt->phase_t[p + 1] = end;
        json_t *u = json_object_get(o, "units");
        for (int t = 0; t < jt->n_types; t++) {
            long long n = 0;
            if (!json_is_object(u)) return hps_fail(err, HPS_EXIT_USAGE, "%s: units must be an object", ctx);
            if (hps_json_int(u, jt->type_names[t], HPS_OPTIONAL, 0, 1000000, &n, ctx, err)) return -1;
            jt->phase_units[p * jt->n_types + t] = (int)n;
        }
    }
    return 0;
}

plan_joint *plan_joint_parse(json_t *root, const char *path, hps_error *err)
{
    const char *file = hps_path_name(path);
    plan_joint *jt = hps_calloc(1, sizeof *jt);
    jt->root = json_incref(root);
    json_t *jobs = json_object_get(root, "jobs");
    int rc = hps_json_format(root, "hps-joint-plan", PLAN_JOINT_VERSION, HPS_REQUIRED, NULL, file, err) ||
             hps_json_str(root, "objective", HPS_REQUIRED, &jt->objective, file, err);
    char ctx[600];
    snprintf(ctx, sizeof ctx, "%s: totals", file);
    if (!rc) rc = read_totals(json_object_get(root, "totals"), ctx, &jt->cost, &jt->completion, &jt->makespan, err);
    snprintf(ctx, sizeof ctx, "%s: separate", file);
    if (!rc) rc = read_totals(json_object_get(root, "separate"), ctx, &jt->sep_cost, &jt->sep_completion,
                              &jt->sep_makespan, err);
    if (!rc && (!json_is_array(jobs) || json_array_size(jobs) == 0 || json_array_size(jobs) > PLAN_JOBS_MAX))
        rc = hps_fail(err, HPS_EXIT_USAGE, "%s: jobs must be an array of 1 to %d jobs", file, PLAN_JOBS_MAX);
    for (size_t i = 0; !rc && i < json_array_size(jobs); i++, jt->n_jobs++)
        rc = read_job(jt, json_array_get(jobs, i), file, (int)i, err);
    if (!rc) rc = read_phases(jt, root, file, err);
    if (rc) {
        plan_joint_free(jt);
        return NULL;
    }
    return jt;
}

void plan_joint_free(plan_joint *jt)
{
    if (!jt) return;
    for (int i = 0; i < jt->n_jobs; i++) free(jt->jobs[i].stages);
    json_decref(jt->root);
    free(jt->phase_t);
    free(jt->phase_units);
    free(jt);
}

void plan_joint_table(FILE *f, const plan_joint *jt)
{
    char buf[HPS_NAME_MAX];
    fprintf(f, "joint plan of %d jobs, objective %s\n", jt->n_jobs, jt->objective);
    fprintf(f, "%-16s %6s %12s %12s %12s %10s  %s\n", "job", "weight", "start h", "end h", "samples/s", "cost $",
            "units");
    for (int i = 0; i < jt->n_jobs; i++) {
        const joint_job *j = &jt->jobs[i];
        fprintf(f, "%-16s %6g %12.3f %12.3f %12.1f %10.4f  %s\n", hps_printable(j->name, buf, sizeof buf), j->weight,
                j->start / 3600, j->end / 3600, j->throughput, j->cost, j->units);
    }
    fprintf(f, "%-16s %12s %18s %14s\n", "", "cost $", "sum w x end (h)", "makespan (h)");
    fprintf(f, "%-16s %12.4f %18.3f %14.3f\n", "joint", jt->cost, jt->completion / 3600, jt->makespan / 3600);
    fprintf(f, "%-16s %12.4f %18.3f %14.3f\n", "separate", jt->sep_cost, jt->sep_completion / 3600,
            jt->sep_makespan / 3600);
    for (int i = 0; i < jt->n_jobs; i++) {
        const joint_job *j = &jt->jobs[i];
        char b1[HPS_NAME_MAX], b2[HPS_NAME_MAX];
        fprintf(f, "\njob %s: %.3f h to %.3f h (planned separately: to %.3f h)\n",
                hps_printable(j->name, buf, sizeof buf), j->start / 3600, j->end / 3600, j->separate_end / 3600);
        fprintf(f, "stage  %-12s  %-22s  %5s  %14s  %9s\n", "type", "layers", "units", "samples/s", "$/hour");
        for (int s = 0; s < j->n_stages; s++) {
            const joint_stage *st = &j->stages[s];
            char layers[2 * HPS_NAME_MAX + 4];
            snprintf(layers, sizeof layers, "%s..%s", hps_printable(st->first, b1, sizeof b1),
                     hps_printable(st->last, b2, sizeof b2));
            fprintf(f, "%-5d  %-12s  %-22s  %5d  %14.1f  %9.3f\n", s, hps_printable(st->type, buf, sizeof buf),
                    layers, st->units, st->throughput, st->cost_per_hour);
        }
        if (j->servers)
            fprintf(f, "ps     %-12s  %-22s  %5d  %14s  %9.3f\n",
                    j->server_type ? hps_printable(j->server_type, buf, sizeof buf) : "servers", "embedding rows",
                    j->servers, "", j->servers_cost_per_hour);
    }
}

/* One bar a job over hours, then the units of each type in use. */
void plan_joint_svg(FILE *f, const plan_joint *jt)
{
    const double left = 140, width = 560, row = 24;
    double span = jt->makespan > 0 ? jt->makespan / 3600 : 1;
    double chart_y = 50 + row * jt->n_jobs + 50;
    int height = (int)(chart_y + 220);
    char buf[HPS_NAME_MAX];
    hps_svg_begin(f, 800, height, "joint plan");
    hps_svg_text(f, 400, 24, 14, "middle", "bold", "#222", "joint plan of %d jobs (objective %s)", jt->n_jobs,
                 jt->objective);
    for (int i = 0; i < jt->n_jobs; i++) {
        const joint_job *j = &jt->jobs[i];
        double y = 40 + row * i, x0 = left + width * (j->start / 3600) / span;
        double w = fmax(1, width * ((j->end - j->start) / 3600) / span);
        hps_svg_text(f, left - 6, y + row * 0.65, 11, "end", "normal", "#222", "%s",
                     hps_printable(j->name, buf, sizeof buf));
        hps_svg_rect(f, x0, y + 3, w, row - 6, hps_svg_color(i), "none");
        hps_svg_text(f, x0 + 4, y + row * 0.65, 10, "start", "normal", "#fff", "%s", j->units);
    }
    hps_svg_xaxis(f, left, 40 + row * jt->n_jobs + 4, width, 0, span, "hours");
    hps_svg_series s[PLAN_MAX_TYPES];
    double *x = hps_calloc((size_t)jt->n_phases * 2 + 1, sizeof *x);
    double *y = hps_calloc((size_t)(jt->n_phases * 2 + 1) * (jt->n_types + 1), sizeof *y);
    for (int p = 0; p < jt->n_phases; p++) x[2 * p] = jt->phase_t[p] / 3600, x[2 * p + 1] = jt->phase_t[p + 1] / 3600;
    int n_series = 0;
    for (int t = 0; t < jt->n_types; t++) {
        double *yt = y + (size_t)t * (jt->n_phases * 2 + 1);
        int used = 0;
        for (int p = 0; p < jt->n_phases; p++) {
            yt[2 * p] = yt[2 * p + 1] = jt->phase_units[p * jt->n_types + t];
            used |= jt->phase_units[p * jt->n_types + t] > 0;
        }
        if (used) /* a type no job takes is left out */
            s[n_series++] = (hps_svg_series){.name = jt->type_names[t], .color = hps_svg_color(t),
                                             .n = 2 * jt->n_phases, .x = x, .y = yt};
    }
    hps_svg_axes ax = {.x = left, .y = chart_y, .w = width, .h = 160, .title = "units in use",
                       .xlabel = "hours", .ylabel = "units", .ymin_zero = 1, .xmin = 0, .xmax = span};
    hps_svg_chart(f, &ax, s, n_series);
    free(x);
    free(y);
    hps_svg_end(f);
}
