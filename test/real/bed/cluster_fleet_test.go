package bed

// The cluster part over a fleet of stand-in GPU nodes (fleet.go), each
// variant in turn, with the admin's requests read from the API's audit
// log. Regression for two defects the scale benchmark found on the real
// control plane (the sim had accepted both):
//   - the check read a plugin pod's log, which the API server fetches from
//     the node's kubelet; where none answers (a firewalled port 10250),
//     every try was a 500, retried until the run's deadline: 56 s on one
//     node before the wait began;
//   - the wait diagnosed every short node on each pass (its pods, the
//     DaemonSet, its events), so its requests grew with the nodes.

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestRealClusterPartFleet(t *testing.T) {
	e := tierOf(t)
	bundle, key := bundleOf(t, e)
	const nodes = 6
	// The flip is held after every plugin pod runs, so that the wait is
	// one a watch must sit through, not one the first list ends.
	hold := 12 * time.Second
	c, fleet, log := auditedFleet(t, e, nodes, hold)
	install := func(t *testing.T, args ...string) []auditEvent {
		t.Helper()
		if err := os.Truncate(log, 0); err != nil {
			t.Fatal(err)
		}
		r := gpunodeOn(t, e, c.Node("server"), append([]string{"install", "--bundle", bundle, "--trust-key", key,
			"--scope", "cluster", "--timeout", "5m"}, args...)...)
		if r.exit != 0 {
			t.Fatalf("gpunode: %v", r)
		}
		events, err := readAudit(log)
		if err != nil {
			t.Fatal(err)
		}
		return events
	}
	expect := func(t *testing.T, resource string, want int) {
		t.Helper()
		for _, name := range fleet.Names {
			if got := allocatable(t, c, name, resource); got != strconv.Itoa(want) {
				t.Fatalf("%s advertises %s: %q, want %d", name, resource, got, want)
			}
		}
	}

	t.Run("default: a watch sits out the hold, one log read, no per-node requests while waiting", func(t *testing.T) {
		events := install(t)
		expect(t, "nvidia.com/gpu", 8)
		logs, watches := 0, 0
		for _, ev := range events {
			if strings.Contains(ev.RequestURI, "/log?") {
				logs++
			}
			if ev.Verb == "watch" {
				watches++
			}
		}
		// One pod's log, tried for its 3 s budget (a backoff of about five
		// tries), then no other: before the fix, 21 tries over 56 s.
		if logs > 8 {
			t.Errorf("%d log requests: the kubelets answer none, and only one pod's log may be tried", logs)
		}
		if watches == 0 {
			t.Errorf("the wait made no watch request")
		}
		fleet.mu.Lock()
		from, to := steadyFrom(events, fleet.AllRunning.Add(time.Second)), fleet.Released
		fleet.mu.Unlock()
		perNode := 0
		for _, ev := range events {
			if ev.StageTimestamp.Before(from) || !ev.StageTimestamp.Before(to) {
				continue
			}
			for _, n := range fleet.Names {
				if strings.Contains(ev.RequestURI, n) || strings.Contains(ev.RequestURI, "/events") {
					perNode++
					t.Logf("in the steady wait: %s %s", ev.Verb, ev.RequestURI)
					break
				}
			}
		}
		if perNode > 0 {
			t.Errorf("%d request(s) about single nodes in the steady wait (%v): it must cost no request per node", perNode, to.Sub(from))
		}
	})
	t.Run("time-slicing 4 with --all-nodes: 32 on every node", func(t *testing.T) {
		install(t, "--variant", "time-slicing", "--replicas", "4", "--all-nodes")
		expect(t, "nvidia.com/gpu", 32)
	})
	t.Run("renamed: gpu.shared 32, gpu 0", func(t *testing.T) {
		install(t, "--variant", "time-slicing", "--replicas", "4", "--rename-shared", "--all-nodes")
		expect(t, "nvidia.com/gpu.shared", 32)
		expect(t, "nvidia.com/gpu", 0)
	})
	t.Run("rerun writes nothing", func(t *testing.T) {
		events := install(t, "--variant", "time-slicing", "--replicas", "4", "--rename-shared", "--all-nodes")
		for _, ev := range events {
			switch ev.Verb {
			case "create", "update", "patch", "delete", "deletecollection":
				t.Errorf("the rerun wrote: %s %s", ev.Verb, ev.RequestURI)
			}
		}
	})
}
