package store

// DecodeParts exposes decodeParts to the external tests.
var DecodeParts = decodeParts
