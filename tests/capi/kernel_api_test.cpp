// Kernels and variants through the C ABI (capi/kernel_api.cpp, capi/kernel_desc.cpp): defining
// from a string, preparing without a GPU, and every bad argument a status and a message.
#include "capi_test_support.h"

#include <dlfcn.h>

#include <string>

using namespace specjit::test;

TEST_CASE("preparing 1000 token counts of a dynamic parameter compiles once") {
  CapiEngine engine;
  specjit_kernel* kernel = define_scale(engine.get());
  const specjit_variant* first = nullptr;
  for (int64_t tokens = 1; tokens <= 1000; ++tokens) {
    const int64_t values[] = {tokens, 32};
    const specjit_variant* variant = nullptr;
    REQUIRE_OK(specjit_kernel_prepare(kernel, values, 2, &variant));
    if (first == nullptr)
      first = variant;
    CHECK(variant == first); // one variant, one handle
  }
  specjit_stats stats = engine.stats();
  CHECK(stats.compiles == 1);
  CHECK(stats.memory_hits == 999);
  CHECK(stats.requests == 1000);
  CHECK(events_named(read_json_lines(engine.log()), "compile", "scale_rows").size() == 1);

  specjit_variant_info info = sized<specjit_variant_info>();
  REQUIRE_OK(specjit_variant_get_info(first, &info));
  CHECK(std::string(info.kernel) == "scale_rows");
  CHECK(std::string(info.name_expression) == "scale_rows<32>");
  CHECK(std::string(info.key).size() == 32);
  CHECK(std::string(info.variant_json).find("\"COLS\":32") != std::string::npos);
  CHECK(info.source == 0); // compiled
  CHECK(info.registers > 0);
  CHECK(info.compile_ms > 0);
}

TEST_CASE("an exact parameter gives one variant per value; defining again gives the same kernel") {
  CapiEngine engine;
  specjit_kernel* kernel = define_scale(engine.get());
  CHECK(define_scale(engine.get()) == kernel);
  const int64_t a[] = {7, 32}, b[] = {7, 64};
  const specjit_variant *va = nullptr, *vb = nullptr;
  REQUIRE_OK(specjit_kernel_prepare(kernel, a, 2, &va));
  REQUIRE_OK(specjit_kernel_prepare(kernel, b, 2, &vb));
  CHECK(va != vb);
  CHECK(engine.stats().compiles == 2);
}

TEST_CASE("a kernel description is checked field by field") {
  CapiEngine engine;
  specjit_kernel* kernel = nullptr;
  specjit_kernel_desc desc = scale_desc(k_scale_params);
  CHECK_STATUS(specjit_kernel_define(engine.get(), nullptr, &kernel),
               SPECJIT_ERROR_INVALID_ARGUMENT);
  CHECK(last_error_has("desc is NULL"));
  CHECK_STATUS(specjit_kernel_define(engine.get(), &desc, nullptr),
               SPECJIT_ERROR_INVALID_ARGUMENT);
  CHECK(last_error_has("out is NULL"));

  auto refused = [&](specjit_kernel_desc bad, const char* message) {
    kernel = reinterpret_cast<specjit_kernel*>(&bad); // overwritten with NULL on failure
    CHECK_STATUS(specjit_kernel_define(engine.get(), &bad, &kernel),
                 SPECJIT_ERROR_INVALID_ARGUMENT);
    CHECK_MESSAGE(last_error_has(message), std::string(specjit_last_error()));
    CHECK(kernel == nullptr);
  };
  specjit_kernel_desc bad = desc;
  bad.struct_size = sizeof(size_t);
  refused(bad, "desc->struct_size is 8");
  bad = desc;
  bad.id = nullptr;
  refused(bad, "desc->id is NULL");
  bad = desc;
  bad.id = "has space";
  refused(bad, "must be a plain identifier");
  bad = desc;
  bad.function = nullptr;
  refused(bad, "desc->function is NULL");
  bad = desc;
  bad.source_text = nullptr;
  refused(bad, "desc->source_text is NULL");
  bad = desc;
  bad.source_kind = 7;
  refused(bad, "source_kind 7 is not a specjit_source_kind");
  bad = desc;
  bad.params = nullptr;
  refused(bad, "desc->params is NULL but param_count is 2");
  const specjit_param bad_policy[2] = {{"num_tokens", "sometimes"}, {"COLS", "exact"}};
  bad = scale_desc(bad_policy);
  refused(bad, "parameter 'num_tokens'");
  const specjit_param null_name[2] = {{nullptr, "dynamic"}, {"COLS", "exact"}};
  bad = scale_desc(null_name);
  refused(bad, "desc->params[0].name is NULL");
  const specjit_param twice[2] = {{"COLS", "dynamic"}, {"COLS", "exact"}};
  bad = scale_desc(twice);
  refused(bad, "declared twice");
  const char* include_option[] = {"-I/usr/include"};
  bad = desc;
  bad.options = include_option;
  bad.option_count = 1;
  refused(bad, "option '-I/usr/include' is set by specjit");
  bad = desc;
  bad.option_count = 1; // options NULL
  refused(bad, "desc->options is NULL but its count is 1");
  bad = desc;
  bad.header_count = 2;
  refused(bad, "desc->headers is NULL but header_count is 2");
}

