package store

// MigrationsBeforeFiles is the schema of versions 1 and 2, whose journals
// were rows, for a test of the move to files.
func MigrationsBeforeFiles() []string { return []string{schemaV1, schemaV2} }

// JournalDataPath is the file that holds a turn's events.
func (s *SQLite) JournalDataPath(turnID string) string {
	data, _ := s.files.paths(turnID)
	return data
}

// SettleWindow and SettleLag are journalcache.go's bounds, for its tests.
const (
	SettleWindow = settleWindow
	SettleLag    = settleLag
)
