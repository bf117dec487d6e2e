package bed

// A fleet of GPU nodes that are Node objects only, their status kept by a
// small stand-in, as KWOK (sigs.k8s.io/kwok) keeps its fake nodes: for the
// scale benchmark, where a thousand kubelets will not fit on one machine.
// The control plane is real; the stand-in does what each node's kubelet
// and device plugin would do to the API, and nothing else:
//   - it creates each Node with a Ready status (the node registry keeps the
//     status given on create: pkg/registry/core/node/strategy.go) and
//     gpunode's GPU labels (nvidia.com/gpu.present, nvidia.com/gpu.count),
//     as the node part sets them;
//   - a device plugin Pod the scheduler binds to one of its nodes becomes
//     Running (the kubelet's status update), and a Pod being deleted is
//     deleted at once (the kubelet's final delete, grace 0);
//   - the Node then advertises GPUs x replicas of the resource, as the
//     kubelet does once the plugin registers, read from the plugin's
//     ConfigMap as the plugin reads its config (replicas, renameByDefault),
//     after Hold, so a benchmark can watch a steady wait.
// KWOK also renews each node's Lease; here the controller-manager's
// --node-monitor-grace-period is long instead, so no node turns
// unreachable during a run (a thousand renewals every ten seconds would
// load the two cores the benchmark measures on).

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Fleet is the stand-in for N GPU nodes.
type Fleet struct {
	API   string // https://server:6443
	N     int
	GPUs  int           // per node
	Hold  time.Duration // from every pod Running to the first Node flip
	Names []string

	client *http.Client
	mine   map[string]bool

	mu         sync.Mutex
	running    map[string]bool   // node -> its plugin pod is Running
	advertised map[string]string // node -> the pod UID it advertised for
	AllRunning time.Time         // when every node's plugin pod was first Running
	Released   time.Time         // when the stand-in began advertising
	Flipped    time.Time         // when the last node advertised
	release    chan struct{}
	work       chan func()
}

// NewFleet is a stand-in for n nodes of gpus GPUs each, on the cluster's
// apiserver, with the fleet identity the cluster's PKI issued.
func NewFleet(c *Cluster, n, gpus int, hold time.Duration) (*Fleet, error) {
	pki := filepath.Join(c.Opts.Dir, "pki")
	cert, err := tls.LoadX509KeyPair(filepath.Join(pki, "fleet.crt"), filepath.Join(pki, "fleet.key"))
	if err != nil {
		return nil, err
	}
	caPEM, err := os.ReadFile(filepath.Join(pki, "ca.crt"))
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	transport := &http.Transport{
		TLSClientConfig:     &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool},
		ForceAttemptHTTP2:   true,
		MaxIdleConnsPerHost: 64,
	}
	f := &Fleet{API: c.Nodes[0].Spec.APIServer(), N: n, GPUs: gpus, Hold: hold,
		client: &http.Client{Transport: transport}, mine: map[string]bool{},
		running: map[string]bool{}, advertised: map[string]string{}, release: make(chan struct{}), work: make(chan func(), 4096)}
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("gpu-%04d", i)
		f.Names = append(f.Names, name)
		f.mine[name] = true
	}
	return f, nil
}

func (f *Fleet) do(ctx context.Context, method, path, contentType string, body any) ([]byte, error) {
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, f.API+path, r)
	if err != nil {
		return nil, err
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := f.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 300 {
		return b, fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, bytes.TrimSpace(b))
	}
	return b, nil
}

// parallel runs fn over the names with 16 workers; the first error wins.
func parallel(names []string, fn func(string) error) error {
	var wg sync.WaitGroup
	var once sync.Once
	var first error
	ch := make(chan string)
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for name := range ch {
				if err := fn(name); err != nil {
					once.Do(func() { first = err })
				}
			}
		}()
	}
	for _, n := range names {
		ch <- n
	}
	close(ch)
	wg.Wait()
	return first
}

// CreateNodes creates the fleet's Nodes, Ready, labelled as gpunode's node
// part labels a GPU node.
func (f *Fleet) CreateNodes(ctx context.Context) error {
	now := time.Now().UTC().Format(time.RFC3339)
	return parallel(f.Names, func(name string) error {
		node := map[string]any{
			"apiVersion": "v1", "kind": "Node",
			"metadata": map[string]any{"name": name, "labels": map[string]string{
				"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
				"nvidia.com/gpu.present": "true", "nvidia.com/gpu.count": strconv.Itoa(f.GPUs),
				"type": "realbed-fleet"}},
			"status": map[string]any{
				"capacity":    map[string]string{"cpu": "64", "memory": "512Gi", "pods": "110"},
				"allocatable": map[string]string{"cpu": "64", "memory": "512Gi", "pods": "110"},
				"conditions": []map[string]string{{"type": "Ready", "status": "True", "reason": "KubeletReady",
					"lastHeartbeatTime": now, "lastTransitionTime": now}},
				"nodeInfo": map[string]string{"kubeletVersion": "v1.36.2", "containerRuntimeVersion": "containerd://2.2.2",
					"operatingSystem": "linux", "architecture": "amd64"},
			},
		}
		_, err := f.do(ctx, "POST", "/api/v1/nodes", "application/json", node)
		return err
	})
}

var (
	replicasRE = regexp.MustCompile(`replicas:\s*(\d+)`)
	renameRE   = regexp.MustCompile(`renameByDefault:\s*true`)
)

