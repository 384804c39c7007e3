// Placeholder: host object-file emission (filled by its owner).
