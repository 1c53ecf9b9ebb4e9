#include "walship.h"

const char *ws_version(void) { return "0.1.0"; }
