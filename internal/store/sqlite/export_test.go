package sqlite

// MigrationsBeforeFiles is the schema of versions 1 and 2, whose journals
// were rows, for a test of the move to files.
func MigrationsBeforeFiles() []string { return []string{schemaV1, schemaV2} }

// JournalDataPath is the file that holds a turn's events.
func (s *Store) JournalDataPath(turnID string) string {
	data, _ := s.files.paths(turnID)
	return data
}

// SettleWindow and SettleLag are journalcache.go's bounds, for its tests.
const (
	SettleWindow = settleWindow
	SettleLag    = settleLag
)

// SettleAfterClose stops the store's settler, as Close does, and then
// asks it to settle a turn's journal: what a settler in the middle of a
// long journal meets at its next window.
func SettleAfterClose(s *Store, turnID string) {
	s.files.settler.close()
	s.files.settler.settleEnded(turnID)
}

// MaxRunningJournals is the bound of journals whose files the SQLite store
// keeps open, for its test.
const MaxRunningJournals = maxRunningJournals