// served is the resource and count a node of gpus GPUs advertises under the
// plugin's config in the kube-system ConfigMap it mounts (none: default).
func (f *Fleet) served(ctx context.Context, pod map[string]any) (string, int) {
	resource, replicas := "nvidia.com/gpu", 1
	spec, _ := pod["spec"].(map[string]any)
	volumes, _ := spec["volumes"].([]any)
	for _, v := range volumes {
		cm, _ := v.(map[string]any)["configMap"].(map[string]any)
		name, _ := cm["name"].(string)
		if name == "" {
			continue
		}
		b, err := f.do(ctx, "GET", "/api/v1/namespaces/kube-system/configmaps/"+name, "", nil)
		if err != nil {
			continue
		}
		if m := replicasRE.FindSubmatch(b); m != nil {
			replicas, _ = strconv.Atoi(string(m[1]))
		}
		if renameRE.Match(b) && replicas > 1 {
			resource = "nvidia.com/gpu.shared"
		}
	}
	return resource, f.GPUs * replicas
}

// Run keeps the fleet until ctx ends: it watches the device plugin's pods.
func (f *Fleet) Run(ctx context.Context) {
	for w := 0; w < 16; w++ {
		go func() {
			for {
				select {
				case job := <-f.work:
					job()
				case <-ctx.Done():
					return
				}
			}
		}()
	}
	for ctx.Err() == nil {
		if err := f.watchPods(ctx); err != nil && ctx.Err() == nil {
			fmt.Fprintf(os.Stderr, "fleet: watch: %v\n", err)
			time.Sleep(time.Second)
		}
	}
}

func (f *Fleet) watchPods(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, "GET", f.API+
		"/api/v1/namespaces/kube-system/pods?watch=1&labelSelector=name%3Dnvidia-device-plugin-ds", nil)
	if err != nil {
		return err
	}
	resp, err := f.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return fmt.Errorf("%s", resp.Status)
	}
	scan := bufio.NewScanner(resp.Body)
	scan.Buffer(make([]byte, 1<<20), 16<<20)
	for scan.Scan() {
		var ev struct {
			Type   string
			Object map[string]any
		}
		if err := json.Unmarshal(scan.Bytes(), &ev); err != nil {
			return err
		}
		f.onPod(ctx, ev.Type, ev.Object)
	}
	return scan.Err()
}

func (f *Fleet) onPod(ctx context.Context, kind string, pod map[string]any) {
	meta, _ := pod["metadata"].(map[string]any)
	spec, _ := pod["spec"].(map[string]any)
	status, _ := pod["status"].(map[string]any)
	name, _ := meta["name"].(string)
	node, _ := spec["nodeName"].(string)
	if !f.mine[node] || kind == "DELETED" || kind == "ERROR" {
		return
	}
	if _, deleting := meta["deletionTimestamp"]; deleting {
		f.work <- func() {
			_, _ = f.do(ctx, "DELETE", "/api/v1/namespaces/kube-system/pods/"+name, "application/json",
				map[string]any{"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 0})
		}
		return
	}
	if status["phase"] == "Running" {
		f.mu.Lock()
		f.running[node] = true
		if len(f.running) == f.N && f.AllRunning.IsZero() {
			f.AllRunning = time.Now()
			go func() {
				select {
				case <-time.After(f.Hold):
				case <-ctx.Done():
				}
				f.mu.Lock()
				f.Released = time.Now()
				f.mu.Unlock()
				close(f.release)
			}()
		}
		uid, _ := meta["uid"].(string)
		again := f.advertised[node] == uid
		f.advertised[node] = uid
		f.mu.Unlock()
		if !again {
			// Its own goroutine: advertise waits for the hold's release,
			// and a worker held there would starve the pod updates the
			// release waits for.
			go f.advertise(ctx, node, pod)
		}
		return
	}
	f.work <- func() {
		now := time.Now().UTC().Format(time.RFC3339)
		_, err := f.do(ctx, "PATCH", "/api/v1/namespaces/kube-system/pods/"+name+"/status",
			"application/merge-patch+json", map[string]any{"status": map[string]any{
				"phase": "Running", "hostIP": "10.211.1.1", "startTime": now,
				"conditions": []map[string]string{{"type": "Ready", "status": "True", "lastTransitionTime": now}},
			}})
		if err != nil && ctx.Err() == nil {
			fmt.Fprintf(os.Stderr, "fleet: %v\n", err)
		}
	}
}

// advertise is the kubelet's update once the plugin registers.
func (f *Fleet) advertise(ctx context.Context, node string, pod map[string]any) {
	select {
	case <-f.release:
	case <-ctx.Done():
		return
	}
	resource, count := f.served(ctx, pod)
	other := "nvidia.com/gpu.shared"
	if resource == other {
		other = "nvidia.com/gpu"
	}
	// The other name keeps its capacity with allocatable 0, as the kubelet
	// keeps a resource whose plugin went away (for its grace period).
	n := strconv.Itoa(count)
	patch := map[string]any{"status": map[string]any{
		"capacity":    map[string]string{resource: n},
		"allocatable": map[string]any{resource: n},
	}}
	b, err := f.do(ctx, "GET", "/api/v1/nodes/"+node, "", nil)
	if err == nil && strings.Contains(string(b), `"`+other+`"`) {
		patch["status"].(map[string]any)["allocatable"].(map[string]any)[other] = "0"
	}
	if _, err := f.do(ctx, "PATCH", "/api/v1/nodes/"+node+"/status", "application/merge-patch+json", patch); err != nil {
		if ctx.Err() == nil {
			fmt.Fprintf(os.Stderr, "fleet: %v\n", err)
		}
		return
	}
	f.mu.Lock()
	f.Flipped = time.Now()
	f.mu.Unlock()
}
