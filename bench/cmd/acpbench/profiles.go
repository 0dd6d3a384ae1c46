package main

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/acpgate/acpgate/bench/internal/job"
	"github.com/acpgate/acpgate/bench/internal/report"
)

// profiles runs floods through acpgate serve with its profiling
// flags (CPU from start to exit, allocations written after the clean
// shutdown that SIGTERM starts) and keeps `go tool pprof -top` of each.
func (d *driver) profiles() error {
	for i, sh := range d.plan.profile {
		base := filepath.Join(d.dir, fmt.Sprintf("profile-%02d", i+1))
		g, err := d.gateway(gatewayConf{}, "--cpuprofile", base+".cpu.prof", "--allocprofile", base+".allocs.prof")
		if err != nil {
			return err
		}
		var runs []job.Result
		for range sh.Runs {
			r := d.job(g, job.Job{Client: "gateway", N: sh.N, Size: sh.Size, Timeout: 5 * time.Minute})
			d.check("profile "+sh.Name, r)
			runs = append(runs, r)
		}
		d.stopGateway(g)
		pr := report.ProfileResult{Shape: sh, Runs: runs}
		for _, p := range []struct {
			dst  *string
			args []string
			file string
		}{
			{&pr.CPU, []string{"-top", "-nodecount=25"}, base + ".cpu.prof"},
			{&pr.CPUCum, []string{"-top", "-cum", "-nodecount=25"}, base + ".cpu.prof"},
			{&pr.Allocs, []string{"-top", "-sample_index=alloc_space", "-nodecount=20"}, base + ".allocs.prof"},
		} {
			// pprof reads the symbols from the binary that wrote the profile.
			cmd := exec.Command("go", slices.Concat([]string{"tool", "pprof"}, p.args, []string{d.gwBin, p.file})...)
			cmd.Dir = d.root
			out, err := cmd.Output()
			if err != nil {
				return fmt.Errorf("go tool pprof %v %s: %v", p.args, filepath.Base(p.file), err)
			}
			*p.dst = trimPprof(string(out))
		}
		logf("   profiled %s: %d runs", sh.Name, len(runs))
		d.rep.Profiles = append(d.rep.Profiles, pr)
	}
	return nil
}

// trimPprof drops pprof's header lines that name local files.
func trimPprof(s string) string {
	var keep []string
	for _, line := range strings.Split(strings.TrimRight(s, "\n"), "\n") {
		if strings.HasPrefix(line, "File:") || strings.HasPrefix(line, "Build ID:") || strings.HasPrefix(line, "Time:") {
			continue
		}
		keep = append(keep, line)
	}
	return strings.Join(keep, "\n")
}
