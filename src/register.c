/* register: see the runtime reference section of the same name. */
#include "internal.h"
