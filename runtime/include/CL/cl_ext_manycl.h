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

#ifdef __cplusplus
}
#endif

#endif
