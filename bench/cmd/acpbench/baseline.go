package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/acpgate/acpgate/bench/internal/job"
)

// A baseline is acpgate built from another revision of the repository and
// measured beside the working tree's in the throughput and paced sections:
// the same shapes and rates, each gateway client's turn on one gateway and
// then on the other, in the same run. Reports taken on different days on a shared machine differ by
// more than most changes (the floor's own rate moves by a quarter), so
// "no regression against an earlier report" is only worth something when
// both trees are measured back to back.

// servers are the servers a section's clients call: the working tree's
// gateway, the baseline's (nil without a baseline) and the relay (nil
// where the section has none).
type servers struct {
	own, base, relay *gatewayProc
}

// serverFor is the server a label's client calls: the relay for the relay
// client, own for the working tree's gateway clients, base for the
// baseline's, nil for those that call an agent directly.
func serverFor(label string, s servers) *gatewayProc {
	switch {
	case job.ViaRelay(label):
		return s.relay
	case !job.ViaGateway(label):
		return nil
	case job.IsBaseline(label):
		return s.base
	default:
		return s.own
	}
}

// startBaseline starts the baseline's gateway beside own, or returns nil
// without a baseline; on failure it stops own.
func (d *driver) startBaseline(own *gatewayProc) (*gatewayProc, error) {
	if d.baseBin == "" {
		return nil, nil
	}
	base, err := d.gateway(d.baselineConf())
	if err != nil {
		d.stopGateway(own)
		return nil, fmt.Errorf("the baseline's gateway: %w", err)
	}
	return base, nil
}

// buildBaseline builds acpgate from rev (anything git rev-parse takes)
// into the working directory, from a copy of that revision's tree, so the
// repository's own checkout and worktrees are left alone.
func (d *driver) buildBaseline(rev string) error {
	out, err := exec.Command("git", "-C", d.root, "rev-parse", "--short", rev+"^{commit}").Output()
	if err != nil {
		return fmt.Errorf("baseline %q is not a revision of %s: %v", rev, d.root, err)
	}
	d.rep.Baseline = strings.TrimSpace(string(out))
	src := filepath.Join(d.dir, "baseline-src")
	if err := os.Mkdir(src, 0o755); err != nil {
		return err
	}
	logf("building ./cmd/acpgate at %s (baseline)", d.rep.Baseline)
	archive := exec.Command("sh", "-c", `git -C "$1" archive --format=tar "$2" | tar -x -C "$3"`, "sh", d.root, d.rep.Baseline, src)
	if out, err := archive.CombinedOutput(); err != nil {
		return fmt.Errorf("extracting %s: %v\n%s", d.rep.Baseline, err, out)
	}
	d.baseBin = filepath.Join(d.dir, "acpgate-baseline")
	if err := releaseBuild(src, d.baseBin, "./cmd/acpgate"); err != nil {
		return fmt.Errorf("at %s: %w", d.rep.Baseline, err)
	}
	return os.RemoveAll(src)
}

// baselineConf is how the baseline's gateways are configured: as the
// working tree's, but without state_dir, which trees from before durable
// turns do not know. Their state goes where a gateway's goes by default,
// under $XDG_STATE_HOME, which startGateway points at the gateway's own
// state directory.
func (d *driver) baselineConf() gatewayConf {
	return gatewayConf{bin: d.baseBin, noStateDir: true}
}
