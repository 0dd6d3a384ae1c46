package sessions

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/acpgate/acpgate/internal/acp"
	"github.com/acpgate/acpgate/internal/admission"
	"github.com/acpgate/acpgate/internal/metrics"
	"github.com/acpgate/acpgate/outcome"
)

// warmLauncher starts warm processes of e: in its configured workspace,
// or each in a fresh temporary directory, made by tempDir, that becomes
// the session's when the process is taken.
func (e *agentEntry) warmLauncher(tempDir func(agent string) (string, error)) func(ctx context.Context) (*warmProcess, error) {
	return func(ctx context.Context) (*warmProcess, error) {
		w := &warmProcess{}
		root := e.cfg.Workspace
		if root == "" {
			var err error
			if root, err = tempDir(e.cfg.Name); err != nil {
				return nil, fmt.Errorf("creating a directory for a warm process: %w", err)
			}
			w.tempDir = root
		}
		dir, err := filepath.EvalSymlinks(root)
		if err == nil {
			w.sess, err = acp.Start(ctx, e.acp, dir)
		}
		if err != nil {
			var agentErr *acp.Error
			if errors.As(err, &agentErr) && agentErr.Info != nil {
				e.noteCapabilities(*agentErr.Info)
			}
			if w.tempDir != "" {
				_ = os.RemoveAll(w.tempDir)
			}
			return nil, err
		}
		e.noteCapabilities(w.sess.Info())
		w.dir = dir
		if w.tempDir != "" {
			w.tempDir = dir
		}
		return w, nil
	}
}

// takeFresh takes a warm process for a session of an agent without a
// workspace that asked for no subdirectory: any of its warm processes
// serves, each running in a fresh temporary directory of its own. Other
// sessions take theirs, if any, once their directory is resolved.
func (e *agentEntry) takeFresh(cwd string) *warmProcess {
	if e.pool == nil || e.cfg.Workspace != "" || (cwd != "" && cwd != ".") {
		return nil
	}
	return e.pool.take("")
}

// startAgent gives an opening its agent with a session open on it: under
// reuse_process, a process of its principal and directory that has room
// for it (see sharing); else the warm process it took, on which only
// session/new (or session/load) is left to run, or a process started
// cold, which under reuse_process later sessions may then join.
func (e *agentEntry) startAgent(ctx context.Context, o *Opening, opts acp.OpenOptions, log *slog.Logger) (*acp.Session, error) {
	if e.share != nil && o.warm == nil {
		if sess, joined, err := e.join(ctx, o, opts, log); joined {
			return sess, err
		}
	}
	sess, err := e.startProcess(ctx, o, opts)
	if err == nil && e.share != nil {
		e.share.add(o.shareKey(), sess.Conn())
	}
	return sess, err
}

// startProcess gives an opening a process of its own, warm or cold.
func (e *agentEntry) startProcess(ctx context.Context, o *Opening, opts acp.OpenOptions) (*acp.Session, error) {
	began := time.Now()
	if o.warm != nil {
		err := o.warm.sess.Begin(ctx, opts)
		if err != nil {
			noteStart(e.m, time.Since(began), err)
			e.startup.failed(err.Error(), time.Now(), time.Time{})
			return nil, err
		}
		e.m.SessionStarted(true)
		return o.warm.sess, nil
	}
	release, err := e.waitToStart(ctx)
	if err != nil {
		// Not the agent's failure: its start-up status stays as it was.
		noteStart(e.m, 0, err)
		return nil, err
	}
	began = time.Now() // the agent's start-up, without the wait
	opts.Started = release
	sess, err := acp.Open(ctx, e.acp, opts)
	release()
	took := time.Since(began)
	noteStart(e.m, took, err)
	if err != nil {
		e.startup.failed(err.Error(), time.Now(), time.Time{})
		return nil, err
	}
	e.startup.succeeded(took)
	e.m.SessionStarted(false)
	return sess, nil
}

// waitToStart waits for one of the gateway's start-up slots (see
// admission.Starts), records how long it waited, and returns the function
// that gives the slot back. The wait is bounded by the agent's handshake timeout,
// the time its start-up would have had to complete; a start-up that
// cannot begin within it fails as the gateway's failure (a retryable
// GatewayFailure), never as a handshake timeout, since the agent was
// never spawned. The time waited is not the agent's start-up time.
func (e *agentEntry) waitToStart(ctx context.Context) (release func(), err error) {
	release, waited, err := e.starts.Wait(ctx, cmp.Or(e.acp.HandshakeTimeout, acp.DefaultHandshakeTimeout))
	if waited > 0 {
		e.m.StartWaited(waited)
	}
	if errors.Is(err, admission.ErrStartWaitExpired) {
		err = &acp.Error{Proto: outcome.Interpreter{}.StartWaitExpired(err.Error())}
	}
	return release, err
}

// noteStart records an agent start-up that took took and failed with err
// (nil: it succeeded).
func noteStart(m *metrics.Agent, took time.Duration, err error) {
	if err == nil {
		m.Started(took)
		return
	}
	var agentErr *acp.Error
	class := "cancelled"
	if errors.As(err, &agentErr) {
		class, _ = metrics.Classify(agentErr.Proto)
	}
	m.StartFailed(class)
}

// StartPools starts the warm pool of every agent configured with warm.
func (m *Manager) StartPools() {
	total := 0
	for _, e := range m.agents.list {
		if e.cfg.Warm == 0 {
			continue
		}
		total += e.cfg.Warm
		e.pool = newPool(poolOptions{
			Agent:   e.cfg.Name,
			Size:    e.cfg.Warm,
			MaxAge:  e.cfg.WarmMaxAge,
			Launch:  e.warmLauncher(m.tempDir),
			Admit:   m.admit,
			Starts:  e.starts,
			Status:  &e.startup,
			Metrics: e.m,
			Logger:  m.log,
		})
	}
	if total > m.cfg.Limits.MaxWarm {
		m.log.Warn("the agents' warm processes add up to more than limits.max_warm: some pools will stay short", "warm", total, "max_warm", m.cfg.Limits.MaxWarm)
	}
}

// StopPools stops every warm pool concurrently: start-ups are cancelled
// and ready processes retired gracefully until ctx ends, then killed. It
// returns once every process the pools started has been reaped.
func (m *Manager) StopPools(ctx context.Context) {
	var wg sync.WaitGroup
	for _, e := range m.agents.list {
		if e.pool == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			e.pool.stop(ctx)
		}()
	}
	wg.Wait()
}
