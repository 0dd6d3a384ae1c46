package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/acpgate/acpgate/bench/internal/clients"
	"github.com/acpgate/acpgate/bench/internal/job"
	"github.com/acpgate/acpgate/bench/internal/proc"
	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
	"github.com/acpgate/acpgate/internal/testpg"
	"github.com/acpgate/acpgate/internal/testutil"
)

// The cluster section: what running several replicas on one PostgreSQL
// costs a client. Two replicas, a and b, share a database; a session is
// opened through a, which runs its agent, and its turns are sent either
// to a (local) or to b, which relays them to a (forwarded). Then the
// journal's cost: one-shot turns on a gateway with `store: postgres`
// against one with `store: sqlite`, side by side.
//
// It needs PostgreSQL's server binaries (Debian's postgresql package,
// which scripts/install-deps.sh installs): without them the section fails
// and says so, rather than leaving the figures out unnoticed.

// The paths of a turn on a session, and the stores of the journal
// comparison: the keys of the section's runs.
const (
	pathLocal     = "local"
	pathForwarded = "forwarded"
	storeSQLite   = "sqlite"
	storePostgres = "postgres"
)

// clusterResult is what the cluster section measured.
type clusterResult struct {
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
	Flood   shape                   `json:"flood"`
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

// side is a gateway a comparison runs on, and the key of its runs.
type side struct {
	key string
	g   *gatewayProc
}

// alternate runs j on both sides runs times, alternating which goes first
// (so that neither always runs on a machine the other just warmed or
// disturbed), and returns the results by side.
func (d *driver) alternate(what string, runs int, sides [2]side, j job.Job) map[string][]job.Result {
	out := map[string][]job.Result{}
	for rep := range runs {
		order := sides
		if rep%2 == 1 {
			order[0], order[1] = order[1], order[0]
		}
		for _, s := range order {
			r := d.job(s.g, j)
			d.check(what, r)
			out[s.key] = append(out[s.key], r)
			d.logf("   %s run %d %-9s %s", what, rep+1, s.key, brief(r, j.N))
		}
	}
	return out
}

func (d *driver) clusterSection() error {
	pg, err := testpg.StartServer("")
	if errors.Is(err, testpg.ErrNotInstalled) {
		return fmt.Errorf("%w: the cluster section runs replicas on a real PostgreSQL; install it (scripts/install-deps.sh, or apt-get install postgresql), or leave the section out with -sections", err)
	}
	if err != nil {
		return fmt.Errorf("starting PostgreSQL: %w", err)
	}
	defer func() {
		if err := pg.Stop(); err != nil {
			d.fail("cluster: stopping PostgreSQL: %v", err)
		}
	}()
	// The harness's own processes, whose CPU is not foreign load: the
	// server and the gateways of the phase running.
	var running []*gatewayProc
	d.besides = func(g *gatewayProc) time.Duration {
		t := proc.LiveTreeCPU(pg.Pid())
		for _, r := range running {
			t += proc.LiveTreeCPU(r.pid())
		}
		if g != nil {
			own, _ := proc.ReadTreeCPU(g.pid())
			t -= own
		}
		return t
	}
	defer func() { d.besides = nil }()

	p := d.plan
	res := clusterResult{Flood: p.storeFlood, PacedRate: p.storePacedRate}
	res.PacedN = max(100, int(float64(p.storePacedRate)*p.pacedSeconds))
	d.rep.Cluster = &res // what was measured is reported, however far it got
	clusterDSN, err := pg.CreateDatabase("cluster")
	if err != nil {
		return err
	}
	if res.Postgres, err = serverVersion(clusterDSN); err != nil {
		return err
	}
	d.logf("   PostgreSQL %s", res.Postgres)

	// Two replicas, a and b.
	secret := filepath.Join(d.dir, "cluster-secret")
	if err := os.WriteFile(secret, []byte("the replicas' shared secret, for the benchmark"), 0o600); err != nil {
		return err
	}
	a, err := d.replica("a", clusterDSN, secret)
	if err != nil {
		return fmt.Errorf("replica a: %w", err)
	}
	running = append(running, a)
	b, err := d.replica("b", clusterDSN, secret)
	if err != nil {
		d.stopGateway(a)
		return fmt.Errorf("replica b: %w", err)
	}
	running = append(running, b)
	err = d.replicasOn(a, b, &res)
	d.stopGateway(a)
	d.stopGateway(b)
	running = nil
	if err != nil {
		return err
	}

	// The journal: a gateway of each store, side by side.
	journalDSN, err := pg.CreateDatabase("journal")
	if err != nil {
		return err
	}
	pgw, err := d.gateway(gatewayConf{store: storePostgres, more: postgresBlock(journalDSN)})
	if err != nil {
		return fmt.Errorf("the postgres gateway: %w", err)
	}
	defer d.stopGateway(pgw)
	running = append(running, pgw)
	sqw, err := d.gateway(gatewayConf{store: storeSQLite})
	if err != nil {
		return fmt.Errorf("the sqlite gateway: %w", err)
	}
	defer d.stopGateway(sqw)
	running = append(running, sqw)
	stores := [2]side{{storeSQLite, sqw}, {storePostgres, pgw}}
	sh := p.storeFlood
	server0 := proc.LiveTreeCPU(pg.Pid())
	res.Journal = d.alternate("journal "+sh.Name, sh.Runs, stores,
		job.Job{Client: job.GatewayStream, N: sh.N, Size: sh.Size, Timeout: 5 * time.Minute})
	res.JournalServerCPU = int64(proc.LiveTreeCPU(pg.Pid()) - server0)
	res.Paced = d.alternate(fmt.Sprintf("journal %d/s", p.storePacedRate), p.runs, stores,
		job.Job{Client: job.GatewayStream, N: res.PacedN, Size: p.pacedSize, Rate: p.storePacedRate, Latency: true, Timeout: 5 * time.Minute})
	return nil
}

// replicasOn measures, on replicas a and b of one database, turns on a
// session that a runs: sent to a, and sent to b.
func (d *driver) replicasOn(a, b *gatewayProc, res *clusterResult) error {
	ctx := context.Background()
	aconn, ac, err := clients.DialGateway(ctx, a.addr)
	if err != nil {
		return err
	}
	defer aconn.Close()
	bconn, bc, err := clients.DialGateway(ctx, b.addr)
	if err != nil {
		return err
	}
	defer bconn.Close()
	sess, err := ac.CreateSession(ctx, &acpgatev1.CreateSessionRequest{Agent: job.FloodAgent})
	if err != nil {
		return fmt.Errorf("opening a session through replica a: %w", err)
	}
	if sess.GetReplica() != "a" {
		return fmt.Errorf("the session opened through replica a runs on %q", sess.GetReplica())
	}
	id := sess.GetId()

	// Time to first chunk, interleaved; the machine is waited on every
	// few pairs, not before each turn (a wait takes longer than a turn).
	paths := [2]struct {
		into   *[]float64
		client acpgatev1.AgentGatewayClient
	}{{&res.Local, ac}, {&res.Forwarded, bc}}
	sys0, _ := proc.ReadSysBusy()
	own0 := proc.SelfCPU() + d.besides(nil)
	began := time.Now()
	for i := range d.plan.clusterTurns {
		if i%25 == 0 {
			d.waitQuiet()
		}
		order := paths
		if i%2 == 1 {
			order[0], order[1] = order[1], order[0]
		}
		for _, p := range order {
			took, err := firstChunk(ctx, p.client, &acpgatev1.PromptRequest{SessionId: id, Text: "chunk hello\nstop end_turn"})
			if err != nil {
				if res.TTFCErrors++; res.TTFCFirstError == "" {
					res.TTFCFirstError = err.Error()
				}
				continue
			}
			*p.into = append(*p.into, float64(took))
		}
		if res.TTFCErrors >= 3 {
			break
		}
	}
	sys1, _ := proc.ReadSysBusy()
	if wall := time.Since(began); wall > 0 {
		res.TTFCForeign = max(0, float64(sys1-sys0-(proc.SelfCPU()+d.besides(nil)-own0))/float64(wall))
	}
	if res.TTFCErrors > 0 {
		d.fail("cluster: %d Prompt turns on the session failed, first: %s", res.TTFCErrors, res.TTFCFirstError)
	}
	l, f := quantiles(res.Local), quantiles(res.Forwarded)
	if l != nil && f != nil {
		d.logf("   time to first chunk on the session, %d turns each: local p50 %s p99 %s, forwarded p50 %s p99 %s (other processes: %.2f cores)",
			len(res.Forwarded), fmtDur(l.P50), fmtDur(l.P99), fmtDur(f.P50), fmtDur(f.P99), res.TTFCForeign)
	}

	sh := d.plan.storeFlood
	res.Session = d.alternate("session "+sh.Name, sh.Runs, [2]side{{pathLocal, a}, {pathForwarded, b}},
		job.Job{Client: job.GatewayStream, SessionID: id, N: sh.N, Size: sh.Size, Timeout: 5 * time.Minute})
	if _, err := bc.CloseSession(ctx, &acpgatev1.CloseSessionRequest{SessionId: id}); err != nil {
		return fmt.Errorf("closing the session through replica b: %w", err)
	}
	return nil
}

// replica starts one replica of the cluster on dsn: a gateway with a
// cluster block, listening on the port it advertises.
func (d *driver) replica(id, dsn, secret string) (*gatewayProc, error) {
	port, err := testutil.FreePort() // named before the replica listens
	if err != nil {
		return nil, err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	cluster := fmt.Sprintf("cluster: {replica_id: %s, advertise: %q, secret_file: %q}\n", id, addr, secret)
	return d.gateway(gatewayConf{store: storePostgres, more: postgresBlock(dsn) + cluster}, "--listen", addr)
}

// postgresBlock is the configuration's postgres block for dsn.
func postgresBlock(dsn string) string { return fmt.Sprintf("postgres: {dsn: %q}\n", dsn) }

// serverVersion asks the server at dsn its version.
func serverVersion(dsn string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return "", fmt.Errorf("connecting to PostgreSQL: %w", err)
	}
	defer conn.Close(ctx)
	var v string
	if err := conn.QueryRow(ctx, `SHOW server_version`).Scan(&v); err != nil {
		return "", fmt.Errorf("asking PostgreSQL its version: %w", err)
	}
	return v, nil
}

// quantiles summarises times in ns (nil when there are none).
func quantiles(v []float64) *job.Latency {
	ns := make([]int64, len(v))
	for i, x := range v {
		ns[i] = int64(x)
	}
	return job.Summarize(ns)
}

// ---- report ----

// clusterVerdicts are the figures for several replicas.
func (r *report) clusterVerdicts() []verdict {
	c := r.Cluster
	ttfc := verdict{Figure: "forwarded `Prompt` on a session: added latency to first chunk over the same call on the owner, p50 / p99", Target: "stated; every turn completes"}
	flood := verdict{Figure: "64 B streaming flood on a session: forwarded / local", Target: "≥ 0.7, zero loss"}
	journal := verdict{Figure: "64 B streaming flood, one-shot: `store: postgres` / `store: sqlite`", Target: "stated, zero loss"}
	paced := verdict{Figure: "paced 20,000 chunks/s, gateway-stream: p99 latency with `store: postgres` and `store: sqlite`", Target: "stated"}
	if c == nil {
		return []verdict{ttfc, flood, journal, paced}
	}
	if l, f := quantiles(c.Local), quantiles(c.Forwarded); l != nil && f != nil {
		ttfc.Known = true
		ttfc.Measured = fmt.Sprintf("%s / %s (forwarded p50 %s, p99 %s; local p50 %s, p99 %s; %d turns each, %d failed)",
			fmtSigned(f.P50-l.P50), fmtSigned(f.P99-l.P99), fmtDur(f.P50), fmtDur(f.P99), fmtDur(l.P50), fmtDur(l.P99), len(c.Forwarded), c.TTFCErrors)
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
			num, fmtInt(median(oks(a, job.Result.Rate))), den, fmtInt(median(oks(b, job.Result.Rate))), lost, ooo, errs)
		v.Met = median(rat) >= want && lost == 0 && ooo == 0 && errs == 0
	}
	flood.Figure = fmt.Sprintf("%s streaming flood on a session: forwarded / local", size(c.Flood.Size))
	ratioVerdict(&flood, c.Session, pathForwarded, pathLocal, 0.7)
	journal.Figure = fmt.Sprintf("%s streaming flood, one-shot: `store: postgres` / `store: sqlite`", size(c.Flood.Size))
	ratioVerdict(&journal, c.Journal, storePostgres, storeSQLite, 0)
	paced.Figure = fmt.Sprintf("paced %s chunks/s, gateway-stream: p99 latency with `store: postgres` and `store: sqlite`", fmtInt(float64(c.PacedRate)))
	pg, sq := c.Paced[storePostgres], c.Paced[storeSQLite]
	if m, s := median(oks(pg, p99)), median(oks(sq, p99)); !math.IsNaN(m) && !math.IsNaN(s) {
		paced.Known = true
		paced.Measured = fmt.Sprintf("postgres %s, sqlite %s (postgres − sqlite, run by run: %s)", fmtDurF(m), fmtDurF(s), mmm(p99Diffs(pg, sq), fmtDurF))
		paced.Met = len(oks(pg, p99)) == len(pg) && len(oks(sq, p99)) == len(sq)
	}
	return []verdict{ttfc, flood, journal, paced}
}

