/* A profile (hps-profile(1)'s output): the one reader, then the set hps-plan
 * keeps, and the table hps-profile show prints from what was read. */
#include "fuzz.h"
#include "profile/hps_profile.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1); /* the reader's buffer ends in NUL, as hps_read_all's */
    memcpy(text, data, size);
    text[size] = '\0';
    hps_error err;
    hps_profile *p = hps_profile_parse("fuzz", text, size, &err);
    if (p) {
        FILE *null = fopen("/dev/null", "w");
        if (null) hps_profile_print_table(p, null), fclose(null);
    }
    hps_profile_free(p);
    hps_profiles *ps = hps_profiles_new();
    hps_profiles_add(ps, "fuzz", text, size, &err);
    hps_profiles_free(ps);
    free(text);
    return 0;
}
