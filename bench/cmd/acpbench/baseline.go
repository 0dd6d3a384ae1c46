package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// A baseline is acpgate built from another revision of the repository and
// measured beside the working tree's in the throughput section: the same
// shapes, each client's turn on one gateway and then on the other, in the
// same run. Reports taken on different days on a shared machine differ by
// more than most changes (the floor's own rate moves by a quarter), so
// "no regression against an earlier report" is only worth something when
// both trees are measured back to back.

// baselineSuffix marks a client's results on the baseline's gateway.
const baselineSuffix = "@baseline"

// onBaseline is the label of client's results on the baseline gateway.
func onBaseline(client string) string { return client + baselineSuffix }

// jobClient is the client a label runs: the label without its suffix.
func jobClient(label string) string { return strings.TrimSuffix(label, baselineSuffix) }

// throughputClients is the throughput section's clients, in the order
// each repetition runs them; with a baseline, each gateway client's turn on
// the baseline follows its turn on the working tree.
func throughputClients(baseline bool) []string {
	if !baseline {
		return []string{"floor", "floor-sdk", "peer", "gateway", gatewayStream}
	}
	return []string{"floor", "floor-sdk", "peer", "gateway", onBaseline("gateway"), gatewayStream, onBaseline(gatewayStream)}
}

// viaGateway says whether a label's client calls a gateway (the working
// tree's or the baseline's) rather than an agent directly.
func viaGateway(label string) bool {
	c := jobClient(label)
	return c == "gateway" || c == gatewayStream
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
	d.logf("building ./cmd/acpgate at %s (baseline)", d.rep.Baseline)
	archive := exec.Command("sh", "-c", `git -C "$1" archive --format=tar "$2" | tar -x -C "$3"`, "sh", d.root, d.rep.Baseline, src)
	if out, err := archive.CombinedOutput(); err != nil {
		return fmt.Errorf("extracting %s: %v\n%s", d.rep.Baseline, err, out)
	}
	d.baseBin = filepath.Join(d.dir, "acpgate-baseline")
	build := exec.Command("go", "build", "-o", d.baseBin, "./cmd/acpgate")
	build.Dir = src
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("go build ./cmd/acpgate at %s: %v\n%s", d.rep.Baseline, err, out)
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
