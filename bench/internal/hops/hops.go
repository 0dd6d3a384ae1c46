// Package hops reads an execution trace of acpgate (`acpgate serve --trace
// FILE`) and finds where its goroutines waited to run. At a paced rate a
// chunk costs the gateway little CPU; its latency is mostly the time each
// goroutine on its path spends runnable before a thread runs it, once per
// hand-off from one goroutine to the next, which a CPU profile does not show
// at all. Summary.Table groups every such wait by the calls that made the
// goroutine runnable (see wakeSite), so each hand-off on a chunk's path is
// one row, with the distribution of its waits. `acpbench hops` prints it.
package hops

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"

	"golang.org/x/exp/trace"
)

// Summary is what Read found in a trace.
type Summary struct {
	waits        map[string][]int64 // by the calls that woke the goroutine: each wait, ns
	gcs          int                // collection cycles begun
	stws         int                // stop-the-world pauses
	stwNanos     int64
	traceSeconds float64
}

// Wake sites that are not a goroutine's call.
const (
	siteCreated = "(created)"
	siteSyscall = "(returned from a system call)"
	siteUnknown = "(no stack: the network poller, a timer)"
)

// Read reads a trace and measures, for every goroutine made runnable,
// the time until it ran.
func Read(r io.Reader) (*Summary, error) {
	tr, err := trace.NewReader(r)
	if err != nil {
		return nil, err
	}
	type pending struct {
		at   trace.Time
		site string
	}
	runnable := map[trace.GoID]pending{}
	h := &Summary{waits: map[string][]int64{}}
	var first, last trace.Time
	var stwStart trace.Time
	for {
		ev, err := tr.ReadEvent()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		if first == 0 {
			first = ev.Time()
		}
		last = ev.Time()
		switch ev.Kind() {
		case trace.EventStateTransition:
			st := ev.StateTransition()
			if st.Resource.Kind != trace.ResourceGoroutine {
				continue
			}
			id := st.Resource.Goroutine()
			from, to := st.Goroutine()
			if to == trace.GoRunnable && from != trace.GoRunnable {
				var site string
				switch from {
				case trace.GoWaiting:
					site = wakeSite(ev.Stack())
				case trace.GoSyscall:
					site = siteSyscall
				case trace.GoRunning:
					site = "(yielded or preempted) " + wakeSite(st.Stack)
				default:
					site = siteCreated
				}
				runnable[id] = pending{ev.Time(), site}
			}
			if to == trace.GoRunning {
				if p, ok := runnable[id]; ok {
					h.waits[p.site] = append(h.waits[p.site], int64(ev.Time()-p.at))
					delete(runnable, id)
				}
			}
		case trace.EventRangeBegin:
			switch name := ev.Range().Name; {
			case strings.HasPrefix(name, "stop-the-world"):
				h.stws++
				stwStart = ev.Time()
			case name == "GC concurrent mark phase":
				h.gcs++
			}
		case trace.EventRangeEnd:
			if strings.HasPrefix(ev.Range().Name, "stop-the-world") && stwStart != 0 {
				h.stwNanos += int64(ev.Time() - stwStart)
				stwStart = 0
			}
		}
	}
	h.traceSeconds = float64(last-first) / 1e9
	return h, nil
}

// wakeSite names the innermost call outside the runtime on a stack, and
// the call that led to it: the innermost of the gateway's own calls below
// it, or, on a stack with none, the innermost call of another package. A
// hand-off through gRPC's transport is then told apart by who sent.
func wakeSite(st trace.Stack) string {
	var inner, inPkg string
	var other, own string
	for f := range st.Frames() {
		if strings.HasPrefix(f.Func, "runtime.") || strings.HasPrefix(f.Func, "internal/") || strings.HasPrefix(f.Func, "sync.") {
			continue
		}
		slash := strings.LastIndex(f.Func, "/") + 1
		name, pkg := f.Func[slash:], f.Func
		if dot := strings.IndexByte(name, '.'); dot >= 0 {
			pkg = f.Func[:slash+dot]
		}
		if inner == "" {
			inner, inPkg = name, pkg
			continue
		}
		if other == "" && pkg != inPkg {
			other = name
		}
		if strings.HasPrefix(f.Func, gatewayModule) {
			own = name
			break
		}
	}
	switch {
	case inner == "":
		return siteUnknown
	case own != "":
		return inner + " ← " + own
	case other != "":
		return inner + " ← " + other
	}
	return inner
}

// gatewayModule prefixes the gateway's own functions.
const gatewayModule = "github.com/acpgate/acpgate/"

// Table renders the top rows by total wait.
func (h *Summary) Table(top int) string {
	type row struct {
		site  string
		waits []int64
		total int64
	}
	var rows []row
	for site, w := range h.waits {
		w = slices.Clone(w)
		slices.Sort(w)
		var total int64
		for _, x := range w {
			total += x
		}
		rows = append(rows, row{site, w, total})
	}
	slices.SortFunc(rows, func(a, b row) int { return cmp.Compare(b.total, a.total) })
	var b strings.Builder
	fmt.Fprintf(&b, "%.2f s traced; %d collection cycles; %d stop-the-world pauses, %d µs in all\n\n", h.traceSeconds, h.gcs, h.stws, h.stwNanos/1000)
	b.WriteString("| woken by | waits | total | p50 | p90 | p99 | max |\n|---|---|---|---|---|---|---|\n")
	for _, r := range rows[:min(top, len(rows))] {
		q := func(p float64) int64 { return r.waits[min(len(r.waits)-1, int(p*float64(len(r.waits))))] / 1000 }
		fmt.Fprintf(&b, "| %s | %d | %d µs | %d µs | %d µs | %d µs | %d µs |\n", r.site, len(r.waits), r.total/1000, q(.50), q(.90), q(.99), r.waits[len(r.waits)-1]/1000)
	}
	return b.String()
}
