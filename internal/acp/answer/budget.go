package answer

import "sync/atomic"

// DefaultMaxBytes is the default capacity of a gateway's Budget
// (limits.max_answer_bytes): 512 MiB of answer text held for
// outcomes, across all of its turns.
const DefaultMaxBytes = 512 << 20

// reserveStep is how much a turn reserves at a time: reserving per
// step rather than per chunk keeps the budget off the chunk path, which
// runs tens of thousands of times a second.
const reserveStep = 64 << 10

// Budget bounds the answer text that the turns of a gateway hold, all
// together, for the outcomes of the turns that complete. A turn keeping its
// text reserves bytes as the text grows and releases them when it ends; a
// turn whose reservation fails stops keeping the text (it keeps only the
// beginning a failure's partial output needs, as with omit_outcome_text),
// and its completed outcome omits the text, saying why.
//
// It is safe for concurrent use. A nil *Budget is unbounded.
type Budget struct {
	capacity int64
	used     atomic.Int64
}

// NewBudget is a budget of capacity bytes; DefaultMaxBytes when
// capacity is zero or negative.
func NewBudget(capacity int64) *Budget {
	if capacity <= 0 {
		capacity = DefaultMaxBytes
	}
	return &Budget{capacity: capacity}
}

// Capacity is the most the budget lends at once; 0 for a nil budget.
func (b *Budget) Capacity() int64 {
	if b == nil {
		return 0
	}
	return b.capacity
}

// Used is how much is reserved now.
func (b *Budget) Used() int64 {
	if b == nil {
		return 0
	}
	return b.used.Load()
}

// reserve takes n bytes if they fit within the capacity, and reports
// whether they did. A nil budget always has room.
func (b *Budget) reserve(n int64) bool {
	if b == nil {
		return true
	}
	for {
		used := b.used.Load()
		if used+n > b.capacity {
			return false
		}
		if b.used.CompareAndSwap(used, used+n) {
			return true
		}
	}
}

// release returns n reserved bytes.
func (b *Budget) release(n int64) {
	if b != nil && n != 0 {
		b.used.Add(-n)
	}
}
