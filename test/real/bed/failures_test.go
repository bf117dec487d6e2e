package bed

// The failures gpunode diagnoses, made real: a plugin without
// runtimeClassName, the handler gone from containerd's config, the image
// gone from containerd, and a second device plugin. Each is made on a
// working node, diagnosed, then repaired by a rerun.

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// waitPod waits until a plugin pod's first container is waiting for reason
// (or, with reason "Running", runs).
func waitPluginPod(t *testing.T, c *Cluster, reason string, limit time.Duration) {
	t.Helper()
	deadline := time.Now().Add(limit)
	got := ""
	for time.Now().Before(deadline) {
		got = get(t, c, "{.items[*].status.containerStatuses[0].state.waiting.reason}{.items[*].status.phase}",
			"pods", "-n", "kube-system", "-l", "name=nvidia-device-plugin-ds")
		if strings.Contains(got, reason) {
			return
		}
		time.Sleep(time.Second)
	}
	t.Fatalf("the plugin pod is %q after %v, want %s", got, limit, reason)
}

func wantIn(t *testing.T, r result, exit int, texts ...string) {
	t.Helper()
	if r.exit != exit {
		t.Fatalf("want exit %d: %v", exit, r)
	}
	for _, text := range texts {
		if !strings.Contains(r.stderr, text) {
			t.Fatalf("want %q in the output: %v", text, r)
		}
	}
}

func TestRealFailures(t *testing.T) {
	e := tierOf(t)
	c := startCluster(t, e, NodeOptions{Name: "gpu-server", Server: true, GPUs: 2})
	bundle, key := bundleOf(t, e)
	n := c.Node("gpu-server")
	install := func(t *testing.T, args ...string) result {
		t.Helper()
		return gpunodeOn(t, e, n, append([]string{"install", "--bundle", bundle, "--trust-key", key,
			"--restart-k3s", "--timeout", "90s"}, args...)...)
	}
	repaired := func(t *testing.T) {
		t.Helper()
		r := install(t)
		wantIn(t, r, 0)
		waitAllocatable(t, c, "gpu-server", "nvidia.com/gpu", 2, 10*time.Second)
	}
	if !t.Run("a working node", repaired) {
		t.FailNow()
	}
	t.Run("no runtimeClassName", func(t *testing.T) {
		if _, err := c.Kubectl("-n", "kube-system", "patch", "daemonset", pluginDS, "--type", "json",
			"-p", `[{"op":"remove","path":"/spec/template/spec/runtimeClassName"}]`); err != nil {
			t.Fatal(err)
		}
		waitPluginPod(t, c, "Running", time.Minute)
		waitAllocatable(t, c, "gpu-server", "nvidia.com/gpu", 0, time.Minute)
		r := gpunodeOn(t, e, n, "status")
		t.Logf("status: %v", r)
		wantIn(t, r, 1, "runtimeClassName")
		repaired(t)
	})
	t.Run("the handler missing from containerd's config", func(t *testing.T) {
		dir := filepath.Join(n.Spec.Dir, "rancher/k3s/agent/etc/containerd")
		config, err := os.ReadFile(filepath.Join(dir, "config.toml"))
		if err != nil {
			t.Fatal(err)
		}
		// An operator's template, copied from config.toml before the
		// toolkit came: no nvidia runtime.
		var kept []string
		skip := false
		for _, line := range strings.Split(string(config), "\n") {
			if strings.HasPrefix(line, "[") {
				skip = strings.Contains(line, "'nvidia")
			}
			if !skip {
				kept = append(kept, line)
			}
		}
		tmpl := filepath.Join(dir, "config-v3.toml.tmpl")
		if err := os.WriteFile(tmpl, []byte(strings.Join(kept, "\n")), 0o600); err != nil {
			t.Fatal(err)
		}
		if out, err := n.Command(nil, "systemctl", "restart", "k3s").CombinedOutput(); err != nil {
			t.Fatalf("restart: %v %s", err, out)
		}
		if _, err := c.Kubectl("-n", "kube-system", "delete", "pods", "-l", "name=nvidia-device-plugin-ds", "--wait=false"); err != nil {
			t.Fatal(err)
		}
		r := install(t)
		t.Logf("install: %v", r)
		// The fix names the cgroup driver this node runs (no systemd: false),
		// not the systemd default.
		wantIn(t, r, 1, "config-v3.toml.tmpl", "SystemdCgroup = false (as runc has it)")
		if err := os.Remove(tmpl); err != nil {
			t.Fatal(err)
		}
		repaired(t)
	})
	t.Run("the image not imported", func(t *testing.T) {
		if out, err := n.Command(nil, "k3s", "ctr", "images", "rm", DevicePluginRef).CombinedOutput(); err != nil {
			t.Fatalf("ctr images rm: %v %s", err, out)
		}
		if _, err := c.Kubectl("-n", "kube-system", "delete", "pods", "-l", "name=nvidia-device-plugin-ds"); err != nil {
			t.Fatal(err)
		}
		waitPluginPod(t, c, "Err", time.Minute)
		r := gpunodeOn(t, e, n, "status")
		t.Logf("status: %v", r)
		wantIn(t, r, 1, "is not in k3s's containerd")
		repaired(t)
	})
	t.Run("a second plugin", func(t *testing.T) {
		ds, err := c.Kubectl("-n", "kube-system", "get", "daemonset", pluginDS, "-o", "json")
		if err != nil {
			t.Fatal(err)
		}
		// The same plugin under another name, as a Helm release of NVIDIA's
		// chart would run it.
		other := strings.ReplaceAll(ds, `"name": "`+pluginDS+`"`, `"name": "nvdp-nvidia-device-plugin"`)
		f := filepath.Join(t.TempDir(), "other.json")
		if err := os.WriteFile(f, []byte(other), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Kubectl("create", "-f", f); err != nil {
			t.Fatal(err)
		}
		r := install(t, "--variant", "time-slicing", "--replicas", "2")
		t.Logf("install: %v", r)
		wantIn(t, r, 1, "nvdp-nvidia-device-plugin", "--replace-existing")
		r = install(t, "--replace-existing")
		wantIn(t, r, 0)
		if got := get(t, c, "{.metadata.name}", "daemonset", "-n", "kube-system", "nvdp-nvidia-device-plugin"); got != "" {
			t.Fatal("--replace-existing left the other plugin")
		}
		waitAllocatable(t, c, "gpu-server", "nvidia.com/gpu", 2, 10*time.Second)
	})
}
