package report

import (
	"fmt"
	"math"

	"github.com/acpgate/acpgate/bench/internal/job"
)

// The paths of a turn on a session, and the stores of the journal
// comparison: the keys of the section's runs.
const (
	PathLocal     = "local"
	PathForwarded = "forwarded"
	StoreSQLite   = "sqlite"
	StorePostgres = "postgres"
)

// ClusterResult is what the cluster section measured.
type ClusterResult struct {
	// Postgres is the server's version.
	Postgres string `json:"postgres"`
	// Local and Forwarded are the times to first chunk (ns) of Prompt
	// turns on a session that replica a runs, sent to a and to b, one
	// after the other, alternating which goes first.
	Local     []float64 `json:"local"`
	Forwarded []float64 `json:"forwarded"`
	// TTFCErrors counts the turns of that measurement that failed.
	TTFCErrors     int    `json:"ttfc_errors"`
	TTFCFirstError string `json:"ttfc_first_error,omitempty"`
	// TTFCForeign is the CPU, in cores, that processes other than the
	// harness's used on average while those turns ran.
	TTFCForeign float64 `json:"ttfc_foreign"`
	// Flood is the unpaced flood run by gateway-stream: on the session
	// (Session, by path) and as one-shot turns on each store (Journal, by
	// store).
	Flood   Shape                   `json:"flood"`
	Session map[string][]job.Result `json:"session"`
	Journal map[string][]job.Result `json:"journal"`
	// JournalServerCPU is the CPU time (ns) PostgreSQL's processes used
	// while the unpaced journal runs ran, those of both stores (it is all
	// but idle during the sqlite ones): the server's share of a postgres
	// journal, which acpgate's CPU does not include.
	JournalServerCPU int64 `json:"journal_server_cpu"`
	// Paced is gateway-stream at PacedRate on each store.
	PacedRate int                     `json:"paced_rate"`
	PacedN    int                     `json:"paced_n"`
	Paced     map[string][]job.Result `json:"paced"`
}

// clusterVerdicts are the figures for several replicas.
func (r *Report) clusterVerdicts() []verdict {
	c := r.Cluster
	ttfc := verdict{Figure: "forwarded `Prompt` on a session: added latency to first chunk over the same call on the owner, p50 / p99", Target: "stated; every turn completes"}
	flood := verdict{Figure: "64 B streaming flood on a session: forwarded / local", Target: "≥ 0.7, zero loss"}
	journal := verdict{Figure: "64 B streaming flood, one-shot: `store: postgres` / `store: sqlite`", Target: "stated, zero loss"}
	paced := verdict{Figure: "paced 20,000 chunks/s, gateway-stream: p99 latency with `store: postgres` and `store: sqlite`", Target: "stated"}
	if c == nil {
		return []verdict{ttfc, flood, journal, paced}
	}
	if l, f := Quantiles(c.Local), Quantiles(c.Forwarded); l != nil && f != nil {
		ttfc.Known = true
		ttfc.Measured = fmt.Sprintf("%s / %s (forwarded p50 %s, p99 %s; local p50 %s, p99 %s; %d turns each, %d failed)",
			fmtSigned(f.P50-l.P50), fmtSigned(f.P99-l.P99), FmtDur(f.P50), FmtDur(f.P99), FmtDur(l.P50), FmtDur(l.P99), len(c.Forwarded), c.TTFCErrors)
		ttfc.Met = c.TTFCErrors == 0
	}
	ratioVerdict := func(v *verdict, runs map[string][]job.Result, num, den string, want float64) {
		a, b := runs[num], runs[den]
		rat := ratios(a, b, job.Result.Rate)
		if len(rat) == 0 {
			return
		}
		lost, ooo, _ := lostOf(append(append([]job.Result{}, a...), b...))
		errs := len(a) + len(b) - len(oks(a, job.Result.Rate)) - len(oks(b, job.Result.Rate))
		v.Known = true
		v.Measured = fmt.Sprintf("%s (%s %s, %s %s chunks/s); %d lost, %d out of order, %d failed runs", mmm(rat, fmtRatio),
			num, FmtInt(Median(oks(a, job.Result.Rate))), den, FmtInt(Median(oks(b, job.Result.Rate))), lost, ooo, errs)
		v.Met = Median(rat) >= want && lost == 0 && ooo == 0 && errs == 0
	}
	flood.Figure = fmt.Sprintf("%s streaming flood on a session: forwarded / local", size(c.Flood.Size))
	ratioVerdict(&flood, c.Session, PathForwarded, PathLocal, 0.7)
	journal.Figure = fmt.Sprintf("%s streaming flood, one-shot: `store: postgres` / `store: sqlite`", size(c.Flood.Size))
	ratioVerdict(&journal, c.Journal, StorePostgres, StoreSQLite, 0)
	paced.Figure = fmt.Sprintf("paced %s chunks/s, gateway-stream: p99 latency with `store: postgres` and `store: sqlite`", FmtInt(float64(c.PacedRate)))
	pg, sq := c.Paced[StorePostgres], c.Paced[StoreSQLite]
	if m, s := Median(oks(pg, p99)), Median(oks(sq, p99)); !math.IsNaN(m) && !math.IsNaN(s) {
		paced.Known = true
		paced.Measured = fmt.Sprintf("postgres %s, sqlite %s (postgres − sqlite, run by run: %s)", FmtDurF(m), FmtDurF(s), mmm(p99Diffs(pg, sq), FmtDurF))
		paced.Met = len(oks(pg, p99)) == len(pg) && len(oks(sq, p99)) == len(sq)
	}
	return []verdict{ttfc, flood, journal, paced}
}

