package bed

// The seed's single-node flows on real parts: one k3s server with two GPUs,
// taken through every variant in turn on one cluster, as an operator would.

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

const (
	pluginDS = "nvidia-device-plugin-daemonset"
	pluginCM = "nvidia-device-plugin-config"
)

// get is one field of an object, "" when the object is absent.
func get(t *testing.T, c *Cluster, jsonpath string, object ...string) string {
	t.Helper()
	out, err := c.Kubectl(append(append([]string{"get"}, object...), "--ignore-not-found", "-o", "jsonpath="+jsonpath)...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// pluginPods is the UIDs of the device plugin's pods.
func pluginPods(t *testing.T, c *Cluster) string {
	return get(t, c, "{.items[*].metadata.uid}", "pods", "-n", "kube-system", "-l", "name=nvidia-device-plugin-ds")
}

// wantProven: the smoke stage's facts of a --json run say that each of
// `node`'s `gpus` GPUs (the NVML stand-in's UUIDs, which the real device
// plugin hands out and the fake CDI spec gives the container) passed.
func wantProven(t *testing.T, r result, node string, gpus int) {
	t.Helper()
	var facts struct {
		Result string `json:"result"`
		GPUs   []struct {
			Node, UUID, Result string
		} `json:"gpus"`
	}
	for _, line := range strings.Split(r.stdout, "\n") {
		var ev struct {
			Event, Stage string
			Facts        json.RawMessage
		}
		if json.Unmarshal([]byte(line), &ev) == nil && ev.Event == "stage" && ev.Stage == "smoke" && len(ev.Facts) > 2 {
			_ = json.Unmarshal(ev.Facts, &facts)
		}
	}
	if facts.Result != "passed" {
		t.Fatalf("the proof did not pass:\n%s", r.stderr)
	}
	got := map[string]string{}
	for _, g := range facts.GPUs {
		if g.Node == node {
			got[g.UUID] = g.Result
		}
	}
	for i := 0; i < gpus; i++ {
		if got[GPUUUID(i)] != "passed" {
			t.Errorf("GPU %s of %s: %q, not passed (all: %v)", GPUUUID(i), node, got[GPUUUID(i)], got)
		}
	}
}

func TestRealSingleNode(t *testing.T) {
	e := tierOf(t)
	c := startCluster(t, e, NodeOptions{Name: "gpu-server", Server: true, GPUs: 2})
	bundle, key := bundleOf(t, e)
	n := c.Node("gpu-server")
	install := func(t *testing.T, args ...string) result {
		t.Helper()
		r := gpunodeOn(t, e, n, append([]string{"install", "--bundle", bundle, "--trust-key", key,
			"--restart-k3s", "--timeout", "4m"}, args...)...)
		if r.exit != 0 {
			t.Fatalf("install %s: %v", strings.Join(args, " "), r)
		}
		return r
	}
	ok := func(sub bool) {
		if !sub {
			t.FailNow() // each step builds on the one before
		}
	}

	ok(t.Run("fresh install reaches one slot per GPU", func(t *testing.T) {
		install(t)
		waitAllocatable(t, c, "gpu-server", "nvidia.com/gpu", 2, 10*time.Second)
		if h := get(t, c, "{.handler}", "runtimeclass", "nvidia"); h != "nvidia" {
			t.Fatalf("RuntimeClass nvidia's handler is %q", h)
		}
	}))
	ok(t.Run("time-slicing 8 reaches GPUs x 8", func(t *testing.T) {
		install(t, "--variant", "time-slicing", "--replicas", "8")
		waitAllocatable(t, c, "gpu-server", "nvidia.com/gpu", 16, 10*time.Second)
		cfg := get(t, c, "{.data.config\\.yaml}", "configmap", "-n", "kube-system", pluginCM)
		if !strings.Contains(cfg, "replicas: 8") {
			t.Fatalf("the ConfigMap the plugin reads:\n%s", cfg)
		}
	}))
	ok(t.Run("a replicas change restarts the plugin and the count follows", func(t *testing.T) {
		before := pluginPods(t, c)
		install(t, "--variant", "time-slicing", "--replicas", "4")
		waitAllocatable(t, c, "gpu-server", "nvidia.com/gpu", 8, 10*time.Second)
		if after := pluginPods(t, c); after == before || after == "" {
			t.Fatalf("the plugin pod was not replaced (before %q, after %q)", before, after)
		}
	}))
	ok(t.Run("--rename-shared moves the count to nvidia.com/gpu.shared", func(t *testing.T) {
		install(t, "--variant", "time-slicing", "--replicas", "4", "--rename-shared")
		waitAllocatable(t, c, "gpu-server", "nvidia.com/gpu.shared", 8, 10*time.Second)
		// The kubelet never drops a resource a plugin once registered: the
		// old name stays, at 0.
		if got := allocatable(t, c, "gpu-server", "nvidia.com/gpu"); got != "0" {
			t.Fatalf("allocatable nvidia.com/gpu after the rename is %q, want 0", got)
		}
		// ... and its capacity stays for the endpoint's grace period (5
		// minutes: devicemanager endpointStopGracePeriod), as the sim has it
		// (test/sim/k3ssim/node.py CAPACITY_GRACE_SECONDS).
		if got := get(t, c, `{.status.capacity.nvidia\.com/gpu}`, "node", "gpu-server"); got != "8" {
			t.Fatalf("capacity nvidia.com/gpu right after the rename is %q, want 8 (the grace period)", got)
		}
	}))
	ok(t.Run("back to default prunes the ConfigMap", func(t *testing.T) {
		install(t)
		waitAllocatable(t, c, "gpu-server", "nvidia.com/gpu", 2, 10*time.Second)
		if cm := get(t, c, "{.metadata.name}", "configmap", "-n", "kube-system", pluginCM); cm != "" {
			t.Fatalf("ConfigMap %s is still there after the switch to default", cm)
		}
	}))
	ok(t.Run("--smoke proves every GPU through the whole chain", func(t *testing.T) {
		r := install(t, "--smoke", "--json")
		wantProven(t, r, "gpu-server", 2)
	}))
	ok(t.Run("prove under time-slicing proves every GPU", func(t *testing.T) {
		install(t, "--variant", "time-slicing", "--replicas", "4")
		waitAllocatable(t, c, "gpu-server", "nvidia.com/gpu", 8, 10*time.Second)
		r := gpunodeOn(t, e, n, "prove", "--json", "--timeout", "3m")
		if r.exit != 0 {
			t.Fatalf("prove: %v", r)
		}
		wantProven(t, r, "gpu-server", 2)
		install(t) // back to default for the rerun below
		waitAllocatable(t, c, "gpu-server", "nvidia.com/gpu", 2, 10*time.Second)
	}))
	ok(t.Run("a rerun writes nothing", func(t *testing.T) {
		versions := func() string {
			return get(t, c, "{.metadata.resourceVersion}", "daemonset", "-n", "kube-system", pluginDS) + " " +
				get(t, c, "{.metadata.resourceVersion}", "runtimeclass", "nvidia") + " " + pluginPods(t, c)
		}
		config := func() string {
			return mustRun(t, "cat", n.Spec.Dir+"/rancher/k3s/agent/etc/containerd/config.toml")
		}
		before, cfgBefore := versions(), config()
		r := install(t)
		if strings.Contains(r.stderr, "applying") {
			t.Fatalf("the rerun changed something:\n%s", r.stderr)
		}
		if after := versions(); after != before {
			t.Fatalf("resourceVersions and plugin pods changed on a rerun: %q -> %q", before, after)
		}
		if config() != cfgBefore {
			t.Fatal("containerd's config changed on a rerun")
		}
	}))
	t.Run("uninstall removes what gpunode made", func(t *testing.T) {
		r := gpunodeOn(t, e, n, "uninstall", "--timeout", "2m")
		if r.exit != 0 {
			t.Fatalf("uninstall: %v", r)
		}
		for _, obj := range [][]string{{"daemonset", "-n", "kube-system", pluginDS},
			{"configmap", "-n", "kube-system", pluginCM}, {"runtimeclass", "nvidia"}} {
			if got := get(t, c, "{.metadata.name}", obj...); got != "" {
				t.Errorf("%s is still there after uninstall", strings.Join(obj, " "))
			}
		}
		images := n.Command(nil, "k3s", "ctr", "-n", "k8s.io", "images", "ls", "-q")
		out, err := images.Output()
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(out), DevicePluginRef) {
			t.Errorf("the device plugin image is still in containerd after uninstall:\n%s", out)
		}
		// The node's GPU labels go too (the independent try of issue 25
		// found a single-node server's uninstall leaving them).
		if got := get(t, c, `{.metadata.labels.nvidia\.com/gpu\.present}`, "node", "gpu-server"); got != "" {
			t.Errorf("nvidia.com/gpu.present is still %q after uninstall", got)
		}
	})
}
