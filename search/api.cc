// Placeholder: filled by the helper that owns it.
#include "search/api.h"
