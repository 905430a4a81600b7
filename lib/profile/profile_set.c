/* The profiles hps-plan reads: several files, one device id in one file,
 * each file with the SHA-256 of its text (plans record it). */
#include <stdlib.h>
#include <string.h>

#include "core/hps_io.h"
#include "profile/hps_profile.h"

typedef struct {
    char digest[72];
    hps_profile *profile;
} profile_file;

struct hps_profiles {
    int n;
    profile_file *files;
};

hps_profiles *hps_profiles_new(void) { return hps_calloc(1, sizeof(hps_profiles)); }

int hps_profiles_count(const hps_profiles *ps) { return ps->n; }
const char *hps_profiles_digest(const hps_profiles *ps, int i) { return ps->files[i].digest; }
const char *hps_profiles_name(const hps_profiles *ps, int i) { return ps->files[i].profile->name; }

void hps_profiles_free(hps_profiles *ps)
{
    if (!ps) return;
    for (int i = 0; i < ps->n; i++) hps_profile_free(ps->files[i].profile);
    free(ps->files);
    free(ps);
}

const hps_profile_device *hps_profiles_find(const hps_profiles *ps, const char *id, const hps_profile **in)
{
    for (int i = 0; i < ps->n; i++) {
        const hps_profile_device *d = hps_profile_device_find(ps->files[i].profile, id);
        if (d) {
            if (in) *in = ps->files[i].profile;
            return d;
        }
    }
    return NULL;
}

int hps_profiles_add(hps_profiles *ps, const char *name, const char *text, size_t len, hps_error *err)
{
    hps_profile *p = hps_profile_parse(name, text, len, err);
    if (!p) return -1;
    if (p->n_devices == 0) {
        hps_profile_free(p);
        return hps_fail(err, HPS_EXIT_USAGE, "%s: devices must be a non-empty array", name);
    }
    for (int i = 0; i < p->n_devices; i++) {
        const hps_profile *other;
        if (hps_profiles_find(ps, p->devices[i].id, &other)) {
            hps_fail(err, HPS_EXIT_USAGE, "%s: device '%s' is also in %s", name,
                     hps_printable(p->devices[i].id, (char[128]){0}, 128), other->name);
            hps_profile_free(p);
            return -1;
        }
    }
    ps->files = hps_realloc(ps->files, (size_t)(ps->n + 1) * sizeof *ps->files);
    profile_file *f = &ps->files[ps->n++];
    f->profile = p;
    hps_sha256_hex(text, len, f->digest);
    return 0;
}
