package store

// DecodeParts exposes decodeParts to the external tests.
var DecodeParts = decodeParts

// HotStatements is how many statements afterConnect prepares.
var HotStatements = len(hotSQL)
