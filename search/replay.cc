// Placeholder: filled by the helper that owns it.
#include "search/replay.h"
