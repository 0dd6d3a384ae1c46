package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/acpgate/acpgate/bench/internal/clients"
	"github.com/acpgate/acpgate/bench/internal/job"
	"github.com/acpgate/acpgate/bench/internal/proc"
	"github.com/acpgate/acpgate/bench/internal/report"
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
			logf("   %s run %d %-9s %s", what, rep+1, s.key, brief(r, j.N))
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
	res := report.ClusterResult{Flood: p.storeFlood, PacedRate: p.storePacedRate}
	res.PacedN = max(100, int(float64(p.storePacedRate)*p.pacedSeconds))
	d.rep.Cluster = &res // what was measured is reported, however far it got
	clusterDSN, err := pg.CreateDatabase("cluster")
	if err != nil {
		return err
	}
	if res.Postgres, err = serverVersion(clusterDSN); err != nil {
		return err
	}
	logf("   PostgreSQL %s", res.Postgres)

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
	pgw, err := d.gateway(gatewayConf{store: report.StorePostgres, more: postgresBlock(journalDSN)})
	if err != nil {
		return fmt.Errorf("the postgres gateway: %w", err)
	}
	defer d.stopGateway(pgw)
	running = append(running, pgw)
	sqw, err := d.gateway(gatewayConf{store: report.StoreSQLite})
	if err != nil {
		return fmt.Errorf("the sqlite gateway: %w", err)
	}
	defer d.stopGateway(sqw)
	running = append(running, sqw)
	stores := [2]side{{report.StoreSQLite, sqw}, {report.StorePostgres, pgw}}
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
func (d *driver) replicasOn(a, b *gatewayProc, res *report.ClusterResult) error {
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
	l, f := report.Quantiles(res.Local), report.Quantiles(res.Forwarded)
	if l != nil && f != nil {
		logf("   time to first chunk on the session, %d turns each: local p50 %s p99 %s, forwarded p50 %s p99 %s (other processes: %.2f cores)",
			len(res.Forwarded), report.FmtDur(l.P50), report.FmtDur(l.P99), report.FmtDur(f.P50), report.FmtDur(f.P99), res.TTFCForeign)
	}

	sh := d.plan.storeFlood
	res.Session = d.alternate("session "+sh.Name, sh.Runs, [2]side{{report.PathLocal, a}, {report.PathForwarded, b}},
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
	return d.gateway(gatewayConf{store: report.StorePostgres, more: postgresBlock(dsn) + cluster}, "--listen", addr)
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
