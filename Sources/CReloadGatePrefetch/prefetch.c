// The function is inline in include/CReloadGatePrefetch.h; a C target needs one source file.
#include "CReloadGatePrefetch.h"
