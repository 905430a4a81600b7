/* A device's spec sheet (hps-profile(1), ESTIMATES): GPU and CPU fields, as
 * --estimate and --check-estimate read it. */
#include "fuzz.h"
#include "profile/hps_profile.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1); /* the reader's buffer ends in NUL, as hps_read_all's */
    memcpy(text, data, size);
    text[size] = '\0';
    hps_error err;
    hps_spec_sheet_parse("fuzz", text, size, &err);
    free(text);
    return 0;
}
