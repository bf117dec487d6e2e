package bed

// What every test of the real tier shares: where the parts are (ctest passes
// them, test/real/run-tier.sh), a cluster that is always stopped, the bundle
// gpunode installs from, and gpunode run on a node.

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

type tier struct {
	gpunode  string // the gpunode binary under test
	bin      string // the components
	stubs    string // the NVML and CUDA stand-ins
	fixtures string
	tools    string // test/tools
}

func tierOf(t *testing.T) tier {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the real tier needs root (namespaces, mounts, a bridge)")
	}
	e := tier{os.Getenv("GPUNODE_BINARY"), os.Getenv("GPUNODE_REAL_BIN"), os.Getenv("GPUNODE_TEST_STUB_DRIVER"),
		os.Getenv("GPUNODE_TEST_FIXTURES"), os.Getenv("GPUNODE_TEST_TOOLS")}
	if e.gpunode == "" || e.bin == "" || e.stubs == "" || e.fixtures == "" || e.tools == "" {
		t.Fatal("run through test/real/run-tier.sh: GPUNODE_BINARY, GPUNODE_REAL_BIN, GPUNODE_TEST_STUB_DRIVER, GPUNODE_TEST_FIXTURES and GPUNODE_TEST_TOOLS must be set")
	}
	return e
}

var (
	liveMu   sync.Mutex
	live     []*Cluster
	onSignal sync.Once
)

// startCluster starts the nodes and stops them when the test ends, or when
// ctest's timeout or a Ctrl-C signals the test binary.
func startCluster(t *testing.T, e tier, nodes ...NodeOptions) *Cluster {
	t.Helper()
	onSignal.Do(func() {
		sigs := make(chan os.Signal, 1)
		signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
		go func() {
			<-sigs
			liveMu.Lock()
			for _, c := range live {
				c.Stop()
			}
			os.Exit(1)
		}()
	})
	dir, err := os.MkdirTemp("/var/tmp", "gpunode-real-")
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	c, err := Start(Options{Dir: dir, Bin: e.bin, Stubs: e.stubs, Fixtures: e.fixtures, Nodes: nodes})
	if err != nil {
		os.RemoveAll(dir)
		t.Fatalf("cluster: %v", err)
	}
	t.Logf("cluster of %d nodes up in %v", len(nodes), time.Since(start).Round(time.Second))
	liveMu.Lock()
	live = append(live, c)
	liveMu.Unlock()
	t.Cleanup(func() {
		if t.Failed() {
			for _, n := range c.Nodes {
				for _, l := range []string{"kubelet", "containerd"} {
					t.Logf("%s %s.log:\n%s", n.Spec.Name, l, n.Tail("logs/"+l+".log", 25))
				}
			}
		}
		liveMu.Lock()
		defer liveMu.Unlock()
		c.Stop()
	})
	return c
}

// bundleOf is a signed bundle as an operator carries it: the real device
// plugin's image and the toolkit packages with the real nvidia runtime,
// made by `gpunode bundle create`. It returns the bundle and its public key.
func bundleOf(t *testing.T, e tier) (string, string) {
	t.Helper()
	dir := t.TempDir()
	archive := filepath.Join(dir, "device-plugin.tar")
	if err := DevicePluginArchive(e.bin, archive); err != nil {
		t.Fatal(err)
	}
	sample := filepath.Join(dir, "cuda-sample.tar")
	if err := CUDASampleArchive(e.bin, sample); err != nil {
		t.Fatal(err)
	}
	pkgs := filepath.Join(dir, "packages")
	mustRun(t, "bash", filepath.Join(e.tools, "make-toolkit-packages.sh"), pkgs,
		"--runtime", filepath.Join(e.bin, "nvidia-container-runtime"))
	// The bundle carries the binary that made it. The build's has debug info
	// (~95 MB; a release's is ~3 MB): copying that to every node would time
	// the copy, not the install.
	gpunode := filepath.Join(dir, "gpunode")
	mustRun(t, "objcopy", "--strip-debug", e.gpunode, gpunode)
	key := filepath.Join(dir, "publisher")
	mustRun(t, gpunode, "bundle", "keygen", "--out", key)
	if err := os.MkdirAll(filepath.Join(dir, "usb"), 0o755); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "usb", "gpunode-bundle")
	mustRun(t, gpunode, "bundle", "create", "--out", out, "--image-archive", archive,
		"--image-archive", sample, "--toolkit-packages", pkgs, "--sign-key", key+".key")
	return out, key + ".pub"
}

func mustRun(t *testing.T, argv ...string) string {
	t.Helper()
	out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(argv, " "), err, out)
	}
	return string(out)
}

// result is one run of gpunode on a node.
type result struct {
	exit           int
	stdout, stderr string
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\nstdout:\n%s\nstderr:\n%s", r.exit, r.stdout, r.stderr)
}

// gpunodeOn runs gpunode as root on the node.
func gpunodeOn(t *testing.T, e tier, n *Node, args ...string) result {
	t.Helper()
	cmd := n.Command(nil, append([]string{e.gpunode}, args...)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errb.String()}
	if ee, ok := err.(*exec.ExitError); ok {
		r.exit = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("gpunode on %s: %v", n.Spec.Name, err)
	}
	return r
}

// allocatable is the node's allocatable count of resource ("" when absent).
func allocatable(t *testing.T, c *Cluster, node, resource string) string {
	t.Helper()
	out, err := c.Kubectl("get", "node", node, "-o",
		"jsonpath={.status.allocatable."+strings.ReplaceAll(resource, ".", `\.`)+"}")
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// waitAllocatable waits until the node's allocatable resource is want.
func waitAllocatable(t *testing.T, c *Cluster, node, resource string, want int, limit time.Duration) {
	t.Helper()
	deadline := time.Now().Add(limit)
	got := ""
	for time.Now().Before(deadline) {
		if got = allocatable(t, c, node, resource); got == strconv.Itoa(want) {
			return
		}
		time.Sleep(time.Second)
	}
	t.Fatalf("%s: allocatable %s is %q after %v, want %d", node, resource, got, limit, want)
}
