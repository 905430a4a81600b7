/* hps_kernel_kinds: what a kernel is told to apply, the element-wise
 * activation and the pooling of a bag of embedding rows.  The kernels own
 * these; the model (lib/model) names them in its files (hps_act_names,
 * hps_pool_names), so the kernels need not know the model. */
#ifndef HPS_KERNEL_KINDS_H
#define HPS_KERNEL_KINDS_H

typedef enum { HPS_ACT_NONE, HPS_ACT_RELU, HPS_ACT_SIGMOID, HPS_ACT_TANH } hps_act;
typedef enum { HPS_POOL_SUM, HPS_POOL_MEAN } hps_pool;

#endif
