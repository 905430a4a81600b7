/* hps_cluster: the resource types one can rent, their links and nodes
 * (hps-cluster(5)), as hps-plan reads them. */
#ifndef HPS_CLUSTER_H
#define HPS_CLUSTER_H

#include <jansson.h>

#include "core/hps_core.h"
#include "model/hps_model.h" /* HPS_NAME_MAX */

#define PLAN_MAX_TYPES 16
#define PLAN_CLUSTER_VERSION 1
/* The cluster file's units: bandwidth in Gbit/s to bytes per millisecond,
 * memory in GiB. */
#define PLAN_GBPS_TO_BPMS 125000.0
#define PLAN_GIB 1073741824.0

typedef enum { PLAN_CPU, PLAN_GPU } plan_kind;

typedef struct {
    char name[HPS_NAME_MAX];
    plan_kind kind;
    char device[HPS_NAME_MAX]; /* the profile device it corresponds to */
    double price_per_hour;     /* dollars per unit and hour */
    /* Units come in instances: a type is rented units_per_instance units at a
     * time (8 A100 in a p4d.24xlarge), at price_per_hour x units_per_instance
     * the instance (default 1: the unit is the instance). */
    int units_per_instance;
    int max_units;
    double nic_gbps;
    double nic_latency_us; /* per message between two units (0 when not given) */
    double power_w; /* 0 when not given */
    int threads;    /* cores of one unit, pinned together by the rankfile (default 1) */
    int threads_given; /* the cluster gives threads: a CPU type's profiled times scale to them */
    /* Memory of one unit in bytes: host RAM for a CPU type, HBM for a GPU
     * type (0 when not given: not checked).  A GPU unit also brings host
     * RAM (a g4dn.xlarge: 1 T4 + 4 vCPUs + 16 GiB). */
    double mem_bytes, host_mem_bytes;
} plan_rtype;

typedef struct {
    int a, b; /* type indices; a link is symmetric */
    double gbps, latency_us;
} plan_link;

typedef struct {
    char name[HPS_NAME_MAX];
    int units[PLAN_MAX_TYPES];
} plan_node;

typedef struct {
    char *path, *name;
    char digest[72]; /* of the file's canonical JSON */
    int n_types, n_links, n_nodes;
    plan_rtype types[PLAN_MAX_TYPES];
    plan_link *links;
    plan_node *nodes;
    double server_gbps; /* NIC of one parameter server */
    int server_type;    /* the CPU type whose units host the servers; -1 when none */
} hps_cluster;

hps_cluster *hps_cluster_load(const char *path, hps_error *err);
hps_cluster *hps_cluster_parse(json_t *root, const char *name, hps_error *err);
void hps_cluster_free(hps_cluster *c);
int hps_cluster_find(const hps_cluster *c, const char *type_name); /* -1 if absent */

#endif
