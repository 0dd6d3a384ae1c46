package sqlite_test

import (
	"database/sql"

	_ "modernc.org/sqlite"
)

// sqlOpen opens a database file directly, bypassing the store, to tamper
// with it.
func sqlOpen(path string) (*sql.DB, error) { return sql.Open("sqlite", path) }
