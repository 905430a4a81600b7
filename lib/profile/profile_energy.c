/* Energy counters: RAPL package domains through Linux powercap for the CPU,
 * NVML (loaded with dlopen, so hps needs no NVIDIA library to run) for GPUs. */
#include <dirent.h>
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#include "profile/hps_profile.h"

#define RAPL_DIR "/sys/class/powercap"
#define RAPL_MAX_DOMAINS 16

struct hps_energy {
    const char *source;
    /* RAPL: one counter per package domain, with its wrap-around range */
    int n;
    char path[RAPL_MAX_DOMAINS][300];
    double last_uj[RAPL_MAX_DOMAINS], range_uj[RAPL_MAX_DOMAINS];
    double total_j;
    /* NVML */
    void *lib, *device;
    int (*get_energy)(void *device, unsigned long long *mj);
    unsigned long long first_mj;
};

static int read_double(const char *path, double *v)
{
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    int ok = fscanf(f, "%lf", v) == 1;
    fclose(f);
    return ok ? 0 : -1;
}

/* Package domains are "intel-rapl:N" (AMD's too); "intel-rapl:N:M" are parts of them. */
static int is_package_domain(const char *name)
{
    const char *p = strchr(name, ':');
    return strncmp(name, "intel-rapl:", 11) == 0 && p && !strchr(p + 1, ':');
}

static hps_energy *rapl_open(char *reason, size_t len)
{
    DIR *d = opendir(RAPL_DIR);
    if (!d) {
        snprintf(reason, len, "no RAPL counters (%s is absent)", RAPL_DIR);
        return NULL;
    }
    hps_energy *e = hps_calloc(1, sizeof *e);
    e->source = "rapl";
    struct dirent *ent;
    while ((ent = readdir(d)) && e->n < RAPL_MAX_DOMAINS) {
        if (!is_package_domain(ent->d_name)) continue;
        char range_path[300];
        snprintf(e->path[e->n], sizeof e->path[e->n], RAPL_DIR "/%s/energy_uj", ent->d_name);
        snprintf(range_path, sizeof range_path, RAPL_DIR "/%s/max_energy_range_uj", ent->d_name);
        if (read_double(e->path[e->n], &e->last_uj[e->n]) == 0 &&
            read_double(range_path, &e->range_uj[e->n]) == 0)
            e->n++;
    }
    closedir(d);
    if (e->n == 0) {
        snprintf(reason, len, "RAPL counters under %s are absent or not readable", RAPL_DIR);
        free(e);
        return NULL;
    }
    return e;
}

static double rapl_joules(hps_energy *e)
{
    for (int i = 0; i < e->n; i++) {
        double now;
        if (read_double(e->path[i], &now) != 0) continue;
        double delta = now - e->last_uj[i];
        if (delta < 0) delta += e->range_uj[i]; /* the counter wrapped */
        e->total_j += delta * 1e-6;
        e->last_uj[i] = now;
    }
    return e->total_j;
}

static hps_energy *nvml_open(int ordinal, char *reason, size_t len)
{
    void *lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        snprintf(reason, len, "NVML is not installed (libnvidia-ml.so.1)");
        return NULL;
    }
    int (*init)(void) = (int (*)(void))dlsym(lib, "nvmlInit_v2");
    int (*handle)(unsigned, void **) = (int (*)(unsigned, void **))dlsym(lib, "nvmlDeviceGetHandleByIndex_v2");
    hps_energy *e = hps_calloc(1, sizeof *e);
    e->source = "nvml";
    e->lib = lib;
    e->get_energy = (int (*)(void *, unsigned long long *))dlsym(lib, "nvmlDeviceGetTotalEnergyConsumption");
    if (!init || !handle || !e->get_energy || init() != 0 ||
        handle((unsigned)ordinal, &e->device) != 0 || e->get_energy(e->device, &e->first_mj) != 0) {
        snprintf(reason, len, "NVML cannot read the energy of cuda:%d", ordinal);
        dlclose(lib);
        free(e);
        return NULL;
    }
    return e;
}

hps_energy *hps_energy_open(const hps_device_spec *dev, char *reason, size_t len)
{
    return dev->kind == HPS_DEVICE_CPU ? rapl_open(reason, len) : nvml_open(dev->ordinal, reason, len);
}

double hps_energy_joules(hps_energy *e)
{
    if (!e->lib) return rapl_joules(e);
    unsigned long long mj = e->first_mj;
    e->get_energy(e->device, &mj);
    return (double)(mj - e->first_mj) * 1e-3;
}

const char *hps_energy_source(const hps_energy *e) { return e->source; }

void hps_energy_close(hps_energy *e)
{
    if (!e) return;
    if (e->lib) dlclose(e->lib);
    free(e);
}
