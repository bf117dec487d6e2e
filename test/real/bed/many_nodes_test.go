package bed

// The many-node flows on real parts: a CPU-only server, two GPU agents and
// a CPU-only agent. An agent's node part runs on the kubelet's own identity
// (system:node:NAME, under the Node authorizer and NodeRestriction); the
// cluster part runs once, as the admin, on the server.

import (
	"strings"
	"testing"
	"time"
)

func TestRealManyNodes(t *testing.T) {
	e := tierOf(t)
	c := startCluster(t, e, NodeOptions{Name: "server", Server: true},
		NodeOptions{Name: "gpu-agent-1", GPUs: 2}, NodeOptions{Name: "gpu-agent-2", GPUs: 1},
		NodeOptions{Name: "cpu-agent"})
	bundle, key := bundleOf(t, e)
	on := func(t *testing.T, node string, args ...string) result {
		t.Helper()
		return gpunodeOn(t, e, c.Node(node), append([]string{"install", "--bundle", bundle, "--trust-key", key,
			"--restart-k3s", "--timeout", "3m"}, args...)...)
	}
	step := func(name string, f func(t *testing.T)) {
		if !t.Run(name, f) {
			t.FailNow()
		}
	}
	step("an agent first is blocked, naming the cluster part", func(t *testing.T) {
		r := on(t, "gpu-agent-1")
		t.Logf("%v", r)
		wantIn(t, r, 1, "--scope cluster")
	})
	step("the cluster part on the server", func(t *testing.T) {
		r := on(t, "server", "--scope", "cluster", "--variant", "time-slicing", "--replicas", "4")
		t.Logf("%v", r)
		wantIn(t, r, 0)
	})
	step("each GPU agent with its kubelet identity", func(t *testing.T) {
		for _, a := range []struct {
			name string
			gpus int
		}{{"gpu-agent-1", 2}, {"gpu-agent-2", 1}} {
			r := on(t, a.name)
			if r.exit != 0 {
				t.Fatalf("%s: %v", a.name, r)
			}
			waitAllocatable(t, c, a.name, "nvidia.com/gpu", a.gpus*4, 30*time.Second)
		}
	})
	step("the CPU-only node gets no plugin pod", func(t *testing.T) {
		// Its own run stops at the driver, as on any CPU-only host.
		wantIn(t, on(t, "cpu-agent"), 1, "the NVIDIA kernel module is not loaded")
		nodes := get(t, c, "{.items[*].spec.nodeName}", "pods", "-n", "kube-system", "-l", "name=nvidia-device-plugin-ds")
		if strings.Contains(nodes, "cpu-agent") || strings.Contains(nodes, "server") {
			t.Fatalf("plugin pods on %q", nodes)
		}
		if got := allocatable(t, c, "cpu-agent", "nvidia.com/gpu"); got != "" {
			t.Fatalf("cpu-agent advertises nvidia.com/gpu %q", got)
		}
	})
	step("a replicas change that restarts other nodes needs --all-nodes", func(t *testing.T) {
		r := on(t, "server", "--scope", "cluster", "--variant", "time-slicing", "--replicas", "2")
		t.Logf("%v", r)
		wantIn(t, r, 1, "--all-nodes")
		r = on(t, "server", "--scope", "cluster", "--variant", "time-slicing", "--replicas", "2", "--all-nodes")
		wantIn(t, r, 0)
		waitAllocatable(t, c, "gpu-agent-1", "nvidia.com/gpu", 4, 30*time.Second)
		waitAllocatable(t, c, "gpu-agent-2", "nvidia.com/gpu", 2, 30*time.Second)
	})
}
