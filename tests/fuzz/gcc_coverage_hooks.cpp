// GCC's -fsanitize-coverage=trace-cmp also reports floating-point comparisons, which clang's
// libFuzzer runtime has no hooks for; they carry no useful signal for these parsers.
extern "C" {
void __sanitizer_cov_trace_cmpf(float, float) {}
void __sanitizer_cov_trace_cmpd(double, double) {}
}
