/* ManyCL vendor extensions. Functions end with the platform's ICD suffix "MCL" and are
 * reached with clGetExtensionFunctionAddressForPlatform(platform, "name"). */
#ifndef CL_EXT_MANYCL_H
#define CL_EXT_MANYCL_H

#include <CL/cl.h>

#ifdef __cplusplus
extern "C" {
#endif

/* cl_manycl_device_config: the simulated device's configuration (topology, memories, cost
 * model constants) as a JSON object, the same keys a MANYCL_DEVICES device file accepts.
 * For a sub-device, "clusters" is the sub-device's cluster count and "cluster_ids" lists
 * which of the root device's clusters it owns. Follows the clGet*Info size conventions. */
#define cl_manycl_device_config 1
typedef cl_int(CL_API_CALL *clGetDeviceConfigMCL_fn)(cl_device_id device, size_t param_value_size,
                                                     char *param_value, size_t *param_value_size_ret);

/* cl_manycl_command_stats: what the simulated device did for a command.
 * clGetEventInfo(event, CL_EVENT_COMMAND_STATS_MCL, ...) returns, once the command is
 * complete, a JSON object: modeled cycles and seconds (device time, not host time), host
 * wall seconds, DDR bytes read/written, NoC bytes, multicast savings, SPM high-water mark,
 * and the same per cluster. CL_PROFILING_INFO_NOT_AVAILABLE before completion and for
 * markers, barriers and user events.
 * clGetEventProfilingInfo(event, CL_PROFILING_MODELED_START_MCL / _END_MCL, ...) gives the
 * command's modeled start and end in nanoseconds of device time (queue needs profiling). */
#define cl_manycl_command_stats 1
#define CL_EVENT_COMMAND_STATS_MCL 0x4D430001
#define CL_PROFILING_MODELED_START_MCL 0x4D430010
#define CL_PROFILING_MODELED_END_MCL 0x4D430011

/* cl_manycl_native_library: registers a shared library (dlopen'ed once) whose exported C
 * functions OpenCL C programs may declare with __attribute__((mppa_native)) and call; builds
 * that call a function no registered library exports fail with a build-log line naming it.
 * kann program binaries with custom operators (manycl/native/custom.h) call their functions
 * from these libraries too: register them before creating such a program.
 * MANYCL_NATIVE_PATH=lib1.so:lib2.so does the same at start-up. CL_INVALID_VALUE when the
 * library cannot be loaded, CL_INVALID_PLATFORM for a bad platform. */
#define cl_manycl_native_library 1
typedef cl_int(CL_API_CALL *clAddNativeLibraryMCL_fn)(cl_platform_id platform, const char *path);

#ifdef __cplusplus
}
#endif

#endif
