package bed

// The Ansible rollout playbook (gpunode.gpunode.rollout) over the bed's
// nodes, each reached over SSH at its own address: a CPU-only server that
// runs the cluster part, two GPU agents on their kubelet identities, and a
// CPU-only agent in no gpunode group. Every variant in turn, as an operator
// rolls a fleet: check mode first, default, time-slicing with rename, a
// rerun.

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// playbookRun is one ansible-playbook run: its exit code, the fleet_json
// callback's document (test/ansible/callback_plugins), and stderr.
type playbookRun struct {
	exit   int
	doc    fleetDoc
	raw    string
	stderr string
}

type fleetDoc struct {
	Plays []struct {
		Tasks []struct {
			Task  struct{ Name string }
			Hosts map[string]map[string]any
		}
	}
	Stats map[string]struct{ Changed, Failures, Unreachable int }
}

// summary is the role's summary lines (its "Summary" debug task).
func (r playbookRun) summary() string {
	var lines []string
	for _, p := range r.doc.Plays {
		for _, task := range p.Tasks {
			// The role's tasks are named "<role> : <task>".
			if !strings.HasSuffix(task.Task.Name, " : Summary") {
				continue
			}
			for _, h := range task.Hosts {
				if msg, ok := h["msg"].([]any); ok {
					for _, l := range msg {
						lines = append(lines, l.(string))
					}
				}
			}
		}
	}
	return strings.Join(lines, "\n")
}

func (r playbookRun) String() string {
	tail := func(s string, n int) string {
		if len(s) > n {
			return s[len(s)-n:]
		}
		return s
	}
	return fmt.Sprintf("exit %d\nsummary:\n%s\nstderr:\n%s\nstdout:\n%s", r.exit, r.summary(),
		tail(r.stderr, 3000), tail(r.raw, 6000))
}

type fleet struct {
	e        tier
	work     string
	repo     string
	keys     SSHKeys
	bundle   string
	key      string
	gpus     map[string]int
	server   string
	cpuNodes []string
	c        *Cluster
}

func (f fleet) host(name string, extra map[string]any) map[string]any {
	n := f.c.Node(name)
	v := map[string]any{
		"ansible_connection":           "ssh",
		"ansible_host":                 n.Spec.IP,
		"ansible_user":                 "root",
		"ansible_ssh_private_key_file": f.keys.ClientKey,
		"ansible_ssh_common_args":      "-F /dev/null -o UserKnownHostsFile=" + f.keys.KnownHosts + " -o StrictHostKeyChecking=yes",
		// Debian's python3 on the node, with the modules Ansible needs.
		"ansible_python_interpreter": "/usr/bin/python3",
		"gpunode_bundle_src":         f.bundle,
		"gpunode_bundle_dir":         "/var/lib/gpunode-bundle",
		"gpunode_trust_keys":         []string{f.key},
		"gpunode_environment": map[string]string{
			"GPUNODE_STUB_NVML_GPUS": itoa(n.Spec.GPUs), "GPUNODE_SIM_GPU_COUNT": itoa(n.Spec.GPUs)},
	}
	for k, val := range extra {
		v[k] = val
	}
	return v
}

func itoa(i int) string { return fmt.Sprint(i) }

