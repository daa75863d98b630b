// A native library for the mppa_native test: plain C functions OpenCL C code may call.
extern "C" __attribute__((visibility("default"))) float mcl_test_native_cube(float x) { return x * x * x; }