TEST_CASE("a missing source file is SPECJIT_ERROR_NOT_FOUND") {
  CapiEngine engine;
  specjit_kernel_desc desc = scale_desc(k_scale_params);
  desc.source_kind = SPECJIT_SOURCE_FILE;
  desc.source_name = "/nonexistent/scale_rows.cu";
  desc.source_text = nullptr;
  specjit_kernel* kernel = nullptr;
  CHECK_STATUS(specjit_kernel_define(engine.get(), &desc, &kernel), SPECJIT_ERROR_NOT_FOUND);
  CHECK(last_error_has("/nonexistent/scale_rows.cu"));
}

TEST_CASE("NVRTC's rejection is SPECJIT_ERROR_COMPILE with its log, and nothing is cached") {
  CapiEngine engine;
  specjit_kernel_desc desc = scale_desc(k_scale_params);
  desc.id = "broken";
  desc.source_text = "template <int COLS> __global__ void scale_rows(int n) { undeclared(); }";
  specjit_kernel* kernel = nullptr;
  REQUIRE_OK(specjit_kernel_define(engine.get(), &desc, &kernel));
  const int64_t values[] = {1, 32};
  const specjit_variant* variant = nullptr;
  CHECK_STATUS(specjit_kernel_prepare(kernel, values, 2, &variant), SPECJIT_ERROR_COMPILE);
  CHECK(last_error_has("undeclared"));
  CHECK(variant == nullptr);
  CHECK(engine.stats().failures == 1);
}

