package store

import (
	"cmp"
	"strings"
)

// PositionOf is t's place in List's order.
func PositionOf(t Turn) Position { return Position{StartedAt: t.StartedAt, ID: t.ID} }

// ComparePositions orders positions by StartedAt, then by ID: List returns
// turns in the reverse of this order.
func ComparePositions(a, b Position) int {
	if c := a.StartedAt.Compare(b.StartedAt); c != 0 {
		return c
	}
	return cmp.Compare(strings.Compare(a.ID, b.ID), 0)
}
