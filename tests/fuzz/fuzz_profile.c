/* A profile (hps-profile(1)'s output), as hps-plan reads it. */
#include "fuzz.h"
#include "plan/hps_plan.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1); /* the reader's buffer ends in NUL, as hps_read_all's */
    memcpy(text, data, size);
    text[size] = '\0';
    hps_error err;
    hps_profiles *ps = hps_profiles_new();
    hps_profiles_add(ps, "fuzz", text, size, &err);
    hps_profiles_free(ps);
    free(text);
    return 0;
}
