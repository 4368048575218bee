// The functions are inline in include/CReloadGateHeap.h; a C target needs one source file.
#include "CReloadGateHeap.h"
