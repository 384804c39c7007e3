// Placeholder: filled by the helper that owns it.
#pragma once
