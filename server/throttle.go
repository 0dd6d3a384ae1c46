package server

import (
	"sync/atomic"
	"time"
)

// warnEvery spaces repeated warnings about one condition, so that a flood
// (of connections, of calls without requests) logs a line a minute, not a
// line per connection or call.
const warnEvery = time.Minute

// throttle lets a repeated warning through at most once per warnEvery.
type throttle struct {
	last atomic.Int64 // when the last warning was let through (UnixNano)
}

// allow reports whether a warning may be logged now.
func (t *throttle) allow() bool {
	now := time.Now().UnixNano()
	last := t.last.Load()
	return now-last >= int64(warnEvery) && t.last.CompareAndSwap(last, now)
}