TEST_CASE("values are checked: count, NULL, range") {
  CapiEngine engine;
  specjit_kernel* kernel = define_scale(engine.get());
  const specjit_variant* variant = nullptr;
  const int64_t values[] = {1, 32, 5};
  CHECK_STATUS(specjit_kernel_prepare(kernel, values, 3, &variant),
               SPECJIT_ERROR_INVALID_ARGUMENT);
  CHECK(last_error_has("kernel scale_rows takes 2 values, got 3"));
  CHECK_STATUS(specjit_kernel_get(kernel, values, 1, &variant), SPECJIT_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(specjit_kernel_prepare(kernel, nullptr, 2, &variant),
               SPECJIT_ERROR_INVALID_ARGUMENT);
  CHECK(last_error_has("values is NULL"));
  CHECK_STATUS(specjit_kernel_prepare(kernel, values, 2, nullptr), SPECJIT_ERROR_INVALID_ARGUMENT);
  const int64_t negative[] = {-1, 32};
  CHECK_STATUS(specjit_kernel_prepare(kernel, negative, 2, &variant),
               SPECJIT_ERROR_INVALID_ARGUMENT);
  CHECK(last_error_has("num_tokens"));
  CHECK_STATUS(specjit_kernel_prepare(nullptr, values, 2, &variant),
               SPECJIT_ERROR_INVALID_ARGUMENT);
  CHECK(last_error_has("kernel is NULL"));
  CHECK_STATUS(specjit_kernel_prepare(reinterpret_cast<specjit_kernel*>(engine.get()), values, 2,
                                      &variant),
               SPECJIT_ERROR_INVALID_ARGUMENT);
  CHECK(last_error_has("kernel is a specjit_engine"));
  CHECK(engine.stats().compiles == 0);
}

TEST_CASE("launches check the configuration and arguments before anything else") {
  CapiEngine engine;
  specjit_kernel* kernel = define_scale(engine.get());
  const int64_t values[] = {4, 32};
  const specjit_variant* variant = nullptr;
  REQUIRE_OK(specjit_kernel_prepare(kernel, values, 2, &variant));
  float* x = nullptr;
  int tokens = 4;
  void* args[] = {&x, &x, &tokens, &tokens};
  size_t sizes[] = {8, 8, 4, 4};
  specjit_launch_config config = {sizeof config, {1, 1, 1}, {128, 1, 1}, 0, nullptr};

  CHECK_STATUS(specjit_kernel_launch(kernel, values, 2, nullptr, args, sizes, 4),
               SPECJIT_ERROR_INVALID_ARGUMENT);
  CHECK(last_error_has("config is NULL"));
  specjit_launch_config small = config;
  small.struct_size = 16;
  CHECK_STATUS(specjit_kernel_launch(kernel, values, 2, &small, args, sizes, 4),
               SPECJIT_ERROR_INVALID_ARGUMENT);
  CHECK(last_error_has("config->struct_size is 16"));
  specjit_launch_config empty = config;
  empty.grid[1] = 0;
  CHECK_STATUS(specjit_kernel_launch(kernel, values, 2, &empty, args, sizes, 4),
               SPECJIT_ERROR_INVALID_ARGUMENT);
  CHECK(last_error_has("config->grid[1] is 0"));
  CHECK_STATUS(specjit_kernel_launch(kernel, values, 2, &config, nullptr, sizes, 4),
               SPECJIT_ERROR_INVALID_ARGUMENT);
  CHECK(last_error_has("args is NULL but arg_count is 4"));
  void* null_arg[] = {&x, nullptr, &tokens, &tokens};
  CHECK_STATUS(specjit_kernel_launch(kernel, values, 2, &config, null_arg, sizes, 4),
               SPECJIT_ERROR_INVALID_ARGUMENT);
  CHECK(last_error_has("args[1] is NULL"));
  CHECK_STATUS(specjit_kernel_launch(kernel, nullptr, 2, &config, args, sizes, 4),
               SPECJIT_ERROR_INVALID_ARGUMENT);
  // A prepared variant has no module: launching it names the problem.
  CHECK_STATUS(specjit_variant_launch(variant, &config, args, sizes, 4),
               SPECJIT_ERROR_INVALID_ARGUMENT);
  CHECK(last_error_has("is not loaded"));
  CHECK_STATUS(specjit_variant_launch(nullptr, &config, args, sizes, 4),
               SPECJIT_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(specjit_variant_launch(reinterpret_cast<const specjit_variant*>(kernel), &config,
                                      args, sizes, 4),
               SPECJIT_ERROR_INVALID_ARGUMENT);
  CHECK(last_error_has("variant is a specjit_kernel"));
  specjit_variant_info info = sized<specjit_variant_info>();
  info.struct_size = 4;
  CHECK_STATUS(specjit_variant_get_info(variant, &info), SPECJIT_ERROR_INVALID_ARGUMENT);
}

TEST_CASE("without a driver, get and launch are SPECJIT_ERROR_DRIVER") {
  if (void* driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL)) {
    dlclose(driver);
    MESSAGE("a CUDA driver is installed: the driver-less case does not apply");
    return;
  }
  CapiEngine engine;
  specjit_kernel* kernel = define_scale(engine.get());
  const int64_t values[] = {4, 32};
  const specjit_variant* variant = nullptr;
  CHECK_STATUS(specjit_kernel_get(kernel, values, 2, &variant), SPECJIT_ERROR_DRIVER);
  CHECK(last_error_has("libcuda"));
  specjit_launch_config config = {sizeof config, {1, 1, 1}, {128, 1, 1}, 0, nullptr};
  CHECK_STATUS(specjit_kernel_launch(kernel, values, 2, &config, nullptr, nullptr, 0),
               SPECJIT_ERROR_DRIVER);
}

TEST_CASE("variants of a destroyed engine are refused") {
  const specjit_variant* variant = nullptr;
  {
    CapiEngine engine;
    specjit_kernel* kernel = define_scale(engine.get());
    const int64_t values[] = {4, 32};
    REQUIRE_OK(specjit_kernel_prepare(kernel, values, 2, &variant));
  }
  specjit_variant_info info = sized<specjit_variant_info>();
  CHECK_STATUS(specjit_variant_get_info(variant, &info), SPECJIT_ERROR_INVALID_ARGUMENT);
  CHECK(last_error_has("a variant of a destroyed engine"));
}
