package bed

// TestRealHold is for a developer, not for CI: with GPUNODE_REAL_HOLD=FILE
// it starts a server with two GPUs and a CPU agent, writes the admin
// kubeconfig's path and each node's pid to FILE, and keeps them running
// until FILE is removed (nsenter -t PID -m -n -u reaches a node).
import (
	"fmt"
	"os"
	"testing"
	"time"
)

func TestRealHold(t *testing.T) {
	hold := os.Getenv("GPUNODE_REAL_HOLD")
	if hold == "" {
		t.Skip("set GPUNODE_REAL_HOLD=FILE to hold a cluster for a look")
	}
	e := tierOf(t)
	c := startCluster(t, e, NodeOptions{Name: "gpu-server", Server: true, GPUs: 2},
		NodeOptions{Name: "cpu-agent"})
	info := "kubeconfig " + c.Kubeconfig + "\n"
	for _, n := range c.Nodes {
		info += fmt.Sprintf("node %s pid %d dir %s\n", n.Spec.Name, n.cmd.Process.Pid, n.Spec.Dir)
	}
	if err := os.WriteFile(hold, []byte(info), 0o644); err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(hold); err != nil {
			return
		}
		time.Sleep(time.Second)
	}
}
