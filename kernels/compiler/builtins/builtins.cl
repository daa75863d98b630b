// placeholder, replaced below
#ifndef MANYCL_GENERIC_ONLY
#define OVL __attribute__((overloadable))
float sinf(float);
float OVL sin(float x) { return sinf(x); }
#endif
