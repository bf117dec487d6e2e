package bed

// The scale benchmark (test/bench/real_scale_bench runs it; not a ctest
// test): the cluster part (plan, apply, and the wait for every GPU node) on
// the real control plane over 10, 100 and 1,000 GPU nodes that are Node
// objects kept by a stand-in (fleet.go). The API's audit log counts the
// admin's requests, so both runners are measured by the apiserver itself:
//   - gpunode install --scope cluster, on the server;
//   - the peer: kubectl apply --server-side of the seed's manifests, then
//     kubectl wait --for=jsonpath on every GPU node, the way an operator
//     without gpunode would do the same.
// Each runner gets a fresh cluster per size. The stand-in holds the Nodes'
// flip for a while after every plugin pod runs, so the steady wait's cost
// shows: requests per node per second while nothing changes.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived", "ResponseStarted"]
rules:
- level: Metadata
  users: ["system:admin"]
- level: None
`

// auditCount is the admin's requests in the audit log: in all, by verb, and
// those that completed in [from, to).
type auditCount struct {
	total, window int
	verbs         map[string]int
}

// auditEvent is one request in the audit log (its ResponseComplete stage).
type auditEvent struct {
	Verb                     string
	RequestURI               string
	RequestReceivedTimestamp time.Time
	StageTimestamp           time.Time
}

func readAudit(path string) ([]auditEvent, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var events []auditEvent
	scan := bufio.NewScanner(f)
	scan.Buffer(make([]byte, 1<<20), 16<<20)
	for scan.Scan() {
		var ev auditEvent
		if err := json.Unmarshal(scan.Bytes(), &ev); err != nil {
			return nil, err
		}
		events = append(events, ev)
	}
	return events, scan.Err()
}

// steadyFrom is when the steady wait began: the later of `from` and the
// runner's first watch (before it, the runner is still planning, applying,
// or checking each node).
func steadyFrom(events []auditEvent, from time.Time) time.Time {
	var first time.Time
	for _, ev := range events {
		if ev.Verb == "watch" && (first.IsZero() || ev.RequestReceivedTimestamp.Before(first)) {
			first = ev.RequestReceivedTimestamp
		}
	}
	if first.After(from) {
		return first
	}
	return from
}

// countAudit counts the requests: in all, by verb, and those that
// completed in the steady wait, [steadyFrom, to), which it returns.
func countAudit(path string, from, to time.Time) (auditCount, time.Time, error) {
	c := auditCount{verbs: map[string]int{}}
	events, err := readAudit(path)
	if err != nil {
		return c, from, err
	}
	from = steadyFrom(events, from)
	for _, ev := range events {
		c.total++
		c.verbs[ev.Verb]++
		if !ev.StageTimestamp.Before(from) && ev.StageTimestamp.Before(to) {
			c.window++
		}
	}
	return c, from, nil
}

func (c auditCount) verbText() string {
	var keys []string
	for k := range c.verbs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %d", k, c.verbs[k]))
	}
	return strings.Join(parts, ", ")
}

type scaleResult struct {
	wall          time.Duration
	requests      auditCount
	steadySeconds float64
}

func (r scaleResult) perNode(n int) float64 { return float64(r.requests.total) / float64(n) }

// steadyRate is requests per node per second in the steady wait.
func (r scaleResult) steadyRate(n int) float64 {
	if r.steadySeconds <= 0 {
		return 0
	}
	return float64(r.requests.window) / float64(n) / r.steadySeconds
}

// auditedFleet is a control plane whose audit log records the admin's
// requests, and a fleet of n stand-in GPU nodes of 8 GPUs each, kept until
// the test ends.
func auditedFleet(t *testing.T, e tier, n int, hold time.Duration) (c *Cluster, fleet *Fleet, log string) {
	t.Helper()
	dir := t.TempDir()
	policy := filepath.Join(dir, "audit-policy.yaml")
	log = filepath.Join(dir, "audit.log")
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o644); err != nil {
		t.Fatal(err)
	}
	c = startCluster(t, e, NodeOptions{Name: "server", Server: true, ExtraArgs: map[string][]string{
		"kube-apiserver": {"--audit-policy-file=" + policy, "--audit-log-path=" + log,
			"--audit-log-format=json", "--audit-log-maxsize=0", "--audit-log-mode=blocking",
			// A large cluster's settings: the defaults (400/200 in flight)
			// are not what a thousand-node control plane runs with either.
			"--max-requests-inflight=800", "--max-mutating-requests-inflight=400"},
		// The fleet renews no Leases (fleet.go): its nodes stay Ready.
		"kube-controller-manager": {"--node-monitor-grace-period=2h", "--kube-api-qps=200", "--kube-api-burst=400"},
		"kube-scheduler":          {"--kube-api-qps=200", "--kube-api-burst=400"},
	}})
	fleet, err := NewFleet(c, n, 8, hold)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if err := fleet.CreateNodes(ctx); err != nil {
		t.Fatal(err)
	}
	go fleet.Run(ctx)
	return c, fleet, log
}

func scaleRun(t *testing.T, e tier, bundle, key string, n int, hold time.Duration, peer bool) scaleResult {
	t.Helper()
	c, fleet, log := auditedFleet(t, e, n, hold)
	var err error
	// What came before (the harness's own kubectl) is not the runner's.
	if err := os.Truncate(log, 0); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if peer {
		repo := filepath.Dir(filepath.Dir(e.tools))
		if out, err := c.Kubectl("apply", "--server-side", "-f", filepath.Join(repo, "manifests", "runtimeclass-nvidia.yml"),
			"-f", filepath.Join(repo, "manifests", "nvidia-device-plugin.yml")); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		cmd := exec.Command("kubectl", "--kubeconfig", c.Kubeconfig, "wait", "node", "-l", "nvidia.com/gpu.present=true",
			`--for=jsonpath={.status.allocatable.nvidia\.com/gpu}=8`, "--timeout=15m")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("kubectl wait: %v: %s", err, out)
		}
	} else {
		r := gpunodeOn(t, e, c.Node("server"), "install", "--bundle", bundle, "--trust-key", key,
			"--scope", "cluster", "--timeout", "15m")
		if r.exit != 0 {
			t.Fatalf("gpunode: %v", r)
		}
		t.Logf("gpunode's output:\n%s%s", r.stdout, r.stderr)
	}
	res := scaleResult{wall: time.Since(start)}
	fleet.mu.Lock()
	from, to := fleet.AllRunning.Add(time.Second), fleet.Released
	fleet.mu.Unlock()
	if keep := os.Getenv("GPUNODE_BENCH_KEEP_AUDIT"); keep != "" {
		// For a look at each request (verb, URI, time): a copy of the log.
		if data, err := os.ReadFile(log); err == nil {
			_ = os.WriteFile(fmt.Sprintf("%s-%d-%v.log", keep, n, peer), data, 0o644)
		}
	}
	if res.requests, from, err = countAudit(log, from, to); err != nil {
		t.Fatal(err)
	}
	if to.After(from) {
		res.steadySeconds = to.Sub(from).Seconds()
	}
	for _, name := range []string{fleet.Names[0], fleet.Names[n-1]} {
		if got := allocatable(t, c, name, "nvidia.com/gpu"); got != "8" {
			t.Fatalf("%s advertises %q after the run", name, got)
		}
	}
	return res
}

func TestRealScaleBench(t *testing.T) {
	if os.Getenv("GPUNODE_REAL_BENCH") != "1" {
		t.Skip("a benchmark: test/bench/real_scale_bench runs it (GPUNODE_REAL_BENCH=1)")
	}
	e := tierOf(t)
	bundle, key := bundleOf(t, e)
	sizes := []int{10, 100, 1000}
	if s := os.Getenv("GPUNODE_BENCH_SIZES"); s != "" {
		sizes = nil
		for _, f := range strings.Split(s, ",") {
			n, err := strconv.Atoi(f)
			if err != nil || n < 1 {
				t.Fatalf("GPUNODE_BENCH_SIZES: %q is not a node count", f)
			}
			sizes = append(sizes, n)
		}
	}
	hold := 15 * time.Second
	fmt.Printf("real_scale_bench: the cluster part on kube-apiserver v1.36.2 (kine/SQLite), GPU nodes kept by a stand-in, "+
		"8 GPUs each, the flip held %v after every plugin pod runs; requests are the admin's, from the API's audit log\n", hold)
	fmt.Printf("%6s  %-8s  %8s  %8s  %9s  %13s  %s\n", "nodes", "runner", "wall s", "requests", "req/node", "steady req/node/s", "by verb")
	type row struct{ g, k scaleResult }
	rows := map[int]row{}
	for _, n := range sizes {
		var r row
		// A subtest each, so that each cluster stops before the next starts.
		for _, peer := range []bool{false, true} {
			ok := t.Run(fmt.Sprintf("%d nodes peer=%v", n, peer), func(t *testing.T) {
				res := scaleRun(t, e, bundle, key, n, hold, peer)
				if peer {
					r.k = res
				} else {
					r.g = res
				}
			})
			if !ok {
				t.FailNow()
			}
		}
		rows[n] = r
		for _, x := range []struct {
			name string
			r    scaleResult
		}{{"gpunode", r.g}, {"kubectl", r.k}} {
			fmt.Printf("%6d  %-8s  %8.1f  %8d  %9.2f  %13.4f  %s\n", n, x.name, x.r.wall.Seconds(), x.r.requests.total,
				x.r.perNode(n), x.r.steadyRate(n), x.r.requests.verbText())
		}
		fmt.Printf("%6d  gpunode/kubectl: wall %.2fx, requests %.2fx\n", n, r.g.wall.Seconds()/r.k.wall.Seconds(),
			float64(r.g.requests.total)/float64(r.k.requests.total))
	}
	if len(sizes) > 1 {
		a, b := sizes[0], sizes[len(sizes)-1]
		fmt.Printf("linearity, %d -> %d nodes (%.0fx): gpunode wall %.2fx, requests %.2fx; kubectl wall %.2fx, requests %.2fx\n",
			a, b, float64(b)/float64(a),
			rows[b].g.wall.Seconds()/rows[a].g.wall.Seconds(), float64(rows[b].g.requests.total)/float64(rows[a].g.requests.total),
			rows[b].k.wall.Seconds()/rows[a].k.wall.Seconds(), float64(rows[b].k.requests.total)/float64(rows[a].k.requests.total))
	}
}