// fmtSigned is a duration with its sign: an added latency may be negative.
func fmtSigned(ns int64) string {
	if ns < 0 {
		return fmtDur(ns)
	}
	return "+" + fmtDur(ns)
}

func (r *report) clusterMD(w func(string, ...any)) {
	c := r.Cluster
	if c == nil {
		return
	}
	w("## Several replicas on one PostgreSQL\n\n")
	w("The harness starts one PostgreSQL, %s, from Debian's binaries in a temporary directory (through `internal/testpg`: `fsync`, `synchronous_commit` and `full_page_writes` off, since the data is thrown away; a production server syncing its WAL to a disk on another host costs more per commit than this). Two replicas, a and b, run with `store: postgres` on one database and a `cluster:` block each (`advertise` on loopback, a shared `secret_file`). A session is opened through a, which runs its agent; each of its turns is sent either to a, the owner (**local**), or to b, which relays the call to a over gRPC and a's events back to the client (**forwarded**).\n\n", c.Postgres)

	l, f := quantiles(c.Local), quantiles(c.Forwarded)
	if l != nil && f != nil {
		w("### Time to first chunk of a `Prompt` on a session\n\n")
		w("%d turns through each replica, one after the other, alternating which goes first, each the test agent's `chunk hello` then `end_turn`; from the call (the client's connection already open) to the first chunk in hand.\n\n", len(c.Forwarded))
		w("| path | p50 | p99 | max | turns |\n|---|---|---|---|---|\n")
		w("| local: sent to a, the owner | %s | %s | %s | %d |\n", fmtDur(l.P50), fmtDur(l.P99), fmtDur(l.Max), l.Count)
		w("| forwarded: sent to b, relayed to a | %s | %s | %s | %d |\n", fmtDur(f.P50), fmtDur(f.P99), fmtDur(f.Max), f.Count)
		w("\nAdded latency of a forwarded `Prompt` (forwarded − local): **p50 %s, p99 %s**", fmtSigned(f.P50-l.P50), fmtSigned(f.P99-l.P99))
		if c.TTFCErrors > 0 {
			w("; %d turns failed, first: `%s`", c.TTFCErrors, shortErr(c.TTFCFirstError))
		}
		w(". Other processes on the machine used %.2f cores on average while these turns ran.\n\n", c.TTFCForeign)
	}

	sh := c.Flood
	if len(c.Session) > 0 {
		w("### %s chunks × %s on the session, unpaced, through the owner and through the other replica\n\n", fmtInt(float64(sh.N)), size(sh.Size))
		w("The gateway-stream client (`omit_outcome_text`, `coalesce_chunks`), prompting the session through a and through b, alternating which goes first. The CPU column's acpgate figure is the replica the client called: for forwarded runs, b's relaying alone.\n\n")
		floodPair(w, "path", c.Session, [2]labelled{{pathLocal, "local: through a, the owner"}, {pathForwarded, "forwarded: through b, relayed to a"}},
			"Forwarded streaming throughput / local", " (the issue's target: ≥ 0.7)")
	}
	if len(c.Journal) > 0 {
		w("### The journal: `store: postgres` against `store: sqlite`\n\n")
		w("Two gateways started side by side, one with `store: postgres` (a database of its own on the same server, no `cluster:` block) and one with `store: sqlite` (the default: records in SQLite, events in append-only files), each running one-shot gateway-stream turns, alternating which goes first. Every event of a postgres turn is a row, written with its turn's record and a `NOTIFY` in one statement per batch.\n\n")
		floodPair(w, "store", c.Journal, [2]labelled{{storeSQLite, "`store: sqlite`"}, {storePostgres, "`store: postgres`"}},
			"Journal write throughput, postgres / sqlite", "")
		if _, _, chunks := lostOf(c.Journal[storePostgres]); chunks > 0 && c.JournalServerCPU > 0 {
			w("PostgreSQL's own processes used %s µs of CPU per chunk of the postgres runs (all they used while the runs of both stores ran, over the postgres runs' chunks), on top of acpgate's.\n\n", fmtUs(float64(c.JournalServerCPU)/1e3/float64(chunks)))
		}
	}
	if len(c.Paced) > 0 {
		w("#### Paced %s chunks/s, %s × %s\n\n", fmtInt(float64(c.PacedRate)), fmtInt(float64(c.PacedN)), size(r.pacedSize()))
		pacedTable(w, c.Paced, []labelled{{storeSQLite, "`store: sqlite`"}, {storePostgres, "`store: postgres`"}})
		w("\npostgres p99 − sqlite p99, run by run: %s.\n\n", mmm(p99Diffs(c.Paced[storePostgres], c.Paced[storeSQLite]), fmtDurF))
	}
}

// floodPair writes the flood table of two rows and the ratio of the
// second row's rate to the first's, run by run, named by ratio.
func floodPair(w func(string, ...any), first string, runs map[string][]job.Result, rows [2]labelled, ratio, after string) {
	floodTable(w, first, runs, rows[:])
	w("\n%s, run by run: **%s**%s.\n\n", ratio, mmm(ratios(runs[rows[1].key], runs[rows[0].key], job.Result.Rate), fmtRatio), after)
}
