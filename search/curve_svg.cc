// Placeholder: filled by the helper that owns it.
#include "search/curve_svg.h"
