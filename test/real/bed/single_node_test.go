package bed

// The seed's single-node flows on real parts: one k3s server with two GPUs.

import (
	"testing"
	"time"
)

func TestRealSingleNode(t *testing.T) {
	e := tierOf(t)
	c := startCluster(t, e, NodeOptions{Name: "gpu-server", Server: true, GPUs: 2})
	bundle, key := bundleOf(t, e)
	n := c.Node("gpu-server")

	t.Run("fresh install reaches one slot per GPU", func(t *testing.T) {
		r := gpunodeOn(t, e, n, "install", "--bundle", bundle, "--trust-key", key,
			"--restart-k3s", "--timeout", "5m")
		if r.exit != 0 {
			t.Fatalf("install: %v", r)
		}
		waitAllocatable(t, c, "gpu-server", "nvidia.com/gpu", 2, 10*time.Second)
	})
}
