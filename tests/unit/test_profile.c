/* The profile reader (hps-profile(5)): what it reads from testdata, and the
 * fields it refuses, each named by file, device, layer and field. */
#include <string.h>

#include "hps_test.h"
#include "core/hps_json.h"
#include "profile/hps_profile.h"

#define TINY HPS_TESTDATA "/profiles/tiny.json"

static void test_reads_testdata(void **state)
{
    (void)state;
    hps_error err;
    hps_profile *p = hps_profile_load(TINY, &err);
    if (!p) fail_msg("%s", err.msg);
    assert_string_equal(p->name, TINY); /* as given */
    assert_int_equal(p->batch, 8);
    assert_int_equal(p->n_layers, 5);
    assert_true(p->n_devices >= 1);
    const hps_profile_device *d = &p->devices[0];
    assert_ptr_equal(hps_profile_device_find(p, d->id), d);
    assert_null(hps_profile_device_find(p, "no-such-device"));
    assert_int_equal(d->n_layers, 5);
    assert_true(d->layers[0].forward_ms > 0);
    assert_int_equal(d->layers[0].scaling.n, 2);
    assert_int_equal(d->layers[0].scaling.units[1], 2);
    assert_int_equal(d->layers[0].batch_scaling.n, 0); /* profiled before it: none */
    assert_false(d->exchange.present);
    hps_profile_free(p);
}

/* tiny.json with one field of its first device (or of the device's layer 1)
 * set to `value` (JSON text); the reader's error. */
static const char *refused(const char *field, const char *value, int in_layer)
{
    static hps_error err;
    json_t *doc, *v = json_loads(value, JSON_DECODE_ANY, NULL);
    assert_int_equal(hps_json_load(TINY, &doc, &err), 0);
    json_t *dev = json_array_get(json_object_get(doc, "devices"), 0);
    json_object_set_new(in_layer ? json_array_get(json_object_get(dev, "layers"), 1) : dev, field, v);
    hps_profile *p = hps_profile_read(doc, "p.json", &err);
    json_decref(doc);
    if (p) {
        hps_profile_free(p);
        return "";
    }
    return err.msg;
}

static void test_refuses_each_field_once(void **state)
{
    (void)state;
    /* what the planner alone refused before, now every reader */
    assert_string_equal(refused("batch_scaling", "{\"units\": [1], \"fixed_fraction\": [1.5]}", 1),
                        "p.json: device 'cpu': layer 1 'concat': batch_scaling: fixed_fraction[0] must be a number in [0, 1]");
    assert_string_equal(refused("scaling", "{\"units\": [1, 2], \"ms\": [1], \"parallel_fraction\": 0.5}", 1),
                        "p.json: device 'cpu': layer 1 'concat': scaling: units and ms must be arrays of one length");
    assert_string_equal(refused("handoff_us", "-3", 0), "p.json: device 'cpu': handoff_us=-3 must be in [0, 1e+06]");
    assert_string_equal(refused("exchange", "5", 0), "p.json: device 'cpu': exchange: must be an object or null");
    /* a string read as 0 before; now refused as handoff_us always was */
    assert_string_equal(refused("pcie_gbps", "\"fast\"", 0), "p.json: device 'cpu': pcie_gbps must be a number");
    assert_string_equal(refused("triad_gbps", "\"fast\"", 0), "p.json: device 'cpu': triad_gbps must be a number");
    assert_string_equal(refused("threads", "\"two\"", 0),
                        "p.json: device 'cpu': threads must be an integer in [0, 1048576]");
    /* null stays "not measured" */
    assert_string_equal(refused("pcie_gbps", "null", 0), "");
    assert_string_equal(refused("handoff_us", "null", 0), "");
    assert_string_equal(refused("exchange", "null", 0), "");
}

static void test_set_refuses_a_device_twice(void **state)
{
    (void)state;
    hps_error err;
    char *text;
    size_t len;
    assert_int_equal(hps_json_read(TINY, &text, &len, &err), 0);
    hps_profiles *ps = hps_profiles_new();
    assert_int_equal(hps_profiles_add(ps, "tiny.json", text, len, &err), 0);
    assert_int_equal(hps_profiles_add(ps, "again.json", text, len, &err), -1);
    assert_string_equal(err.msg, "again.json: device 'cpu' is also in tiny.json");
    const hps_profile *in;
    assert_non_null(hps_profiles_find(ps, "cpu", &in));
    assert_string_equal(in->name, "tiny.json");
    assert_int_equal(hps_profiles_count(ps), 1);
    assert_int_equal(strncmp(hps_profiles_digest(ps, 0), "sha256:", 7), 0);
    hps_profiles_free(ps);
    free(text);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reads_testdata),
        cmocka_unit_test(test_refuses_each_field_once),
        cmocka_unit_test(test_set_refuses_a_device_twice),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
