/* Finding the spec sheet (hps-profile(1), --estimate) that names a device,
 * for the hint of a device no profile has.  Its own file because hps-plan's
 * problem reader calls it, and every tool that reads plans (hps-shard too)
 * must not link the device probes, and through them the CUDA libraries,
 * for it. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <jansson.h>
#include "core/hps_core.h"
#include "profile/hps_profile.h"

/* Reads only "name": a sheet that does not parse is no match, not an error. */
static int sheet_names(const char *path, const char *device)
{
    json_t *root = json_load_file(path, 0, NULL);
    const char *name = json_string_value(json_object_get(root, "name"));
    int same = name && strcmp(name, device) == 0;
    json_decref(root);
    return same;
}

static char *sheet_in(const char *dir, const char *device)
{
    DIR *d = opendir(dir);
    if (!d) return NULL;
    char *found = NULL;
    struct dirent *e;
    while (!found && (e = readdir(d))) {
        size_t n = strlen(e->d_name);
        if (n < 6 || strcmp(e->d_name + n - 5, ".json") != 0) continue;
        size_t len = strlen(dir) + n + 2;
        char *path = hps_malloc(len);
        snprintf(path, len, "%s/%s", dir, e->d_name);
        if (sheet_names(path, device)) found = path;
        else free(path);
    }
    closedir(d);
    return found;
}

char *hps_spec_sheet_find(const char *device, const char *near)
{
    char here[4096] = ".", up[4096] = "..";
    const char *slash = near ? strrchr(near, '/') : NULL;
    if (slash) snprintf(here, sizeof here, "%.*s", (int)(slash - near), near);
    const char *up_slash = strrchr(here, '/');
    if (up_slash) snprintf(up, sizeof up, "%.*s", (int)(up_slash - here), here);
    else if (slash && strcmp(here, ".") != 0 && strcmp(here, "..") != 0) snprintf(up, sizeof up, ".");
    char dirs[4][4200];
    snprintf(dirs[0], sizeof dirs[0], "%s/devices", up);
    snprintf(dirs[1], sizeof dirs[1], "%s/devices", here);
    snprintf(dirs[2], sizeof dirs[2], "devices");
    snprintf(dirs[3], sizeof dirs[3], "testdata/devices");
    for (int i = 0; i < 4; i++) {
        if (strncmp(dirs[i], "./", 2) == 0) memmove(dirs[i], dirs[i] + 2, strlen(dirs[i] + 2) + 1);
        char *path = sheet_in(dirs[i], device);
        if (path) return path;
    }
    return NULL;
}