func (r *Report) clusterMD(w func(string, ...any)) {
	c := r.Cluster
	if c == nil {
		return
	}
	w("## Several replicas on one PostgreSQL\n\n")
	w("The harness starts one PostgreSQL, %s, from Debian's binaries in a temporary directory (through `internal/testpg`: `fsync`, `synchronous_commit` and `full_page_writes` off, since the data is thrown away; a production server syncing its WAL to a disk on another host costs more per commit than this). Two replicas, a and b, run with `store: postgres` on one database and a `cluster:` block each (`advertise` on loopback, a shared `secret_file`). A session is opened through a, which runs its agent; each of its turns is sent either to a, the owner (**local**), or to b, which relays the call to a over gRPC and a's events back to the client (**forwarded**).\n\n", c.Postgres)

	l, f := Quantiles(c.Local), Quantiles(c.Forwarded)
	if l != nil && f != nil {
		w("### Time to first chunk of a `Prompt` on a session\n\n")
		w("%d turns through each replica, one after the other, alternating which goes first, each the test agent's `chunk hello` then `end_turn`; from the call (the client's connection already open) to the first chunk in hand.\n\n", len(c.Forwarded))
		w("| path | p50 | p99 | max | turns |\n|---|---|---|---|---|\n")
		w("| local: sent to a, the owner | %s | %s | %s | %d |\n", FmtDur(l.P50), FmtDur(l.P99), FmtDur(l.Max), l.Count)
		w("| forwarded: sent to b, relayed to a | %s | %s | %s | %d |\n", FmtDur(f.P50), FmtDur(f.P99), FmtDur(f.Max), f.Count)
		w("\nAdded latency of a forwarded `Prompt` (forwarded − local): **p50 %s, p99 %s**", fmtSigned(f.P50-l.P50), fmtSigned(f.P99-l.P99))
		if c.TTFCErrors > 0 {
			w("; %d turns failed, first: `%s`", c.TTFCErrors, shortErr(c.TTFCFirstError))
		}
		w(". Other processes on the machine used %.2f cores on average while these turns ran.\n\n", c.TTFCForeign)
	}

	sh := c.Flood
	if len(c.Session) > 0 {
		w("### %s chunks × %s on the session, unpaced, through the owner and through the other replica\n\n", FmtInt(float64(sh.N)), size(sh.Size))
		w("The gateway-stream client (`omit_outcome_text`, chunks coalesced), prompting the session through a and through b, alternating which goes first. The CPU column's acpgate figure is the replica the client called: for forwarded runs, b's relaying alone.\n\n")
		floodPair(w, "path", c.Session, [2]labelled{{PathLocal, "local: through a, the owner"}, {PathForwarded, "forwarded: through b, relayed to a"}},
			"Forwarded streaming throughput / local", " (the issue's target: ≥ 0.7)")
	}
	if len(c.Journal) > 0 {
		w("### The journal: `store: postgres` against `store: sqlite`\n\n")
		w("Two gateways started side by side, one with `store: postgres` (a database of its own on the same server, no `cluster:` block) and one with `store: sqlite` (the default: records in SQLite, events in append-only files), each running one-shot gateway-stream turns, alternating which goes first. Every event of a postgres turn is a row, written with its turn's record and a `NOTIFY` in one statement per batch.\n\n")
		floodPair(w, "store", c.Journal, [2]labelled{{StoreSQLite, "`store: sqlite`"}, {StorePostgres, "`store: postgres`"}},
			"Journal write throughput, postgres / sqlite", "")
		if _, _, chunks := lostOf(c.Journal[StorePostgres]); chunks > 0 && c.JournalServerCPU > 0 {
			w("PostgreSQL's own processes used %s µs of CPU per chunk of the postgres runs (all they used while the runs of both stores ran, over the postgres runs' chunks), on top of acpgate's.\n\n", fmtUs(float64(c.JournalServerCPU)/1e3/float64(chunks)))
		}
	}
	if len(c.Paced) > 0 {
		w("#### Paced %s chunks/s, %s × %s\n\n", FmtInt(float64(c.PacedRate)), FmtInt(float64(c.PacedN)), size(r.pacedSize()))
		pacedTable(w, c.Paced, []labelled{{StoreSQLite, "`store: sqlite`"}, {StorePostgres, "`store: postgres`"}})
		w("\npostgres p99 − sqlite p99, run by run: %s.\n\n", mmm(p99Diffs(c.Paced[StorePostgres], c.Paced[StoreSQLite]), FmtDurF))
	}
}

// floodPair writes the flood table of two rows and the ratio of the
// second row's rate to the first's, run by run, named by ratio.
func floodPair(w func(string, ...any), first string, runs map[string][]job.Result, rows [2]labelled, ratio, after string) {
	floodTable(w, first, runs, rows[:])
	w("\n%s, run by run: **%s**%s.\n\n", ratio, mmm(ratios(runs[rows[1].key], runs[rows[0].key], job.Result.Rate), fmtRatio), after)
}
