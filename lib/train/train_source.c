/* The schema check every batch source goes through before training starts. */
#include "train/hps_train.h"

int hps_source_check(const hps_source *s, const hps_model *m, hps_error *err)
{
    if (s->n_dense != m->n_dense)
        return hps_fail(err, HPS_EXIT_USAGE, "%s: rows have %d dense features, %s expects %d",
                        s->name, s->n_dense, m->path, m->n_dense);
    if (s->n_slots != m->n_slots)
        return hps_fail(err, HPS_EXIT_USAGE, "%s: rows have %d sparse slots, %s expects %d",
                        s->name, s->n_slots, m->path, m->n_slots);
    if (s->classes != m->classes)
        return hps_fail(err, HPS_EXIT_USAGE, "%s: labels have %d classes, %s expects %d",
                        s->name, s->classes, m->path, m->classes);
    for (int l = 0; l < m->n_layers; l++)
        if (m->layers[l].weighted && !s->weighted)
            return hps_fail(err, HPS_EXIT_USAGE,
                            "%s: rows carry no feature weights, but layer '%s' is weighted",
                            s->name, m->layers[l].name);
    return 0;
}
