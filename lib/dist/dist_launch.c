/* Whether this process is a rank of an mpirun job: MPI-free, so that builds
 * without Open MPI (make MPI=0) can tell the user what they ran. */
#include <stdlib.h>

#include "dist/hps_dist.h"

int hps_dist_launched(void)
{
    /* Open MPI's launcher sets these; one process alone stays MPI-free, so a
     * plain hps-train never starts a singleton runtime (slow, and noisy
     * under the sanitizers). */
    const char *size = getenv("OMPI_COMM_WORLD_SIZE");
    return size && atoi(size) > 1;
}
