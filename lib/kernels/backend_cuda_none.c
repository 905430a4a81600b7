/* The CUDA entry points of a build without CUDA (make CUDA=0, or no nvcc). */
#ifndef HPS_CUDA

#include "kernels/hps_backend.h"

const hps_backend *hps_backend_cuda(int device, hps_error *err)
{
    hps_fail(err, HPS_EXIT_RUNTIME, "cuda:%d: this hps was built without CUDA (make CUDA=1)",
             device);
    return NULL;
}

int hps_cuda_device_count(void) { return 0; }

int hps_cuda_device_info(int device, char *name, size_t name_len, double *mem_bytes)
{
    (void)device, (void)name, (void)name_len, (void)mem_bytes;
    return -1;
}

#else
typedef int hps_cuda_none_unused; /* ISO C forbids an empty translation unit */
#endif
