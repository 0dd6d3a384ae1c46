package store

import "time"

// How the SQL backends (sqlite, postgres) keep values both encode alike.
// One definition, so that a record written by one reads back as the other
// reads it, and a caller's value comes back as it gave it.

// NonNilBytes makes an absent byte slice an empty one: a driver would
// store nil as NULL, which the NOT NULL columns refuse and Get would hand
// back as nil where the caller gave an empty slice.
func NonNilBytes(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

// UnixNanoOrZero is t in unix nanoseconds, 0 for the zero time (whose
// UnixNano is not 0), so that "not suspended" reads back as the zero time.
func UnixNanoOrZero(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}
