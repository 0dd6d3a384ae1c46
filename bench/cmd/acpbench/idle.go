package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/acpgate/acpgate/bench/internal/job"
	"github.com/acpgate/acpgate/bench/internal/proc"
	"github.com/acpgate/acpgate/bench/internal/report"
	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
)

// idle opens idleSessions sessions through CreateSession and measures the
// gateway's RSS before and after (agents are separate processes).
func (d *driver) idle() error {
	return d.withGateway(gatewayConf{}, d.idleOn)
}

func (d *driver) idleOn(ctx context.Context, g *gatewayProc, client acpgatev1.AgentGatewayClient) error {
	res := report.IdleResult{Target: d.plan.idleSessions}
	// Warm-up: a few sessions opened and closed, so that one-time
	// allocations are not charged to the sessions measured.
	for range 10 {
		s, err := client.CreateSession(ctx, &acpgatev1.CreateSessionRequest{Agent: job.FloodAgent})
		if err != nil {
			return fmt.Errorf("warm-up CreateSession: %w", err)
		}
		if _, err := client.CloseSession(ctx, &acpgatev1.CloseSessionRequest{SessionId: s.GetId()}); err != nil {
			return fmt.Errorf("warm-up CloseSession: %w", err)
		}
	}
	time.Sleep(2 * time.Second)
	before, err := proc.ReadMemory(g.pid())
	if err != nil {
		return err
	}
	res.Before = before.RSS

	var (
		mu     sync.Mutex
		ids    []string
		errs   []string
		next   atomic.Int64
		wg     sync.WaitGroup
		create = time.Now()
	)
	for range 8 {
		wg.Go(func() {
			for next.Add(1) <= int64(res.Target) {
				s, err := client.CreateSession(ctx, &acpgatev1.CreateSessionRequest{Agent: job.FloodAgent})
				mu.Lock()
				if err != nil {
					errs = append(errs, err.Error())
				} else {
					ids = append(ids, s.GetId())
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	res.CreateTime = time.Since(create)
	res.Opened = len(ids)
	if len(errs) > 0 {
		res.Errors = len(errs)
		res.FirstError = errs[0]
		d.fail("idle sessions: %d of %d CreateSession calls failed, first: %s", len(errs), res.Target, errs[0])
	}
	list, err := client.ListSessions(ctx, &acpgatev1.ListSessionsRequest{})
	if err != nil {
		return err
	}
	res.Listed = len(list.GetSessions())
	time.Sleep(3 * time.Second)
	after, err := proc.ReadMemory(g.pid())
	if err != nil {
		return err
	}
	res.After = after.RSS
	var agents int64
	kids := proc.Children(g.pid())
	for _, pid := range kids {
		if m, err := proc.ReadMemory(pid); err == nil {
			agents += m.RSS
		}
	}
	res.Agents = len(kids)
	res.AgentsRSS = agents

	closeStart := time.Now()
	next.Store(0)
	for range 8 {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= int64(len(ids)) {
					return
				}
				if _, err := client.CloseSession(ctx, &acpgatev1.CloseSessionRequest{SessionId: ids[i]}); err != nil {
					mu.Lock()
					errs = append(errs, err.Error())
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	res.CloseTime = time.Since(closeStart)
	time.Sleep(2 * time.Second)
	if m, err := proc.ReadMemory(g.pid()); err == nil {
		res.Closed = m.RSS
	}
	logf("   %d sessions: RSS %s → %s (%s per session); after closing: %s",
		res.Opened, report.MiB(res.Before), report.MiB(res.After), report.KiB(res.PerSession()), report.MiB(res.Closed))
	d.rep.Idle = &res
	return nil
}