// playbook writes the inventory with these fleet-wide variables and runs
// the rollout playbook with args.
func (f fleet) playbook(t *testing.T, vars map[string]any, args ...string) playbookRun {
	t.Helper()
	all := map[string]any{
		"gpunode_controller_binary":     f.e.gpunode,
		"gpunode_controller_trust_keys": []string{f.key},
		"gpunode_controller_cache":      filepath.Join(f.work, "cache"),
		"gpunode_restart_k3s":           true,
		"gpunode_timeout":               "3m",
	}
	for k, v := range vars {
		all[k] = v
	}
	gpuHosts := map[string]any{}
	for name := range f.gpus {
		gpuHosts[name] = f.host(name, nil)
	}
	cpuHosts := map[string]any{}
	for _, name := range f.cpuNodes {
		cpuHosts[name] = f.host(name, nil)
	}
	inv := map[string]any{"all": map[string]any{"vars": all, "children": map[string]any{
		"gpunode_servers":   map[string]any{"hosts": map[string]any{f.server: f.host(f.server, nil)}},
		"gpunode_gpu_nodes": map[string]any{"hosts": gpuHosts},
		"cpu_nodes":         map[string]any{"hosts": cpuHosts},
	}}}
	b, _ := json.MarshalIndent(inv, "", " ")
	path := filepath.Join(f.work, "inventory.json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("ansible-playbook", append([]string{"gpunode.gpunode.rollout", "-i", path, "-f", "10"}, args...)...)
	cmd.Env = append(os.Environ(),
		"ANSIBLE_COLLECTIONS_PATH="+filepath.Join(f.repo, "packaging", "ansible"),
		"ANSIBLE_CALLBACK_PLUGINS="+filepath.Join(f.repo, "test", "ansible", "callback_plugins"),
		"ANSIBLE_STDOUT_CALLBACK=fleet_json", "ANSIBLE_NOCOLOR=1", "ANSIBLE_RETRY_FILES_ENABLED=0",
		"ANSIBLE_LOCAL_TEMP="+filepath.Join(f.work, "ansible-tmp"),
		// No ControlPersist master: it would outlive the run.
		"ANSIBLE_SSH_ARGS=-o ControlMaster=no")
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	start := time.Now()
	err := cmd.Run()
	r := playbookRun{raw: out.String(), stderr: errb.String()}
	if ee, ok := err.(*exec.ExitError); ok {
		r.exit = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(r.raw), &r.doc); err != nil {
		t.Fatalf("the playbook's output is not the callback's JSON (%v): %v", err, r)
	}
	t.Logf("ansible-playbook %s: exit %d in %v\n%s", strings.Join(args, " "), r.exit,
		time.Since(start).Round(time.Second), r.summary())
	return r
}

// clusterObjects is what gpunode's cluster part writes, as a string to compare.
func clusterObjects(t *testing.T, c *Cluster) string {
	return get(t, c, "{range .items[*]}{.kind}/{.metadata.name}@{.metadata.resourceVersion} {end}",
		"runtimeclass,daemonset,configmap", "-A", "-l", "app.kubernetes.io/managed-by=gpunode") +
		get(t, c, "{.items[*].metadata.name}", "runtimeclass") +
		get(t, c, "{.items[*].metadata.labels}", "nodes")
}

func TestRealAnsible(t *testing.T) {
	e := tierOf(t)
	for _, tool := range []string{"ansible-playbook", "ssh", "ssh-keygen", "/usr/sbin/sshd"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed (scripts/setup.sh installs it)", tool)
		}
	}
	c := startCluster(t, e, NodeOptions{Name: "server", Server: true},
		NodeOptions{Name: "gpu-agent-1", GPUs: 2}, NodeOptions{Name: "gpu-agent-2", GPUs: 1},
		NodeOptions{Name: "cpu-agent"})
	bundle, key := bundleOf(t, e)
	work := t.TempDir()
	keys, err := MakeSSHKeys(work)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range c.Nodes {
		s, err := n.StartSshd(keys)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Stop)
	}
	f := fleet{e: e, work: work, repo: filepath.Dir(filepath.Dir(e.tools)), keys: keys, bundle: bundle, key: key,
		gpus: map[string]int{"gpu-agent-1": 2, "gpu-agent-2": 1}, server: "server", cpuNodes: []string{"cpu-agent"}, c: c}
	step := func(name string, fn func(t *testing.T)) {
		if !t.Run(name, fn) {
			t.FailNow()
		}
	}
	wantAll := func(t *testing.T, resource string, per int) {
		t.Helper()
		for name, gpus := range f.gpus {
			waitAllocatable(t, c, name, resource, gpus*per, 30*time.Second)
		}
	}
	noPluginOnCPUNodes := func(t *testing.T) {
		t.Helper()
		nodes := get(t, c, "{.items[*].spec.nodeName}", "pods", "-n", "kube-system", "-l", "name=nvidia-device-plugin-ds")
		if strings.Contains(nodes, "cpu-agent") || strings.Contains(nodes, "server") {
			t.Fatalf("plugin pods on %q", nodes)
		}
	}

	step("check mode on a fresh fleet changes nothing", func(t *testing.T) {
		before := clusterObjects(t, c)
		r := f.playbook(t, nil, "--check", "--diff")
		if r.exit != 0 {
			t.Fatalf("check mode: %v", r)
		}
		if after := clusterObjects(t, c); after != before {
			t.Fatalf("check mode wrote to the cluster:\n%s\n->\n%s", before, after)
		}
		for name := range f.gpus {
			if c.Node(name).Command(nil, "test", "-e", "/var/lib/gpunode-bundle").Run() == nil {
				t.Fatalf("check mode copied the bundle to %s", name)
			}
		}
	})
	step("default: one slot per GPU on each GPU agent", func(t *testing.T) {
		r := f.playbook(t, nil)
		if r.exit != 0 {
			t.Fatalf("rollout: %v", r)
		}
		wantAll(t, "nvidia.com/gpu", 1)
		noPluginOnCPUNodes(t)
		for name := range f.gpus {
			if !strings.Contains(r.summary(), name) {
				t.Fatalf("the summary does not name %s: %v", name, r)
			}
		}
		if got := allocatable(t, c, "cpu-agent", "nvidia.com/gpu"); got != "" {
			t.Fatalf("cpu-agent advertises nvidia.com/gpu %q", got)
		}
	})
	step("time-slicing 4 renamed: gpu.shared on every node", func(t *testing.T) {
		vars := map[string]any{"gpunode_variant": "time-slicing", "gpunode_replicas": 4,
			"gpunode_rename_shared": true}
		// The plugin serves on both agents: the change needs gpunode_all_nodes.
		r := f.playbook(t, vars)
		if r.exit == 0 || !strings.Contains(r.summary()+r.raw, "gpunode_all_nodes") {
			t.Fatalf("want a failure naming gpunode_all_nodes: %v", r)
		}
		vars["gpunode_all_nodes"] = true
		if r = f.playbook(t, vars); r.exit != 0 {
			t.Fatalf("rollout: %v", r)
		}
		wantAll(t, "nvidia.com/gpu.shared", 4)
		wantAll(t, "nvidia.com/gpu", 0)
		noPluginOnCPUNodes(t)
	})
	step("a rerun changes nothing", func(t *testing.T) {
		before := clusterObjects(t, c)
		r := f.playbook(t, map[string]any{"gpunode_variant": "time-slicing", "gpunode_replicas": 4,
			"gpunode_rename_shared": true, "gpunode_all_nodes": true})
		if r.exit != 0 {
			t.Fatalf("rerun: %v", r)
		}
		for host, s := range r.doc.Stats {
			if s.Changed != 0 {
				t.Errorf("rerun: %s changed %d", host, s.Changed)
			}
		}
		if after := clusterObjects(t, c); after != before {
			t.Fatalf("rerun wrote to the cluster:\n%s\n->\n%s", before, after)
		}
	})
}
