/* A checkpoint file (hps-train(1), CHECKPOINTS), two ways in:
 *
 * - a whole file ("HPSCKPT2..."), as it is on disk;
 * - else its payload ("HPS1..."), which the target compresses and wraps in
 *   a header with its digest as the writer does: mutations then reach the
 *   payload's reader (the tables: hps_table_load) instead of stopping at
 *   zstd's frame checksum.
 *
 * It is loaded into a fresh trainer of the model its seeds were written for
 * (testdata's libsvm-logreg); once loaded, every row is looked up, and one
 * step trains on it; then the same into a trainer whose tables hold just
 * the rows loaded and evict, so that the step's new keys evict loaded rows.
 * A checkpoint of row-wise AdaGrad tables of fp16 rows (which the default
 * tables refuse) goes the same ways into such tables, which also admit keys
 * on their second lookup.  tests/fuzz/make-seeds.sh writes seeds of each. */
#include <zstd.h>

#include "core/hps_io.h"
#include "fuzz.h"
#include "model/hps_model.h"
#include "plan/hps_plan_file.h"
#include "train/hps_train.h"

#define HEADER 64 /* train_ckpt.c's layout */
#define DIGEST 24

static const char *wrap_payload(const uint8_t *data, size_t size)
{
    size_t cap = HEADER + ZSTD_compressBound(size);
    uint8_t *file = hps_calloc(1, cap);
    size_t got = ZSTD_compress(file + HEADER, cap - HEADER, data, size, 1);
    HPS_CHECK(!ZSTD_isError(got));
    uint64_t sizes[2] = {size, got};
    memcpy(file, "HPSCKPT2", 8);
    memcpy(file + 8, sizes, 16);
    hps_sha256(file, HEADER + got, file + DIGEST);
    const char *path = fuzz_scratch_path();
    FILE *f = fopen(path, "wb");
    HPS_CHECK(f && fwrite(file, 1, HEADER + got, f) == HEADER + got && fclose(f) == 0);
    free(file);
    return path;
}

/* The loaded rows, each found where it is (a checkpoint with two rows of one
 * key is refused), then a step on a batch of the model's keys. */
static int64_t drive(hps_trainer *t, const hps_model *m)
{
    int64_t rows = 0;
    for (int l = 0; l < m->n_layers; l++) {
        hps_table *tab = m->layers[l].kind == HPS_LAYER_EMBEDDING ? hps_trainer_table(t, l) : NULL;
        for (int64_t i = 0; tab && i < hps_table_rows(tab); i++) {
            int slot;
            uint64_t key;
            hps_table_row_key(tab, i, &slot, &key);
            HPS_CHECK(hps_table_find(tab, slot, key) == i);
        }
        if (tab && hps_table_rows(tab) > rows) rows = hps_table_rows(tab);
    }
    hps_batch *b = hps_batch_synth(m, 16, (uint64_t)rows);
    double loss;
    hps_error err;
    hps_trainer_step(t, b, &loss, &err);
    hps_batch_free(b);
    return rows;
}

static int64_t load(const hps_model *m, const plan_file *plan, const char *path, size_t max_table_bytes,
                    int rowwise)
{
    hps_error err;
    hps_train_opts o = hps_train_opts_default();
    o.threads = 1;
    o.max_table_bytes = max_table_bytes;
    o.rowwise_adagrad = rowwise;
    o.admit_after = rowwise ? 2 : 1;
    o.row_dtype = rowwise ? HPS_ROW_FP16 : HPS_ROW_FP32;
    o.table_policy = HPS_TABLE_FULL_EVICT;
    hps_trainer *t = hps_trainer_create(m, plan, &o, &err);
    HPS_CHECK(t);
    int64_t rows = hps_trainer_load_file(t, path, &err) == 0 ? drive(t, m) : -1;
    hps_trainer_free(t);
    return rows;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static hps_model *m;
    static plan_file plan; /* the trainer keeps a pointer to it */
    if (!m) {
        hps_error err;
        HPS_CHECK((m = hps_model_load(fuzz_testdata("models/libsvm-logreg.json"), &err)));
        hps_train_plan_single(m, &plan);
    }
    const char *path = size >= 8 && memcmp(data, "HPSCKPT2", 8) == 0 ? fuzz_path(data, size)
                                                                       : wrap_payload(data, size);
    for (int rowwise = 0; rowwise < 2; rowwise++) {
        int64_t rows = load(m, &plan, path, 0, rowwise);
        if (rows > 0)
            load(m, &plan, path,
                 (size_t)rows * hps_table_row_bytes(m->layers[0].dim, rowwise, rowwise ? HPS_ROW_FP16 : HPS_ROW_FP32) + 1 +
                     (rowwise ? hps_table_admission_bytes() : 0),
                 rowwise);
    }
    return 0;
}
