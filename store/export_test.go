package store

// MigrationsBeforeFiles is the schema of versions 1 and 2, whose journals
// were rows, for a test of the move to files.
func MigrationsBeforeFiles() []string { return []string{schemaV1, schemaV2} }
